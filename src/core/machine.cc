#include "core/machine.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

namespace sp {

Result<int64_t> available_memory_bytes() {
  constexpr const char* kPath = "/proc/meminfo";
  // procfs files report size 0: read to the end instead of by size.
  std::ifstream in(kPath);
  if (!in) return not_found("cannot open '{}'", kPath);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const size_t at = text.find("MemAvailable:");
  if (at == std::string::npos) return not_found("'{}' has no MemAvailable line", kPath);
  const char* p = text.c_str() + at + std::string_view("MemAvailable:").size();
  char* end = nullptr;
  const long long kib = std::strtoll(p, &end, 10);
  if (end == p || kib < 0) return corrupt("'{}': MemAvailable is not a number of kB", kPath);
  return static_cast<int64_t>(kib) * 1024;
}

std::string host_name() {
  char host[256] = {};
  return ::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' ? host : "unknown";
}

}  // namespace sp
