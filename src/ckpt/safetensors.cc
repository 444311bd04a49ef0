// Safetensors reader (safetensors.h): the header validated once by safetensors_header.h, tensor bytes read on
// demand. The writer is safetensors_writer.cc. Rules and messages: docs/formats/safetensors.md.
#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ckpt/safetensors_header.h"

namespace sp::ckpt {

using st_detail::check_file_size;
using st_detail::check_header_length;
using st_detail::quote_name;

struct SafetensorsReader::Source {
  int fd = -1;        // open() readers
  std::string bytes;  // from_bytes() readers: the whole image
  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// Reads exactly n bytes at `offset`; a short read means the file shrank after open.
Status pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path, std::string_view what) {
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return io_error("safetensors '{}': cannot read {} at file offset {}: {}", path, what, offset + done,
                      std::strerror(errno));
    }
    if (got == 0)
      return corrupt("safetensors '{}': file ended at byte {} while reading {} (bytes {}..{})", path, offset + done,
                     what, offset, offset + n)
          .with_hint("the file was truncated or replaced after it was opened");
    done += static_cast<uint64_t>(got);
  }
  return Status();
}

}  // namespace

// ---------------------------------------------------------------------------------------------- reader

Result<SafetensorsReader> SafetensorsReader::open(const std::string& path, SafetensorsLimits limits) {
  auto source = std::make_shared<Source>();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file);
  // reads from a regular file ignore the flag.
  source->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (source->fd < 0) {
    if (errno == ENOENT) return not_found("safetensors file '{}' does not exist", path);
    return io_error("cannot open safetensors file '{}': {}", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(source->fd, &st) != 0)
    return io_error("cannot stat safetensors file '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument("safetensors '{}' is not a regular file", path);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  SP_RETURN_IF_ERROR(check_file_size(path, file_size));
  unsigned char le8[kSafetensorsLengthBytes];
  SP_RETURN_IF_ERROR(pread_all(source->fd, le8, sizeof le8, 0, path, "the header length"));
  SP_ASSIGN_OR_RETURN(const uint64_t n, check_header_length(path, file_size, le8, limits));
  std::string header(n, '\0');  // n <= min(limit, file size - 8): bounded by the real file
  SP_RETURN_IF_ERROR(pread_all(source->fd, header.data(), n, kSafetensorsLengthBytes, path, "the header"));
  return from_header(std::move(source), path, file_size, header, limits);
}

Result<SafetensorsReader> SafetensorsReader::from_bytes(std::string bytes, std::string label,
                                                        SafetensorsLimits limits) {
  auto source = std::make_shared<Source>();
  source->bytes = std::move(bytes);
  const std::string& b = source->bytes;
  SP_RETURN_IF_ERROR(check_file_size(label, b.size()));
  SP_ASSIGN_OR_RETURN(const uint64_t n,
                      check_header_length(label, b.size(), reinterpret_cast<const unsigned char*>(b.data()), limits));
  const std::string_view header(b.data() + kSafetensorsLengthBytes, n);
  return from_header(source, std::move(label), b.size(), header, limits);
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsReader::read(const SafetensorsEntry& entry, void* dst) const {
  if (entry.begin > entry.end || entry.end > data_size_)
    return invalid_argument("safetensors '{}': tensor {} [{}, {}) is not inside the {}-byte data section", label_,
                            quote_name(entry.name), entry.begin, entry.end, data_size_)
        .with_hint("pass an entry of this reader (tensors() or find())");
  if (entry.nbytes() == 0) return Status();
  if (source_->fd < 0) {
    std::memcpy(dst, source_->bytes.data() + data_offset_ + entry.begin, entry.nbytes());
    return Status();
  }
  return pread_all(source_->fd, dst, entry.nbytes(), data_offset_ + entry.begin, label_,
                   fmt::format("tensor {}", quote_name(entry.name)));
}

Status SafetensorsReader::read_f32(std::string_view name, const Shape& expected_shape, float* dst) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr)
    return not_found("safetensors '{}': no tensor {} (the file has {} tensors)", label_, quote_name(name),
                     tensors_.size());
  if (e->dtype != DType::kF32)
    return failed_precondition("safetensors '{}': tensor {} is {}, expected F32", label_, quote_name(name),
                               dtype_name(e->dtype));
  if (e->shape != expected_shape)
    return failed_precondition("safetensors '{}': tensor {} has shape {}, expected {}", label_, quote_name(name),
                               shape_string(e->shape), shape_string(expected_shape))
        .with_hint("the weights were saved for a different model configuration");
  return read(*e, dst);
}

Result<SafetensorsReader> SafetensorsReader::from_header(std::shared_ptr<const Source> source, std::string label,
                                                         uint64_t file_size, std::string_view header,
                                                         const SafetensorsLimits& limits) {
  SP_ASSIGN_OR_RETURN(st_detail::ParsedHeader parsed, st_detail::parse_header(label, file_size, header, limits));
  const uint64_t data_offset = kSafetensorsLengthBytes + header.size();
  SafetensorsReader r;
  r.tensors_ = std::move(parsed.entries);
  for (size_t i = 0; i < r.tensors_.size(); ++i) r.index_.emplace(r.tensors_[i].name, i);
  r.metadata_ = std::move(parsed.metadata);
  r.label_ = std::move(label);
  r.source_ = std::move(source);
  r.data_offset_ = data_offset;
  r.data_size_ = file_size - data_offset;
  return r;
}

}  // namespace sp::ckpt
