// The safetensors header's validation (docs/formats/safetensors.md), shared by the reader (safetensors.cc):
// the 8-byte length against the limits and the real file size, the JSON header walked with nlohmann's SAX
// interface into a fixed-depth state machine (no DOM; nesting deeper than root -> entry -> shape/offsets is
// refused at once, every duplicate key is seen), each entry checked as it closes, and the entries' tiling of
// the data section. Internal to ckpt/safetensors*.cc; not an API.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/safetensors.h"
#include "core/status.h"

namespace sp::ckpt::st_detail {

inline constexpr size_t kMaxQuoted = 120;  // bytes of a name or token quoted in a message

// Bytes from the file, safe to print: control bytes (and, with ascii_only, every byte >= 0x80) escaped
// as \xNN; long strings cut at a UTF-8 boundary.
std::string escaped(std::string_view s, size_t max_bytes, bool ascii_only);
std::string quote_name(std::string_view s);  // 'name', escaped and cut

// A file shorter than the 8-byte length field.
Status check_file_size(const std::string& label, uint64_t file_size);
// The header length N from the first 8 bytes (little-endian), within the limit and the file.
Result<uint64_t> check_header_length(const std::string& label, uint64_t file_size, const unsigned char* le8,
                                     const SafetensorsLimits& limits);

struct ParsedHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by (begin, end), ties in header order; they tile the data
  std::map<std::string, std::string> metadata;
};
// Every rule of the header of a `file_size`-byte file (data offset = 8 + header.size()).
Result<ParsedHeader> parse_header(const std::string& label, uint64_t file_size, std::string_view header,
                                  const SafetensorsLimits& limits);

}  // namespace sp::ckpt::st_detail
