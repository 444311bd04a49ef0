// Tests for ckpt/safetensors: writer -> reader round trips (memory and disk), a reference file written
// from PyTorch tensors by tests/fixtures/safetensors/make_reference.py (read here, reproduced byte for
// byte by our writer, and our file checked by that script), and one crafted file per validation rule of
// docs/formats/safetensors.md, each checking the error code and that the message names the culprit.
#include "ckpt/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::ckpt {
namespace {
namespace SP_TEST_ID {

namespace fs = std::filesystem;

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xFF);
  return out;
}

// An image whose header is exactly `header` (no padding) followed by `data`.
std::string image(std::string_view header, std::string_view data = {}) {
  return le64(header.size()) + std::string(header) + std::string(data);
}

// A one-tensor header {"w": {dtype, shape, data_offsets}} with the three values given as raw JSON.
std::string one(std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return fmt::format(R"({{"w":{{"dtype":{},"shape":{},"data_offsets":{}}}}})", dtype, shape, offsets);
}

// from_bytes must fail as corrupt, with a message that holds the label and every fragment.
void expect_corrupt(const std::string& bytes, std::initializer_list<std::string_view> fragments,
                    SafetensorsLimits limits = {}) {
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(bytes, "crafted.safetensors", limits);
  ASSERT_FALSE(r.ok()) << "accepted an invalid image of " << bytes.size() << " bytes";
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
  EXPECT_NE(r.status().message().find("'crafted.safetensors'"), std::string::npos) << r.status().message();
  for (std::string_view f : fragments)
    EXPECT_NE(r.status().message().find(f), std::string::npos) << "no '" << f << "' in: " << r.status().message();
}

using sp::test::source_dir;
using sp::test::TempDir;

// ------------------------------------------------------------------------------------------ round trips

struct Sample {
  std::vector<float> f32 = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, -7.f, 8.f, 9.f, 10.f, 11.f, 12.f, 13.f};  // (3, 4)
  std::vector<uint16_t> bf16 = {0x3F80, 0xC020};                                                      // (2,)
  std::vector<int64_t> i64 = {-1, INT64_MAX, INT64_MIN, 42};                                          // (2, 2)
  std::vector<uint8_t> u8 = {0, 1, 127, 128, 255};                                                    // (5,)
  std::vector<uint8_t> flags = {1, 0, 1};                                                             // (3,) BOOL
  float scalar = 7.25f;                                                                               // () 0-d
  double f64 = 3.141592653589793;                                                                     // 8 dims of 1

  SafetensorsWriter writer() const {
    SafetensorsWriter w;
    w.add("model.f32", DType::kF32, {3, 4}, f32.data());
    w.add("model.bf16", DType::kBF16, {2}, bf16.data());
    w.add("empty", DType::kF32, {0, 3}, nullptr);
    w.add("ids", DType::kI64, {2, 2}, i64.data());
    w.add("bytes", DType::kU8, {5}, u8.data());
    w.add("flags", DType::kBool, {3}, flags.data());
    w.add("scalar", DType::kF32, {}, &scalar);
    w.add("also.empty", DType::kI32, {4, 0, 2}, nullptr);
    w.add("deep", DType::kF64, {1, 1, 1, 1, 1, 1, 1, 1}, &f64);
    w.set_metadata("format", "pt");
    w.set_metadata("loss", "2.5");
    w.set_metadata("ünïcode", "✓");
    return w;
  }

  void expect_matches(const SafetensorsReader& r) const {
    const std::vector<std::tuple<std::string, DType, Shape, const void*, size_t>> want = {
        {"model.f32", DType::kF32, {3, 4}, f32.data(), 48},
        {"model.bf16", DType::kBF16, {2}, bf16.data(), 4},
        {"empty", DType::kF32, {0, 3}, nullptr, 0},
        {"ids", DType::kI64, {2, 2}, i64.data(), 32},
        {"bytes", DType::kU8, {5}, u8.data(), 5},
        {"flags", DType::kBool, {3}, flags.data(), 3},
        {"scalar", DType::kF32, {}, &scalar, 4},
        {"also.empty", DType::kI32, {4, 0, 2}, nullptr, 0},
        {"deep", DType::kF64, {1, 1, 1, 1, 1, 1, 1, 1}, &f64, 8},
    };
    ASSERT_EQ(r.tensors().size(), want.size());
    uint64_t offset = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& [name, dtype, shape, data, nbytes] = want[i];
      const SafetensorsEntry& e = r.tensors()[i];  // insertion order is data order
      SCOPED_TRACE(name);
      EXPECT_EQ(e.name, name);
      EXPECT_EQ(e.dtype, dtype);
      EXPECT_EQ(e.shape, shape);
      EXPECT_EQ(e.begin, offset);
      EXPECT_EQ(e.nbytes(), nbytes);
      EXPECT_EQ(r.find(name), &e);
      std::vector<char> got(nbytes + 1, '\x5a');
      ASSERT_TRUE(r.read(e, got.data()).ok());
      if (nbytes) {
        EXPECT_EQ(std::memcmp(got.data(), data, nbytes), 0);
      }
      EXPECT_EQ(got[nbytes], '\x5a') << "read wrote past nbytes";
      offset = e.end;
    }
    EXPECT_EQ(offset, r.data_size());
    EXPECT_EQ(r.find("missing"), nullptr);
    const std::map<std::string, std::string> meta = {{"format", "pt"}, {"loss", "2.5"}, {"ünïcode", "✓"}};
    EXPECT_EQ(r.metadata(), meta);
    EXPECT_EQ(r.data_offset() % kSafetensorsHeaderAlign, 0u);
  }
};

