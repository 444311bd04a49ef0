// Safetensors writer (safetensors.h): streamed, coalescing small tensors, fsynced.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "ckpt/safetensors_header.h"
#include "core/check.h"

namespace sp::ckpt {

using st_detail::quote_name;

namespace {
constexpr uint64_t kWriteChunk = 8ull << 20;  // writer coalesces small tensors up to this many bytes
}  // namespace

namespace {
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();  // the same check (strict) the header dump applies
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

Status write_all(int fd, const char* p, uint64_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t put = ::write(fd, p, std::min<uint64_t>(n, 1ull << 30));
    if (put < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write safetensors file '{}': {}", path, std::strerror(errno));
    }
    p += put;
    n -= static_cast<uint64_t>(put);
  }
  return Status();
}
}  // namespace

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  SP_CHECK(valid_utf8(key) && valid_utf8(value), "safetensors metadata key {} or its value is not valid UTF-8",
           quote_name(key));
  metadata_[std::move(key)] = std::move(value);
}

void SafetensorsWriter::add(std::string name, DType dtype, Shape shape, const void* data) {
  SP_CHECK(name != kSafetensorsMetadataKey && valid_utf8(name),
           "safetensors tensor name {} is reserved or not valid UTF-8", quote_name(name));
  SP_CHECK(!index_.count(name), "safetensors tensor {} added twice", quote_name(name));
  SP_CHECK(shape.size() <= kSafetensorsMaxDims, "tensor {} has {} dims, more than {}", quote_name(name), shape.size(),
           kSafetensorsMaxDims);
  const auto numel = static_cast<uint64_t>(shape_numel(shape));  // SP_CHECKs negative dims and overflow
  const uint64_t elem = dtype_size(dtype);
  SP_CHECK(numel <= UINT64_MAX / elem && data_bytes_ <= UINT64_MAX - numel * elem, "tensor {} overflows the file",
           quote_name(name));
  SP_CHECK(data != nullptr || numel == 0, "tensor {} has no data", quote_name(name));
  index_.emplace(name, items_.size());
  items_.push_back(Item{std::move(name), dtype, std::move(shape), data, numel * elem});
  data_bytes_ += numel * elem;
}

std::string SafetensorsWriter::header_bytes() const {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!metadata_.empty()) root[std::string(kSafetensorsMetadataKey)] = metadata_;
  uint64_t offset = 0;
  for (const Item& it : items_) {
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = dtype_name(it.dtype);
    e["shape"] = it.shape;
    e["data_offsets"] = nlohmann::ordered_json::array({offset, offset + it.nbytes});
    root[it.name] = std::move(e);
    offset += it.nbytes;
  }
  std::string json = root.dump();  // compact, raw UTF-8: the layout of the reference (Rust) writer
  json.append((kSafetensorsHeaderAlign - json.size() % kSafetensorsHeaderAlign) % kSafetensorsHeaderAlign, ' ');
  std::string out(kSafetensorsLengthBytes, '\0');
  for (uint64_t i = 0, n = json.size(); i < kSafetensorsLengthBytes; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xFF);
  return out + json;
}

uint64_t SafetensorsWriter::file_size() const { return header_bytes().size() + data_bytes_; }

std::string SafetensorsWriter::to_bytes() const {
  std::string out = header_bytes();
  out.reserve(out.size() + data_bytes_);
  for (const Item& it : items_) out.append(static_cast<const char*>(it.data), it.nbytes);
  return out;
}

Status SafetensorsWriter::write(const std::string& path) const {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create safetensors file '{}': {}", path, std::strerror(errno));
  // Small tensors are gathered into one buffer of up to kWriteChunk bytes; large ones go straight out.
  std::string buffer = header_bytes();
  Status s;
  for (const Item& it : items_) {
    if (!s.ok()) break;
    if (buffer.size() + it.nbytes > kWriteChunk) {
      s = write_all(fd, buffer.data(), buffer.size(), path);
      buffer.clear();
    }
    if (!s.ok()) break;
    if (it.nbytes >= kWriteChunk)
      s = write_all(fd, static_cast<const char*>(it.data), it.nbytes, path);
    else
      buffer.append(static_cast<const char*>(it.data), it.nbytes);
  }
  if (s.ok()) s = write_all(fd, buffer.data(), buffer.size(), path);
  if (s.ok() && ::fsync(fd) != 0) s = io_error("cannot fsync safetensors file '{}': {}", path, std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (::close(fd) != 0 && s.ok()) s = io_error("cannot close safetensors file '{}': {}", path, std::strerror(errno));
  if (!s.ok() && regular) ::unlink(path.c_str());  // never leave a torn file under the final name
  return s;
}

}  // namespace sp::ckpt
