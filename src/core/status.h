// Status and Result<T>: the channel for expected failures (bad file, bad flag, corrupted shard).
// A broken invariant is not a Status: it is an SP_CHECK (check.h) that aborts the job.
// Every message names the thing that failed; `hint` says how to fix it where that is known.
// Exit codes (docs/architecture.md): usage/configuration errors map to 2, everything else to 1.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

namespace sp {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad config key, flag or value: exit 2
  kNotFound,            // missing file, tensor or key
  kCorrupt,             // a file whose bytes contradict its own description
  kIo,                  // the operating system refused a read or write
  kFailedPrecondition,  // valid input that cannot be used here (contract mismatch, nothing to resume)
  kDeadlineExceeded,    // watchdog
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string hint = {})
      : code_(code), message_(std::move(message)), hint_(std::move(hint)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

  // "message" or "message\n  hint: hint".
  std::string to_string() const;
  // 0 for ok, 2 for usage/configuration errors, 1 otherwise.
  int exit_code() const;
  // Prefixes the message with context ("loading ckpt/step-000004: ...").
  Status with_context(const std::string& context) const;
  Status with_hint(std::string hint) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string hint_;
};

template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status not_found(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status corrupt(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kCorrupt, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status io_error(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kIo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status failed_precondition(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kFailedPrecondition, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status internal_error(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(f, std::forward<Args>(args)...));
}

// Result<T>: a value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace sp

#define SP_CONCAT_INNER_(a, b) a##b
#define SP_CONCAT_(a, b) SP_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not ok.
#define SP_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::sp::Status sp_status_ = (expr);        \
    if (!sp_status_.ok()) return sp_status_; \
  } while (0)

// `SP_ASSIGN_OR_RETURN(auto x, make_x());` binds the value or returns the Status.
#define SP_ASSIGN_OR_RETURN(lhs, expr) SP_ASSIGN_OR_RETURN_IMPL_(SP_CONCAT_(sp_result_, __LINE__), lhs, expr)
#define SP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
