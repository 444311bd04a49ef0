// What train.gemm32 = "auto" (the default) resolves to: the backend gemm32_pick chose for this host, measured once
// (gemm32_probe.h) and kept in the user's cache file (the CLI sets it: $XDG_CACHE_HOME/shardproof/gemm32.json),
// one entry per host key (CPU, OpenBLAS core, oneDNN ISA, threads), so that every later run of the host runs the
// same backend — the same bits for the same configuration — without measuring again. Concurrent processes of a
// host serialize on an exclusive lock of FILE.lock: one measures, the others read its entry.
// Not a tuner: measured once; deleting the file (or its entry) measures again, and a run's contract records the
// backend it resolved to (config.train.gemm32), so a resume or a comparison on another pick is refused by name.
// Without a cache file (unit tests, benchmarks) the pick is measured once per process and kept in memory.
// A multi-rank run uses rank 0's pick on every rank (parallel/trainer.cc). Reference: docs/kernels.md §"The fp32 GEMM".
#pragma once

#include <string>

#include "core/status.h"
#include "kernels/gemm32_probe.h"
#include "kernels/matmul.h"

namespace sp::kernels {

// The cache file ("" for none). Process-wide; set by the CLI before any run.
void set_gemm32_cache_file(std::string path);
const std::string& gemm32_cache_file();

struct Gemm32Auto {
  Gemm32Kind kind = Gemm32Kind::kOpenBlas;  // never kAuto
  Gemm32Probe probe;                        // the measurement behind it (from the cache, or just taken)
  std::string origin;                       // "measured now", "cached in FILE (measured AT on HOST)", ...
};

// The pick for this host at `threads`: the cache file's entry for gemm32_host_key(threads), else measured and
// written there. A cache that cannot be read (damaged, not JSON) is replaced, one that cannot be written is an
// error naming it (the pick would not survive the process; a later run could pick the other backend); both only
// when a cache file is set. Memoized per thread count for the process.
Result<Gemm32Auto> gemm32_auto(int threads);

// How long gemm32_auto waits for another process's lock on the cache (default 60 s: a probe takes about a
// second) before it measures without caching, with a warning; tests shorten it.
void set_gemm32_lock_wait(double seconds);

// `kind` itself, or for kAuto gemm32_auto(threads).kind.
Result<Gemm32Kind> resolve_gemm32(Gemm32Kind kind, int threads);

}  // namespace sp::kernels