TEST(SafetensorsRoundTrip, InMemoryAllDtypesScalarEmptyAndMetadata) {
  const Sample s;
  const SafetensorsWriter w = s.writer();
  const std::string bytes = w.to_bytes();
  EXPECT_EQ(bytes.size(), w.file_size());
  EXPECT_EQ(bytes.substr(0, w.header_bytes().size()), w.header_bytes());
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  s.expect_matches(*r);
  EXPECT_EQ(r->data_offset() + r->data_size(), bytes.size());
}

TEST(SafetensorsRoundTrip, OnDiskMatchesMemoryImage) {
  const TempDir dir;
  const Sample s;
  const SafetensorsWriter w = s.writer();
  const std::string path = dir.file("sample.safetensors");
  ASSERT_TRUE(w.write(path).ok());
  Result<std::string> disk = read_file(path);
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ(*disk, w.to_bytes());
  Result<SafetensorsReader> r = SafetensorsReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->label(), path);
  s.expect_matches(*r);
  // Copies share the open file; the original may go away first.
  std::optional<SafetensorsReader> copy(*r);
  r = SafetensorsReader::from_bytes("");  // drops the original's reference
  ASSERT_FALSE(r.ok());
  s.expect_matches(*copy);
}

TEST(SafetensorsRoundTrip, LargeTensorsStreamPastTheWriteBuffer) {
  const TempDir dir;
  std::vector<float> big(5u << 20);  // 20 MiB: bigger than the writer's 8 MiB coalescing buffer
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.25f;
  std::vector<float> small(1000, -1.f);
  SafetensorsWriter w;
  w.add("small.a", DType::kF32, {1000}, small.data());
  w.add("big", DType::kF32, {5, 1 << 20}, big.data());
  w.add("small.b", DType::kF32, {10, 100}, small.data());
  const std::string path = dir.file("big.safetensors");
  ASSERT_TRUE(w.write(path).ok());
  EXPECT_EQ(fs::file_size(path), w.file_size());
  Result<SafetensorsReader> r = SafetensorsReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<float> got(big.size());
  ASSERT_TRUE(r->read_f32("big", {5, 1 << 20}, got.data()).ok());
  EXPECT_EQ(got, big);
  std::vector<float> got_small(1000);
  ASSERT_TRUE(r->read_f32("small.b", {10, 100}, got_small.data()).ok());
  EXPECT_EQ(got_small, small);
}

TEST(SafetensorsRoundTrip, HeaderIsPaddedWithSpacesToEightBytes) {
  for (int len = 1; len <= 17; ++len) {
    float x = 1.f;
    SafetensorsWriter w;
    w.add(std::string(len, 'n'), DType::kF32, {}, &x);
    const std::string bytes = w.to_bytes();
    Result<SafetensorsReader> r = SafetensorsReader::from_bytes(bytes);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->data_offset() % 8, 0u) << len;
    const std::string header = bytes.substr(8, r->data_offset() - 8);
    const size_t close = header.rfind('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << header;
    EXPECT_LT(header.size() - close - 1, 8u);
  }
}

TEST(SafetensorsRoundTrip, EmptyFileHasNoTensors) {
  SafetensorsWriter w;
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(w.to_bytes());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->tensors().empty());
  EXPECT_TRUE(r->metadata().empty());
  EXPECT_EQ(w.file_size(), 16u);  // length + "{}" padded to 8
}

TEST(SafetensorsRoundTrip, TensorsAreListedInDataOrderWhateverTheHeaderOrder) {
  // Header lists c, b, a; data order is a [0,4), b [4,4) (empty), c [4,8).
  const std::string h = R"({"c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                        R"("b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                        R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(image(h, std::string(8, '\1')));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors().size(), 3u);
  EXPECT_EQ(r->tensors()[0].name, "a");
  EXPECT_EQ(r->tensors()[1].name, "b");
  EXPECT_EQ(r->tensors()[2].name, "c");
  EXPECT_EQ(r->find("c")->begin, 4u);
}

