// Safetensors reader and writer (https://github.com/huggingface/safetensors): 8-byte little-endian
// header length N, N bytes of UTF-8 JSON {name: {dtype, shape, data_offsets}, "__metadata__"?}, data.
// Not a checkpoint: ckpt/ shards build on it and do their own naming, manifests and atomic commit.
// Invariant: a reader exists only for a file whose header passed every rule in
// docs/formats/safetensors.md (entries tile the data section exactly, sizes overflow-checked,
// exact file length); tensor bytes are read on demand and never trusted to size an allocation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace sp::ckpt {

constexpr uint64_t kSafetensorsLengthBytes = 8;  // the little-endian u64 before the header
constexpr uint64_t kSafetensorsHeaderAlign = 8;  // the writer pads 8 + N to a multiple of this
constexpr size_t kSafetensorsMaxDims = 8;        // more dims than this is rejected as corrupt
constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // relative to the data section (reader: data_offset())
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsLimits {
  uint64_t max_header_bytes = 100ull << 20;
  uint64_t max_tensors = 1u << 20;
};

class SafetensorsReader {
 public:
  // Reads and validates only the header (bounded by limits and by the real file size), then reads tensor
  // bytes on demand with pread. Errors name the file and the offending tensor/field/offset.
  static Result<SafetensorsReader> open(const std::string& path, SafetensorsLimits limits = {});
  // Same validation over an in-memory image (fuzzing, tests).
  static Result<SafetensorsReader> from_bytes(std::string bytes, std::string label = "<memory>",
                                              SafetensorsLimits limits = {});

  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }  // in data-offset order
  const SafetensorsEntry* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t data_offset() const { return data_offset_; }  // 8 + N
  uint64_t data_size() const { return data_size_; }      // file size - data_offset()
  const std::string& label() const { return label_; }    // the path, or the label given to from_bytes

  // Reads the bytes of `entry` into dst (entry.nbytes() bytes). A file shortened after open is an error.
  Status read(const SafetensorsEntry& entry, void* dst) const;
  // Convenience: checks dtype F32 and exact shape, then reads; error names tensor, expected vs found.
  Status read_f32(std::string_view name, const Shape& expected_shape, float* dst) const;

 private:
  struct Source;  // an open file descriptor or an in-memory image; shared by copies of the reader
  SafetensorsReader() = default;
  static Result<SafetensorsReader> from_header(std::shared_ptr<const Source> source, std::string label,
                                               uint64_t file_size, std::string_view header,
                                               const SafetensorsLimits& limits);

  std::string label_;
  std::shared_ptr<const Source> source_;
  std::vector<SafetensorsEntry> tensors_;             // sorted by (begin, end), ties in header order
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
  uint64_t data_offset_ = 0;
  uint64_t data_size_ = 0;
};

class SafetensorsWriter {
 public:
  // Keys and values must be valid UTF-8 (SP_CHECK). Setting a key twice keeps the last value.
  void set_metadata(std::string key, std::string value);
  // Non-owning: `data` must stay valid until write(). Names must be unique, valid UTF-8 and not
  // "__metadata__"; dims non-negative, at most kSafetensorsMaxDims (all SP_CHECK): whatever the reader
  // accepts, the writer can write. Data is laid out in insertion order; the JSON keys follow that order.
  void add(std::string name, DType dtype, Shape shape, const void* data);
  // Streams header + tensors to `path` with large writes, fsyncs the file. Does not rename (the checkpoint
  // writer does its own atomic commit); errors name the path (ENOSPC etc. -> Status, never a crash), and a
  // partly written file is removed.
  Status write(const std::string& path) const;
  std::string to_bytes() const;  // whole image in memory (tests, small files)
  uint64_t file_size() const;    // exact size write() will produce

  // The 8-byte length followed by the space-padded JSON header: the first data_offset bytes of the file.
  std::string header_bytes() const;

 private:
  struct Item {
    std::string name;
    DType dtype;
    Shape shape;
    const void* data;
    uint64_t nbytes;
  };
  std::vector<Item> items_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in items_
  std::map<std::string, std::string> metadata_;
  uint64_t data_bytes_ = 0;
};

}  // namespace sp::ckpt
