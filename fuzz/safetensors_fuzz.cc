// libFuzzer target for ckpt/safetensors: any input must give a reader whose entries tile the image and
// read back its bytes (and survive a writer round trip), or a kCorrupt Status; never a crash or a leak.
// Not part of the default build (needs clang++ and libclang-rt; scripts/install-deps.sh installs
// neither): build and run with fuzz/build.sh. The bounded, always-on twin is
// tests/unit/safetensors_fuzz_test.cc.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "safetensors_fuzz: %s\n", what);
  std::abort();
}

void check(const sp::ckpt::SafetensorsReader& r, const std::string& image) {
  using sp::ckpt::SafetensorsEntry;
  if (r.data_offset() + r.data_size() != image.size()) die("reader does not cover the image");
  uint64_t cursor = 0;
  std::vector<char> buf;
  for (const SafetensorsEntry& e : r.tensors()) {
    if (e.begin != cursor) die("entries do not tile the data section");
    if (static_cast<uint64_t>(sp::shape_numel(e.shape)) * sp::dtype_size(e.dtype) != e.nbytes()) die("size mismatch");
    if (r.find(e.name) != &e) die("find() disagrees with tensors()");
    buf.assign(e.nbytes() + 1, '\0');
    if (!r.read(e, buf.data()).ok()) die("read failed on an accepted image");
    if (std::memcmp(buf.data(), image.data() + r.data_offset() + e.begin, e.nbytes()) != 0) die("read wrong bytes");
    cursor = e.end;
  }
  if (cursor != r.data_size()) die("trailing bytes accepted");
  sp::ckpt::SafetensorsWriter w;
  for (const SafetensorsEntry& e : r.tensors())
    w.add(e.name, e.dtype, e.shape, e.nbytes() ? image.data() + r.data_offset() + e.begin : nullptr);
  for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
  auto again = sp::ckpt::SafetensorsReader::from_bytes(w.to_bytes());
  if (!again.ok()) die("writer output of an accepted image is rejected");
  if (again->tensors().size() != r.tensors().size() || again->metadata() != r.metadata()) die("round trip differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string image(reinterpret_cast<const char*>(data), size);
  auto r = sp::ckpt::SafetensorsReader::from_bytes(image, "fuzz");
  if (r.ok()) {
    check(*r, image);
  } else if (r.status().code() != sp::StatusCode::kCorrupt) {
    die("a bad image gave a status other than kCorrupt");
  }
  return 0;
}
