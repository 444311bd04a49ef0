// What this machine offers a process, read from the operating system (Linux /proc): the memory it
// can still allocate without swapping, and its host name. Facts about the machine, not the process
// environment (no variable is read here). Invariant: a value that cannot be read is an error naming
// the file, never a guess.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace sp {

// MemAvailable of /proc/meminfo, in bytes: the kernel's estimate of what can be allocated without swapping.
Result<int64_t> available_memory_bytes();
// gethostname(2), or "unknown".
std::string host_name();

}  // namespace sp