TEST(SafetensorsRoundTrip, HeaderMayBePaddedWithWhitespace) {
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(image(one(R"("U8")", "[2]", "[0,2]") + "  \n\t ", "ab"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
}

TEST(SafetensorsReadF32, ChecksDtypeShapeAndName) {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const uint16_t h = 0x3F80;
  SafetensorsWriter w;
  w.add("w", DType::kF32, {2, 3}, v.data());
  w.add("h", DType::kBF16, {1}, &h);
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(w.to_bytes(), "weights.safetensors");
  ASSERT_TRUE(r.ok());
  std::vector<float> got(6);
  ASSERT_TRUE(r->read_f32("w", {2, 3}, got.data()).ok());
  EXPECT_EQ(got, v);

  Status s = r->read_f32("w", {3, 2}, got.data());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("tensor 'w' has shape (2, 3), expected (3, 2)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("weights.safetensors"), std::string::npos);
  s = r->read_f32("h", {1}, got.data());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("tensor 'h' is BF16, expected F32"), std::string::npos) << s.message();
  s = r->read_f32("nope", {1}, got.data());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no tensor 'nope'"), std::string::npos) << s.message();
}

TEST(SafetensorsReader, RejectsAnEntryFromAnotherFile) {
  const float x = 1.f;
  SafetensorsWriter w;
  w.add("x", DType::kF32, {}, &x);
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(w.to_bytes());
  ASSERT_TRUE(r.ok());
  SafetensorsEntry foreign{.name = "y", .dtype = DType::kF32, .shape = {1000}, .begin = 0, .end = 4000};
  std::vector<char> dst(4000);
  const Status s = r->read(foreign, dst.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'y' [0, 4000) is not inside the 4-byte data section"), std::string::npos)
      << s.message();
}

// ------------------------------------------------------------------------------------------ file errors

TEST(SafetensorsFile, MissingFileIsNotFound) {
  Result<SafetensorsReader> r = SafetensorsReader::open("/nonexistent/dir/w.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/w.safetensors"), std::string::npos);
}

TEST(SafetensorsFile, DirectoryIsNotARegularFile) {
  const TempDir dir;
  Result<SafetensorsReader> r = SafetensorsReader::open(dir.file(""));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a regular file"), std::string::npos) << r.status().message();
}

TEST(SafetensorsFile, FifoIsRefusedWithoutWaitingForAWriter) {
  const TempDir dir;
  const std::string path = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Result<SafetensorsReader> r = SafetensorsReader::open(path);  // would block forever without O_NONBLOCK
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is not a regular file"), std::string::npos) << r.status().message();
}

TEST(SafetensorsFile, OpenReportsTheSameRulesWithThePath) {
  const TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  struct Case {
    std::string bytes;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"abc", "file is 3 bytes, shorter than the 8-byte header length"},
      {le64(1000) + "{}", "header length 1000 (bytes 0..8) runs past the end of the 10-byte file"},
      {image(one(R"("F32")", "[1]", "[0,4]"), "abcdX"), "1 trailing bytes after the last tensor"},
      {image(one(R"("F32")", "[1]", "[0,4]"), "ab"), "run past the 2-byte data section"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(write_file(path, c.bytes).ok());
    Result<SafetensorsReader> r = SafetensorsReader::open(path);
    ASSERT_FALSE(r.ok()) << c.fragment;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find("'" + path + "'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.fragment), std::string::npos) << r.status().message();
  }
}

TEST(SafetensorsFile, FileTruncatedAfterOpenIsAnErrorOnRead) {
  const TempDir dir;
  const std::string path = dir.file("shrinks.safetensors");
  const std::vector<float> v(256, 3.f);
  SafetensorsWriter w;
  w.add("v", DType::kF32, {256}, v.data());
  ASSERT_TRUE(w.write(path).ok());
  Result<SafetensorsReader> r = SafetensorsReader::open(path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(r->data_offset() + 100)), 0);
  std::vector<float> got(256);
  const Status s = r->read(*r->find("v"), got.data());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("while reading tensor 'v'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(SafetensorsWrite, NoSpaceLeftIsAStatusNamingThePath) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::vector<float> v(1024, 1.f);
  SafetensorsWriter w;
  w.add("v", DType::kF32, {1024}, v.data());
  const Status s = w.write("/dev/full");
  EXPECT_EQ(s.code(), StatusCode::kIo);
  EXPECT_NE(s.message().find("'/dev/full'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::strerror(ENOSPC)), std::string::npos) << s.message();
  EXPECT_TRUE(fs::exists("/dev/full")) << "the writer must only remove regular files";
}

TEST(SafetensorsWrite, MissingDirectoryIsAStatusNamingThePath) {
  SafetensorsWriter w;
  const Status s = w.write("/nonexistent/dir/out.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kIo);
  EXPECT_NE(s.message().find("/nonexistent/dir/out.safetensors"), std::string::npos) << s.message();
}

TEST(SafetensorsWrite, FailedWriteRemovesThePartialFile) {
  // RLIMIT_FSIZE makes write() fail with EFBIG part-way through (SIGXFSZ ignored for the duration).
  const TempDir dir;
  const std::string path = dir.file("partial.safetensors");
  const std::vector<float> v(1 << 16, 2.f);  // 256 KiB
  SafetensorsWriter w;
  w.add("v", DType::kF32, {1 << 16}, v.data());
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  void (*old_handler)(int) = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status s = w.write(path);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(s.code(), StatusCode::kIo);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(path)) << "a torn file was left behind";
}

// ------------------------------------------------------------------------- PyTorch reference file

std::string fixture_dir() { return source_dir() + "/tests/fixtures/safetensors"; }

template <typename T>
std::vector<T> read_as(const SafetensorsReader& r, const std::string& name, DType dtype, const Shape& shape) {
  const SafetensorsEntry* e = r.find(name);
  EXPECT_NE(e, nullptr) << name;
  if (e == nullptr) return {};
  EXPECT_EQ(e->dtype, dtype) << name;
  EXPECT_EQ(e->shape, shape) << name;
  std::vector<T> out(e->nbytes() / sizeof(T));
  EXPECT_TRUE(r.read(*e, out.data()).ok());
  return out;
}

// The same tensors as make_reference.py, from closed forms and IEEE bit patterns worked out by hand.
SafetensorsWriter reference_writer(std::vector<std::vector<char>>& keep) {
  auto bytes_of = [&keep](const auto& v) {
    keep.emplace_back(reinterpret_cast<const char*>(v.data()),
                      reinterpret_cast<const char*>(v.data()) + v.size() * sizeof(v[0]));
    return keep.back().data();
  };
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("loss", "2.5");
  w.set_metadata("note", "ünïcode ✓");
  w.add("embed.weight", DType::kF32, {2, 3}, bytes_of(std::vector<float>{-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f}));
  w.add("norm.bf16", DType::kBF16, {2, 2}, bytes_of(std::vector<uint16_t>{0x3F80, 0xC020, 0x4049, 0x0000}));
  w.add("half", DType::kF16, {3}, bytes_of(std::vector<uint16_t>{0x3800, 0xBC00, 0x7BFF}));
  w.add("ids", DType::kI64, {2, 2}, bytes_of(std::vector<int64_t>{-1, int64_t{1} << 40, 3, -(int64_t{1} << 62)}));
  w.add("count", DType::kI32, {4}, bytes_of(std::vector<int32_t>{0, -7, INT32_MAX, INT32_MIN}));
  w.add("bytes", DType::kU8, {5}, bytes_of(std::vector<uint8_t>{0, 1, 127, 128, 255}));
  w.add("mask", DType::kBool, {3}, bytes_of(std::vector<uint8_t>{1, 0, 1}));
  w.add("scale", DType::kF32, {}, bytes_of(std::vector<float>{7.25f}));
  w.add("empty", DType::kF32, {0, 4}, nullptr);
  w.add("pi", DType::kF64, {1}, bytes_of(std::vector<double>{3.141592653589793}));
  w.add("layers.0.ünï", DType::kI16, {2}, bytes_of(std::vector<int16_t>{-2, 300}));
  return w;
}

TEST(SafetensorsPyTorch, ReadsTheReferenceFile) {
  Result<SafetensorsReader> r = SafetensorsReader::open(fixture_dir() + "/reference.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tensors().size(), 11u);
  EXPECT_EQ(read_as<float>(*r, "embed.weight", DType::kF32, {2, 3}),
            (std::vector<float>{-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f}));
  EXPECT_EQ(read_as<uint16_t>(*r, "norm.bf16", DType::kBF16, {2, 2}),
            (std::vector<uint16_t>{0x3F80, 0xC020, 0x4049, 0x0000}));
  EXPECT_EQ(read_as<uint16_t>(*r, "half", DType::kF16, {3}), (std::vector<uint16_t>{0x3800, 0xBC00, 0x7BFF}));
  EXPECT_EQ(read_as<int64_t>(*r, "ids", DType::kI64, {2, 2}),
            (std::vector<int64_t>{-1, int64_t{1} << 40, 3, -(int64_t{1} << 62)}));
  EXPECT_EQ(read_as<int32_t>(*r, "count", DType::kI32, {4}), (std::vector<int32_t>{0, -7, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(read_as<uint8_t>(*r, "bytes", DType::kU8, {5}), (std::vector<uint8_t>{0, 1, 127, 128, 255}));
  EXPECT_EQ(read_as<uint8_t>(*r, "mask", DType::kBool, {3}), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(read_as<float>(*r, "scale", DType::kF32, {}), (std::vector<float>{7.25f}));
  EXPECT_EQ(read_as<float>(*r, "empty", DType::kF32, {0, 4}), (std::vector<float>{}));
  EXPECT_EQ(read_as<double>(*r, "pi", DType::kF64, {1}), (std::vector<double>{3.141592653589793}));
  EXPECT_EQ(read_as<int16_t>(*r, "layers.0.ünï", DType::kI16, {2}), (std::vector<int16_t>{-2, 300}));
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"loss", "2.5"}, {"note", "ünïcode ✓"}};
  EXPECT_EQ(r->metadata(), meta);
}

TEST(SafetensorsPyTorch, WriterReproducesTheReferenceBytes) {
  Result<std::string> ref = read_file(fixture_dir() + "/reference.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  std::vector<std::vector<char>> keep;
  const SafetensorsWriter w = reference_writer(keep);
  EXPECT_EQ(w.file_size(), ref->size());
  EXPECT_TRUE(w.to_bytes() == *ref) << "our writer's bytes differ from the reference file";
}

TEST(SafetensorsPyTorch, PythonChecksOurFileAndRegeneratesTheFixture) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const TempDir dir;
  std::vector<std::vector<char>> keep;
  ASSERT_TRUE(reference_writer(keep).write(dir.file("ours.safetensors")).ok());
  const std::string cmd = "/usr/bin/python3 '" + fixture_dir() + "/make_reference.py' --write '" +
                          dir.file("python.safetensors") + "' --check '" + dir.file("ours.safetensors") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Result<std::string> regenerated = read_file(dir.file("python.safetensors"));
  Result<std::string> committed = read_file(fixture_dir() + "/reference.safetensors");
  ASSERT_TRUE(regenerated.ok() && committed.ok());
  EXPECT_TRUE(*regenerated == *committed) << "make_reference.py no longer produces the committed fixture";
}

// ------------------------------------------------------------------ validation: one rule per test

TEST(SafetensorsValidation, FileShorterThanEightBytes) {
  for (size_t n : {0, 1, 7}) expect_corrupt(std::string(n, '\0'), {fmt::format("file is {} bytes, shorter", n)});
}

TEST(SafetensorsValidation, HeaderLengthZero) { expect_corrupt(le64(0) + "{}", {"header length (bytes 0..8) is 0"}); }

TEST(SafetensorsValidation, HeaderLengthOverTheLimit) {
  expect_corrupt(image(R"({"__metadata__":{"a":"b"}})"), {"header length 26 (bytes 0..8) exceeds the limit of 16"},
                 SafetensorsLimits{.max_header_bytes = 16});
  expect_corrupt(le64(UINT64_MAX) + "{}", {"header length 18446744073709551615", "exceeds the limit"});
  expect_corrupt(le64(200ull << 20) + "{}", {"exceeds the limit of 104857600 bytes"});
}

TEST(SafetensorsValidation, HeaderLengthPastTheFileEnd) {
  expect_corrupt(le64(3) + "{}", {"header length 3 (bytes 0..8) runs past the end of the 10-byte file"});
  expect_corrupt(le64(1ull << 20) + "{}", {"header length 1048576", "runs past the end"});
}

TEST(SafetensorsValidation, HeaderNotValidJson) {
  expect_corrupt(image("{"), {"header is not valid JSON"});
  expect_corrupt(image(R"({"w":})"), {"header is not valid JSON near header byte"});
  expect_corrupt(image("{} x"), {"header is not valid JSON"});
  // The parser alone would stop at a NUL as if the input ended there.
  expect_corrupt(image(std::string("{}\0", 3)),
                 {"header is not valid JSON: NUL byte at header byte 2 (file offset 10)"});
  expect_corrupt(image(std::string("{}\0{\"x\":1}", 10)), {"NUL byte at header byte 2"});
  expect_corrupt(image(std::string("{\"a\0\":1}", 8)), {"NUL byte at header byte 3"});
  expect_corrupt(image("{/* comment */}"), {"header is not valid JSON"});
  expect_corrupt(image("{\"__metadata__\":{\"k\":\"\xff\"}}"), {"header is not valid JSON", "UTF-8"});
  expect_corrupt(image("{\"\xc0\xaf\":1}"), {"header is not valid JSON"});  // overlong encoding of '/'
  // The parser alone would skip a byte-order mark; the reference implementation refuses it.
  expect_corrupt(image("\xef\xbb\xbf{}"), {"header is not a JSON object: it starts with '\\xef', not '{'"});
  expect_corrupt(image(" {}"), {"it starts with ' ', not '{'"});
}

TEST(SafetensorsValidation, HeaderNotAnObject) {
  expect_corrupt(image("[]"), {"header is not a JSON object: it starts with '[', not '{'"});
  expect_corrupt(image("3"), {"header is not a JSON object: it starts with '3'"});
  expect_corrupt(image(R"("w")"), {"header is not a JSON object: it starts with '\"'"});
  expect_corrupt(image("null"), {"header is not a JSON object: it starts with 'n'"});
  // Deep nesting is refused at the first level: no recursion, no large allocation.
  expect_corrupt(image(std::string(100000, '[') + std::string(100000, ']')), {"not a JSON object"});
}

TEST(SafetensorsValidation, DuplicateTensorNames) {
  const std::string e = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  expect_corrupt(image(R"({"w":)" + e + R"(,"w":)" + e + "}", "a"), {"duplicate tensor name 'w'"});
  // The same name spelled with an escape is the same key.
  expect_corrupt(image(R"({"w":)" + e + R"(,"\u0077":)" + e + "}", "a"), {"duplicate tensor name 'w'"});
  expect_corrupt(image(R"({"__metadata__":{},"__metadata__":{}})"), {"\"__metadata__\" appears twice"});
  expect_corrupt(image(R"({"__metadata__":{"k":"a","k":"b"}})"), {"\"__metadata__\" has key 'k' twice"});
  expect_corrupt(image(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "a"),
                 {"tensor 'w': key 'dtype' appears twice"});
}

TEST(SafetensorsValidation, MetadataNotAnObjectOfStrings) {
  expect_corrupt(image(R"({"__metadata__":[]})"),
                 {"\"__metadata__\" is not an object of string to string (found an array)"});
  expect_corrupt(image(R"({"__metadata__":"x"})"), {"\"__metadata__\" is not an object", "found string 'x'"});
  expect_corrupt(image(R"({"__metadata__":null})"), {"\"__metadata__\" is not an object", "found null"});
  expect_corrupt(image(R"({"__metadata__":{"step":4}})"),
                 {"\"__metadata__\" value for key 'step' is not a string (found number 4)"});
  expect_corrupt(image(R"({"__metadata__":{"k":{"a":"b"}}})"), {"value for key 'k' is not a string (found an object)"});
  expect_corrupt(image(R"({"__metadata__":{"k":["a"]}})"), {"value for key 'k' is not a string (found an array)"});
}

TEST(SafetensorsValidation, EntryNotAnObject) {
  expect_corrupt(image(R"({"w":[0,4]})"), {"tensor 'w': entry is not an object (found an array)"});
  expect_corrupt(image(R"({"w":"F32"})"), {"tensor 'w': entry is not an object (found string 'F32')"});
  expect_corrupt(image(R"({"w":true})"), {"tensor 'w': entry is not an object (found a boolean)"});
}

TEST(SafetensorsValidation, EntryWithUnknownKey) {
  expect_corrupt(image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"offset":0}})", "a"),
                 {"tensor 'w': unknown key 'offset' (allowed: dtype, shape, data_offsets)"});
}

TEST(SafetensorsValidation, EntryWithMissingKey) {
  expect_corrupt(image(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "a"), {"tensor 'w': missing key 'dtype'"});
  expect_corrupt(image(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", "a"), {"tensor 'w': missing key 'shape'"});
  expect_corrupt(image(R"({"w":{"dtype":"U8","shape":[1]}})", "a"), {"tensor 'w': missing key 'data_offsets'"});
  expect_corrupt(image(R"({"w":{}})"), {"tensor 'w': missing key 'dtype'"});
}

TEST(SafetensorsValidation, UnknownDtype) {
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(image(one(R"("F8_E4M3")", "[1]", "[0,1]"), "a"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'w': unknown dtype 'F8_E4M3'"), std::string::npos);
  EXPECT_NE(r.status().hint().find("F32, BF16"), std::string::npos) << r.status().hint();
  expect_corrupt(image(one(R"("f32")", "[1]", "[0,4]"), "abcd"), {"unknown dtype 'f32'"});
  expect_corrupt(image(one("32", "[1]", "[0,4]"), "abcd"), {"tensor 'w': dtype is not a string (found number 32)"});
  expect_corrupt(image(one(R"(["F32"])", "[1]", "[0,4]"), "abcd"), {"dtype is not a string (found an array)"});
}

TEST(SafetensorsValidation, ShapeNotAnArrayOfNonNegativeIntegers) {
  expect_corrupt(image(one(R"("U8")", "4", "[0,4]")),
                 {"tensor 'w': shape is not an array of non-negative integers (found number 4)"});
  expect_corrupt(image(one(R"("U8")", R"({"0":4})", "[0,4]")), {"shape is not an array", "found an object"});
  expect_corrupt(image(one(R"("U8")", "[2,-1]", "[0,4]")),
                 {"tensor 'w': shape element 1 is not a non-negative integer (found number -1)"});
  expect_corrupt(image(one(R"("U8")", "[2.0]", "[0,2]")),
                 {"shape element 0 is not a non-negative integer (found number '2.0')"});
  expect_corrupt(image(one(R"("U8")", "[1e2]", "[0,100]")), {"shape element 0", "found number '1e2'"});
  expect_corrupt(image(one(R"("U8")", R"(["2"])", "[0,2]")), {"shape element 0", "found string '2'"});
  expect_corrupt(image(one(R"("U8")", "[[2]]", "[0,2]")), {"shape element 0", "found an array"});
  expect_corrupt(image(one(R"("U8")", "[null]", "[0,2]")), {"shape element 0", "found null"});
  // A number beyond uint64 parses as floating point and is refused as such.
  expect_corrupt(image(one(R"("U8")", "[18446744073709551616]", "[0,2]")), {"shape element 0", "found number"});
}

TEST(SafetensorsValidation, ShapeWithTooManyDims) {
  const std::string ok8 = image(one(R"("U8")", "[1,1,1,1,1,1,1,1]", "[0,1]"), "a");
  EXPECT_TRUE(SafetensorsReader::from_bytes(ok8).ok());
  expect_corrupt(image(one(R"("U8")", "[1,1,1,1,1,1,1,1,1]", "[0,1]"), "a"),
                 {"tensor 'w': shape has more than 8 dims"});
  // A long shape array stops at the ninth element: nothing proportional to its length is kept.
  std::string dims = "[1";
  for (int i = 0; i < 100000; ++i) dims += ",1";
  expect_corrupt(image(one(R"("U8")", dims + "]", "[0,1]"), "a"), {"more than 8 dims"});
}

TEST(SafetensorsValidation, ShapeTimesDtypeSizeOverflows) {
  expect_corrupt(image(one(R"("U8")", "[4294967296,4294967296]", "[0,0]")),
                 {"tensor 'w': shape [4294967296, 4294967296] overflows: the element count does not fit"});
  expect_corrupt(image(one(R"("U8")", "[9223372036854775808]", "[0,0]")), {"element count does not fit"});
  expect_corrupt(image(one(R"("U8")", "[18446744073709551615]", "[0,0]")), {"element count does not fit"});
  // The count fits int64 but the bytes do not fit uint64: 2^62 elements of 8 bytes.
  expect_corrupt(image(one(R"("F64")", "[4611686018427387904]", "[0,0]")),
                 {"shape [4611686018427387904] of F64 overflows: the byte size does not fit"});
  // In order, like shape_numel: huge x huge x 0 overflows before the 0 ...
  expect_corrupt(image(one(R"("U8")", "[4294967296,4294967296,0]", "[0,0]")), {"element count does not fit"});
  // ... while 0 x huge x huge is an empty tensor.
  Result<SafetensorsReader> r =
      SafetensorsReader::from_bytes(image(one(R"("U8")", "[0,4294967296,4294967296]", "[0,0]")));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(shape_numel(r->tensors()[0].shape), 0);
}

TEST(SafetensorsValidation, DataOffsetsNotTwoNonNegativeIntegers) {
  expect_corrupt(image(one(R"("U8")", "[1]", "[0]"), "a"), {"tensor 'w': data_offsets has 1 elements, expected two"});
  expect_corrupt(image(one(R"("U8")", "[1]", "[]"), "a"), {"data_offsets has 0 elements, expected two"});
  expect_corrupt(image(one(R"("U8")", "[1]", "[0,1,2]"), "a"), {"data_offsets has more than two elements"});
  expect_corrupt(image(one(R"("U8")", "[1]", "[-1,0]"), "a"),
                 {"data_offsets element 0 is not a non-negative integer (found number -1)"});
  expect_corrupt(image(one(R"("U8")", "[1]", R"([0,"1"])"), "a"), {"data_offsets element 1", "found string '1'"});
  expect_corrupt(image(one(R"("U8")", "[1]", "[0,1.5]"), "a"), {"data_offsets element 1", "found number '1.5'"});
  expect_corrupt(image(one(R"("U8")", "[1]", "1"), "a"),
                 {"data_offsets is not an array of non-negative integers (found number 1)"});
}

TEST(SafetensorsValidation, DataOffsetsBeginAfterEnd) {
  expect_corrupt(image(one(R"("U8")", "[0]", "[4,0]"), "abcd"), {"tensor 'w': data_offsets [4, 0] has begin > end"});
}

TEST(SafetensorsValidation, DataOffsetsSpanDiffersFromShapeTimesDtype) {
  expect_corrupt(image(one(R"("F32")", "[2]", "[0,4]"), "abcd"),
                 {"tensor 'w': data_offsets [0, 4] span 4 bytes but shape [2] of F32 needs 8"});
  expect_corrupt(image(one(R"("BF16")", "[]", "[0,4]"), "abcd"), {"span 4 bytes but shape [] of BF16 needs 2"});
}

TEST(SafetensorsValidation, DataOffsetsOutOfTheDataSection) {
  expect_corrupt(image(one(R"("F32")", "[2]", "[0,8]"), "abcd"),
                 {"tensor 'w': data_offsets [0, 8] run past the 4-byte data section"});
  // A header that claims a 1 TiB tensor in a tiny file: refused without allocating it.
  expect_corrupt(image(one(R"("F32")", "[274877906944]", "[0,1099511627776]"), "abcd"),
                 {"data_offsets [0, 1099511627776] run past the 4-byte data section"});
  expect_corrupt(image(one(R"("U8")", "[1]", "[18446744073709551614,18446744073709551615]"), "a"),
                 {"run past the 1-byte data section"});
}

TEST(SafetensorsValidation, OverlappingTensors) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  expect_corrupt(image(h, std::string(12, 'x')), {"tensors 'a' [0, 8) and 'b' [4, 12) overlap"});
  const std::string same = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  expect_corrupt(image(same, std::string(4, 'x')), {"tensors 'a' [0, 4) and 'b' [0, 4) overlap"});
}

TEST(SafetensorsValidation, GapsBetweenOrBeforeTensors) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  expect_corrupt(image(h, std::string(12, 'x')),
                 {"gap of 4 bytes between tensor 'a' (ends at 4) and tensor 'b' (begins at 8)"});
  expect_corrupt(image(one(R"("F32")", "[1]", "[4,8]"), std::string(8, 'x')),
                 {"data bytes [0, 4) belong to no tensor (the first, 'w', begins at 4)"});
}

TEST(SafetensorsValidation, TrailingBytesAfterTheLastTensor) {
  expect_corrupt(image(one(R"("F32")", "[1]", "[0,4]"), "abcdefg"),
                 {"3 trailing bytes after the last tensor (tensors end at file offset"});
  expect_corrupt(image("{}", "x"), {"1 trailing bytes after the last tensor"});
  expect_corrupt(image(R"({"__metadata__":{}})", "xy"), {"2 trailing bytes"});
}

TEST(SafetensorsValidation, TooManyTensors) {
  std::string h = "{";
  for (int i = 0; i < 5; ++i)
    h += fmt::format(R"({}"t{}":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", i ? "," : "", i);
  h += "}";
  EXPECT_TRUE(SafetensorsReader::from_bytes(image(h), "x", SafetensorsLimits{.max_tensors = 5}).ok());
  expect_corrupt(image(h), {"header holds more than 4 tensors"}, SafetensorsLimits{.max_tensors = 4});
}

TEST(SafetensorsValidation, NamesInMessagesAreEscapedAndShortened) {
  // A name with a terminal escape sequence must not reach the terminal raw.
  const std::string e = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  Result<SafetensorsReader> r =
      SafetensorsReader::from_bytes(image(R"({"a\u001b[31m":)" + e + R"(,"a\u001b[31m":)" + e + "}", "a"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find('\x1b'), std::string::npos);
  EXPECT_NE(r.status().message().find(R"('a\x1b[31m')"), std::string::npos) << r.status().message();
  // A 1 MB name is cut in the message, at a UTF-8 boundary.
  std::string name = "a";  // makes byte 120 a continuation byte
  for (int i = 0; i < 500000; ++i) name += "ü";
  r = SafetensorsReader::from_bytes(image(one(R"("U8")", "[1]", "[0,2]").replace(2, 1, name), "ab"));
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 600u);
  EXPECT_NE(r.status().message().find("...(1000001 bytes)"), std::string::npos) << r.status().message();
  const size_t cut = r.status().message().find("...(");
  EXPECT_EQ(static_cast<unsigned char>(r.status().message()[cut - 1]), 0xBCu) << "cut inside a UTF-8 sequence";
}

TEST(SafetensorsValidation, NamesAreDataNotPaths) {
  // Names are never used to build paths: "../" and "/" are ordinary characters in a tensor name.
  const float x = 0.f;
  SafetensorsWriter w;
  w.add("../../etc/passwd", DType::kF32, {}, &x);
  Result<SafetensorsReader> r = SafetensorsReader::from_bytes(w.to_bytes());
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->find("../../etc/passwd"), nullptr);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::ckpt
