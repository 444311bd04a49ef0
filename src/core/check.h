// SP_CHECK: the channel for broken invariants. On failure it prints file:line, the rank prefix
// (rank and grid coordinates), the condition and a formatted message, then calls the fatal handler.
// comm/ installs MPI_Abort as the handler so that no peer is left waiting in a collective;
// before MPI is up the handler is std::abort. Expected failures use Status (status.h) instead.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <utility>

namespace sp {

// Called after the failure message is printed; must not return.
using FatalHandler = std::function<void()>;
void set_fatal_handler(FatalHandler handler);
// Called first on a failed check, before the fatal handler: last words such as flushing the
// communication op this rank was in (comm/watchdog.h). Must not fail and must not call MPI.
void set_before_fatal(FatalHandler hook);
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const std::string& message);

}  // namespace sp

#define SP_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) [[unlikely]]                                                    \
      ::sp::check_failed(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

// Prints both values: "SP_CHECK_EQ(a, b) failed: a = 3, b = 4: message".
#define SP_CHECK_OP_(op, a, b, ...)                                                                                \
  do {                                                                                                             \
    const auto& sp_a_ = (a);                                                                                       \
    const auto& sp_b_ = (b);                                                                                       \
    if (!(sp_a_ op sp_b_)) [[unlikely]]                                                                            \
      ::sp::check_failed(__FILE__, __LINE__, #a " " #op " " #b,                                                    \
                         ::fmt::format("{} = {}, {} = {}: {}", #a, sp_a_, #b, sp_b_, ::fmt::format(__VA_ARGS__))); \
  } while (0)
#define SP_CHECK_EQ(a, b, ...) SP_CHECK_OP_(==, a, b, __VA_ARGS__)
#define SP_CHECK_NE(a, b, ...) SP_CHECK_OP_(!=, a, b, __VA_ARGS__)
#define SP_CHECK_LT(a, b, ...) SP_CHECK_OP_(<, a, b, __VA_ARGS__)
#define SP_CHECK_LE(a, b, ...) SP_CHECK_OP_(<=, a, b, __VA_ARGS__)
#define SP_CHECK_GE(a, b, ...) SP_CHECK_OP_(>=, a, b, __VA_ARGS__)
#define SP_CHECK_GT(a, b, ...) SP_CHECK_OP_(>, a, b, __VA_ARGS__)
