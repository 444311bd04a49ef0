// Seeded mutation corpus for ckpt/safetensors (RELIABILITY.md #23). Valid images from the writer are
// mutated (bit flips, byte edits, insertions, deletions, truncation, header-length edits, JSON number /
// key / dtype / name edits with the length fixed up so they reach the semantic checks, `../` names,
// duplicated entries, deep nesting) for a fixed number of iterations. Every result must be a reader
// whose entries really tile the file, or a kCorrupt Status with a printable message: never a crash or
// a hang, and never an allocation out of proportion to the image: this binary replaces operator new to
// measure that. Deterministic (Philox, iteration i uses lane i); runs in the ASan/UBSan build too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "core/file_io.h"
#include "core/rng.h"
#include "temp_dir.h"
#include "unity_id.h"

// ----------------------------------------------------------------- allocation meter (whole binary)

namespace {
struct AllocMeter {
  bool on = false;
  size_t largest = 0;  // largest single request while on
  size_t total = 0;    // sum of requests while on
};
AllocMeter g_meter;

void* metered_malloc(size_t n) noexcept {
  if (g_meter.on) {
    g_meter.largest = std::max(g_meter.largest, n);
    g_meter.total += n;
  }
  return std::malloc(n ? n : 1);
}
void* metered_new(size_t n) {
  void* p = metered_malloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return metered_new(n); }
void* operator new[](size_t n) { return metered_new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return metered_malloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return metered_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace sp::ckpt {
namespace {
namespace SP_TEST_ID {

// ~0.7 s in the release build, a few seconds under ASan; SP_FUZZ_ITERATIONS=N runs a longer soak.
constexpr uint64_t kDefaultIterations = 40000;
constexpr uint64_t kFileEvery = 64;  // every 64th image also goes through open() on a real file

// Allowed allocation for an image of `size` bytes: the reader keeps the image (from_bytes takes it by
// value, moved), the parser's token buffer (<= header), and entries (each costs >= ~45 header bytes).
size_t largest_allowed(size_t size) { return 2 * size + (64u << 10); }
size_t total_allowed(size_t size) { return 32 * size + (256u << 10); }

struct Rng {
  PhiloxKey key;
  uint32_t lane;
  uint64_t j = 0;
  uint64_t next() { return random_u64(key, j++, lane); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
};

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xFF);
  return out;
}
uint64_t read_le64(const std::string& s) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(s[i]);
  return n;
}

std::vector<std::string> seed_images() {
  std::vector<std::string> seeds;
  const std::vector<float> f(24, 0.5f);
  const std::vector<uint8_t> u(16, 7);
  {
    SafetensorsWriter w;
    w.set_metadata("format", "pt");
    w.set_metadata("step", "12");
    w.add("model.embed.weight", DType::kF32, {4, 6}, f.data());
    w.add("model.norm", DType::kBF16, {4}, u.data());
    w.add("empty", DType::kF32, {0, 3}, nullptr);
    w.add("scalar", DType::kF32, {}, f.data());
    w.add("ids", DType::kI64, {2}, u.data());
    w.add("mask", DType::kBool, {2, 2, 2}, u.data());
    seeds.push_back(w.to_bytes());
  }
  {
    SafetensorsWriter w;
    w.add("x", DType::kF32, {1}, f.data());
    seeds.push_back(w.to_bytes());
  }
  seeds.push_back(SafetensorsWriter().to_bytes());
  {
    SafetensorsWriter w;
    for (int i = 0; i < 12; ++i)
      w.add("layers." + std::to_string(i) + ".w", i % 3 ? DType::kU8 : DType::kF16, {i % 4, 2}, u.data());
    w.set_metadata("ünï", "✓");
    seeds.push_back(w.to_bytes());
  }
  const std::string ref = sp::test::source_dir() + "/tests/fixtures/safetensors/reference.safetensors";
  if (Result<std::string> r = read_file(ref); r.ok()) seeds.push_back(*r);
  return seeds;
}

// --------------------------------------------------------------------------------------- mutators

const std::vector<std::string> kTokens = {"{",
                                          "}",
                                          "[",
                                          "]",
                                          ",",
                                          ":",
                                          "\"",
                                          "\\",
                                          " ",
                                          "0",
                                          "-1",
                                          "1e9",
                                          "null",
                                          "true",
                                          "\"F32\"",
                                          "\"dtype\"",
                                          "\"shape\"",
                                          "\"data_offsets\"",
                                          "\"__metadata__\"",
                                          "\\u0000",
                                          "\\ud800",
                                          "\xff",
                                          "\xc3",
                                          "\x00"};
const std::vector<std::string> kNumbers = {"-1",
                                           "0",
                                           "-0",
                                           "1",
                                           "7",
                                           "4294967296",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "1e30",
                                           "1.5",
                                           "00",
                                           "4611686018427387904",
                                           "274877906944",
                                           "1099511627776",
                                           "99999999999999999999999999999999999999"};
const std::vector<std::string> kKeys = {"\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"offset\"",
                                        "\"\"",      "\"w\""};
const std::vector<std::string> kDtypes = {"\"F32\"",     "\"F64\"", "\"BOOL\"", "\"U8\"", "\"I64\"",  "\"BF16\"",
                                          "\"F8_E4M3\"", "\"\"",    "\"f32\"",  "32",     "[\"F32\"]"};
const std::vector<std::string> kNames = {
    "\"../../etc/passwd\"", "\"/abs/path\"", "\"__metadata__\"", "\"\"",
    "\"a\\u0000b\"",        "\"x\"",         "\"scalar\"",       "\"\\u001b[31m\""};

// Spans [begin, end) of tokens in `h` matching a predicate start char.
std::vector<std::pair<size_t, size_t>> number_spans(const std::string& h) {
  std::vector<std::pair<size_t, size_t>> out;
  bool in_string = false;
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i] == '"' && (i == 0 || h[i - 1] != '\\')) in_string = !in_string;
    if (in_string || !(std::isdigit(static_cast<unsigned char>(h[i])) || h[i] == '-')) continue;
    size_t j = i;
    while (j < h.size() && (std::isdigit(static_cast<unsigned char>(h[j])) || std::strchr("-+.eE", h[j]))) ++j;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}
std::vector<std::pair<size_t, size_t>> string_spans(const std::string& h) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < h.size(); ++i) {
    if (h[i] != '"') continue;
    size_t j = i + 1;
    while (j < h.size() && !(h[j] == '"' && h[j - 1] != '\\')) ++j;
    if (j >= h.size()) break;
    out.emplace_back(i, j + 1);
    i = j;
  }
  return out;
}
void replace_span(std::string& h, std::pair<size_t, size_t> span, const std::string& with) {
  h.replace(span.first, span.second - span.first, with);
}

// Structured edits of the JSON header text.
void mutate_header(std::string& h, Rng& rng, const std::vector<std::string>& seeds) {
  switch (rng.below(10)) {
    case 8: {  // a tensor moves: both data_offsets shift by the same amount (overlaps, gaps, leading bytes)
      std::vector<size_t> at;
      for (size_t p = h.find("\"data_offsets\":["); p != std::string::npos; p = h.find("\"data_offsets\":[", p + 1))
        at.push_back(p + 16);
      if (at.empty()) break;
      const size_t p = rng.pick(at), comma = h.find(',', p), close = h.find(']', p);
      if (comma == std::string::npos || close == std::string::npos || comma > close) break;
      const uint64_t b = std::strtoull(h.c_str() + p, nullptr, 10),
                     e = std::strtoull(h.c_str() + comma + 1, nullptr, 10);
      const uint64_t shift = 1 + rng.below(16);
      const bool down = rng.chance(50) && b >= shift;
      const uint64_t nb = down ? b - shift : b + shift, ne = down ? e - shift : e + shift;
      h.replace(p, close - p, fmt::format("{},{}", nb, ne));
      break;
    }
    case 0: {  // a number becomes an edge value
      auto spans = number_spans(h);
      if (!spans.empty()) replace_span(h, rng.pick(spans), rng.pick(kNumbers));
      break;
    }
    case 1: {  // two numbers swap (data_offsets out of order, shapes vs offsets)
      auto spans = number_spans(h);
      if (spans.size() < 2) break;
      auto a = rng.pick(spans), b = rng.pick(spans);
      if (a.first > b.first) std::swap(a, b);
      if (a.second > b.first) break;
      const std::string sa = h.substr(a.first, a.second - a.first), sb = h.substr(b.first, b.second - b.first);
      replace_span(h, b, sa);
      replace_span(h, a, sb);
      break;
    }
    case 2: {  // a string becomes a key, dtype or name from the lists
      auto spans = string_spans(h);
      if (spans.empty()) break;
      const std::vector<std::string>& pool = rng.chance(33) ? kKeys : rng.chance(50) ? kDtypes : kNames;
      replace_span(h, rng.pick(spans), rng.pick(pool));
      break;
    }
    case 3: {  // two strings swap (keys and values trade places)
      auto spans = string_spans(h);
      if (spans.size() < 2) break;
      auto a = rng.pick(spans), b = rng.pick(spans);
      if (a.first > b.first) std::swap(a, b);
      if (a.second > b.first) break;
      const std::string sa = h.substr(a.first, a.second - a.first), sb = h.substr(b.first, b.second - b.first);
      replace_span(h, b, sa);
      replace_span(h, a, sb);
      break;
    }
    case 4: {  // duplicate one entry (from one `},"` boundary to the next)
      std::vector<size_t> cuts;
      for (size_t p = h.find("},\""); p != std::string::npos; p = h.find("},\"", p + 1)) cuts.push_back(p + 2);
      if (cuts.size() < 2) break;
      const size_t i = rng.below(cuts.size() - 1);
      h.insert(cuts[i + 1], h.substr(cuts[i], cuts[i + 1] - cuts[i]));
      break;
    }
    case 5:  // a token goes in somewhere
      h.insert(rng.below(h.size() + 1), rng.pick(kTokens));
      break;
    case 6: {  // deep or wide nesting at a value position
      const size_t depth = 1 + rng.below(5000);
      const std::string nest =
          rng.chance(50) ? std::string(depth, '[') + std::string(depth, ']') : std::string(depth, '[');
      const size_t colon = h.find(':', rng.below(h.size()));
      h.insert(colon == std::string::npos ? h.size() : colon + 1, nest);
      break;
    }
    case 7: {  // a long shape array
      const size_t p = h.find("\"shape\":[");
      if (p == std::string::npos) break;
      std::string dims;
      for (uint64_t i = 0, n = 1 + rng.below(64); i < n; ++i) dims += "1,";
      h.insert(p + 9, dims);
      break;
    }
    default: {  // splice the header tail of another seed
      const std::string& other = rng.pick(seeds);
      const uint64_t n = read_le64(other);
      if (n == 0 || n > other.size() - 8) break;
      const size_t cut = rng.below(h.size());
      h = h.substr(0, cut) + other.substr(8 + rng.below(n), rng.below(n));
      break;
    }
  }
}

// Byte-level edits of the whole image.
void mutate_bytes(std::string& b, Rng& rng) {
  const uint64_t n = read_le64(b);
  const size_t header_end = n <= b.size() - 8 ? 8 + n : b.size();
  // Most edits land in the length field or the header, where the parsing is.
  auto where = [&]() { return rng.chance(85) ? rng.below(header_end) : rng.below(b.size()); };
  switch (rng.below(7)) {
    case 0:
      for (uint64_t k = 0, m = 1 + rng.below(8); k < m && !b.empty(); ++k)
        b[where()] ^= static_cast<char>(1 << rng.below(8));
      break;
    case 1:
      if (!b.empty()) b[where()] = rng.pick(kTokens)[0];
      break;
    case 2: {
      std::string ins;
      for (uint64_t k = 0, m = 1 + rng.below(16); k < m; ++k) ins += static_cast<char>(rng.below(256));
      b.insert(std::min<size_t>(where(), b.size()), ins);
      break;
    }
    case 3: {
      const size_t at = where();
      b.erase(at, 1 + rng.below(32));
      break;
    }
    case 4:
      b.resize(rng.below(b.size() + 1));
      break;
    case 5:
      b.append(1 + rng.below(16), static_cast<char>(rng.below(256)));
      break;
    default: {  // the length field
      const std::vector<uint64_t> lengths = {0,
                                             n - 1,
                                             n + 1,
                                             n + 8,
                                             n - 8,
                                             b.size() - 8,
                                             b.size(),
                                             UINT64_MAX,
                                             uint64_t{1} << 63,
                                             uint64_t{1} << 40,
                                             (100ull << 20) + 1,
                                             rng.next()};
      if (b.size() >= 8) b.replace(0, 8, le64(rng.pick(lengths)));
      break;
    }
  }
}

std::string mutate(const std::vector<std::string>& seeds, Rng& rng) {
  std::string b = rng.pick(seeds);
  for (uint64_t round = 0, rounds = 1 + rng.below(3); round < rounds; ++round) {
    if (b.size() >= 8 && rng.chance(60)) {
      const uint64_t n = read_le64(b);
      if (n > b.size() - 8) {
        mutate_bytes(b, rng);
        continue;
      }
      std::string h = b.substr(8, n);
      mutate_header(h, rng, seeds);
      if (rng.chance(15)) h.append(rng.below(8), ' ');
      // Usually fix the length so the edit reaches the semantic checks; sometimes leave it stale.
      b = (rng.chance(85) ? le64(h.size()) : b.substr(0, 8)) + h + b.substr(8 + n);
    } else {
      if (b.size() < 8) b.append(8 - b.size(), '\0');
      mutate_bytes(b, rng);
    }
  }
  return b;
}

// ----------------------------------------------------------------------------------------- checks

bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// A reader must describe the image exactly: entries tile the data section and read back its bytes.
void check_reader(const SafetensorsReader& r, const std::string& image) {
  ASSERT_EQ(r.data_offset() + r.data_size(), image.size());
  ASSERT_EQ(read_le64(image) + 8, r.data_offset());
  uint64_t cursor = 0;
  std::vector<char> buf;
  for (const SafetensorsEntry& e : r.tensors()) {
    ASSERT_EQ(e.begin, cursor) << e.name;
    ASSERT_LE(e.shape.size(), kSafetensorsMaxDims);
    ASSERT_EQ(static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype), e.nbytes()) << e.name;
    ASSERT_EQ(r.find(e.name), &e);
    buf.assign(e.nbytes() + 1, '\0');
    ASSERT_TRUE(r.read(e, buf.data()).ok());
    ASSERT_EQ(std::memcmp(buf.data(), image.data() + r.data_offset() + e.begin, e.nbytes()), 0) << e.name;
    cursor = e.end;
  }
  ASSERT_EQ(cursor, r.data_size());

  // Whatever the reader accepts, the writer writes back: same entries, offsets and metadata.
  SafetensorsWriter w;
  for (const SafetensorsEntry& e : r.tensors())
    w.add(e.name, e.dtype, e.shape, e.nbytes() ? image.data() + r.data_offset() + e.begin : nullptr);
  for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
  Result<SafetensorsReader> again = SafetensorsReader::from_bytes(w.to_bytes());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_EQ(again->tensors().size(), r.tensors().size());
  for (size_t i = 0; i < r.tensors().size(); ++i) {
    const SafetensorsEntry &a = r.tensors()[i], &b = again->tensors()[i];
    ASSERT_TRUE(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin && a.end == b.end)
        << a.name;
  }
  ASSERT_EQ(again->metadata(), r.metadata());
  ASSERT_EQ(again->data_size(), r.data_size());
}

void check_failure(const Status& s, const std::string& label) {
  ASSERT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
  ASSERT_EQ(s.message().rfind("safetensors '" + label + "'", 0), 0u) << s.message();
  ASSERT_TRUE(valid_utf8(s.to_string())) << "message is not valid UTF-8";
  ASSERT_LT(s.to_string().size(), 2000u) << s.to_string().substr(0, 2000);
}

// Rules of docs/formats/safetensors.md and a fragment of their message.
struct Rule {
  const char* name;
  const char* fragment;
};
constexpr Rule kRules[] = {
    {"file shorter than 8 bytes", "shorter than the 8-byte header length"},
    {"header length 0", "header length (bytes 0..8) is 0"},
    {"header length over the limit", "exceeds the limit"},
    {"header length past the file end", "runs past the end"},
    {"header not an object", "header is not a JSON object"},
    {"header not valid JSON", "header is not valid JSON"},
    {"duplicate tensor name", "duplicate tensor name"},
    {"duplicate key in an entry", "appears twice"},
    {"metadata not string to string", "\"__metadata__\""},
    {"entry not an object", "entry is not an object"},
    {"unknown key", "unknown key"},
    {"missing key", "missing key"},
    {"unknown dtype", "unknown dtype"},
    {"dtype not a string", "dtype is not a string"},
    {"shape/offsets element not a non-negative integer", "is not a non-negative integer"},
    {"too many dims", "dims"},
    {"shape overflow", "overflows"},
    {"data_offsets not two", "expected two"},
    {"begin > end", "begin > end"},
    {"span differs from shape x dtype", "but shape"},
    {"offsets past the data section", "data section"},
    {"overlap", "overlap"},
    {"gap", "gap of"},
    {"leading bytes", "belong to no tensor"},
    {"trailing bytes", "trailing bytes"},
};

std::string printable_prefix(const std::string& b) {
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(b.size(), 200); ++i) {
    const auto c = static_cast<unsigned char>(b[i]);
    out += (c >= 0x20 && c < 0x7F) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return out;
}

TEST(SafetensorsFuzz, SeededMutationCorpus) {
  const std::vector<std::string> seeds = seed_images();
  ASSERT_GE(seeds.size(), 4u);
  for (const std::string& s : seeds) ASSERT_TRUE(SafetensorsReader::from_bytes(s).ok());
  const PhiloxKey key = philox_key(20240601, "safetensors_fuzz");
  const sp::test::TempDir tmp;
  const std::string path = tmp.file("image.safetensors");
  const char* env_iterations = std::getenv("SP_FUZZ_ITERATIONS");
  const uint64_t iterations = env_iterations ? std::strtoull(env_iterations, nullptr, 10) : kDefaultIterations;
  uint64_t accepted = 0, rejected = 0;
  double worst_ratio = 0;  // allocated bytes / image bytes, over images of at least 1 KiB
  std::vector<uint64_t> hits(std::size(kRules), 0);
  for (uint64_t it = 0; it < iterations; ++it) {
    Rng rng{key, static_cast<uint32_t>(it)};
    const std::string image = mutate(seeds, rng);
    SCOPED_TRACE(fmt::format("iteration {} ({} bytes): {}", it, image.size(), printable_prefix(image)));

    std::string copy = image;
    g_meter = AllocMeter{.on = true};
    Result<SafetensorsReader> r = SafetensorsReader::from_bytes(std::move(copy), "fuzz");
    g_meter.on = false;
    ASSERT_LE(g_meter.largest, largest_allowed(image.size()));
    ASSERT_LE(g_meter.total, total_allowed(image.size()));
    if (image.size() >= 1024)
      worst_ratio = std::max(worst_ratio, static_cast<double>(g_meter.total) / static_cast<double>(image.size()));
    if (r.ok()) {
      ++accepted;
      check_reader(*r, image);
    } else {
      ++rejected;
      check_failure(r.status(), "fuzz");
      for (size_t k = 0; k < std::size(kRules); ++k)
        hits[k] += r.status().message().find(kRules[k].fragment) != std::string::npos;
    }
    if (HasFatalFailure()) return;

    if (it % kFileEvery == 0) {  // the same verdict through open() and pread
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);  // no fsync: a scratch file
        out.write(image.data(), static_cast<std::streamsize>(image.size()));
        ASSERT_TRUE(out.good());
      }
      g_meter = AllocMeter{.on = true};
      Result<SafetensorsReader> f = SafetensorsReader::open(path);
      g_meter.on = false;
      ASSERT_LE(g_meter.largest, largest_allowed(image.size()));
      ASSERT_EQ(f.ok(), r.ok()) << (f.ok() ? r.status().to_string() : f.status().to_string());
      if (f.ok()) {
        check_reader(*f, image);
      } else {
        check_failure(f.status(), path);
      }
      if (HasFatalFailure()) return;
    }
  }
  // The corpus must exercise both outcomes and reach every rule, or the mutators have gone blind.
  EXPECT_GT(accepted, iterations / 50);
  EXPECT_GT(rejected, iterations / 2);
  std::printf(
      "safetensors fuzz: %llu images, %llu accepted, %llu rejected; allocation <= %.1f x image size "
      "(images >= 1 KiB)\n",
      static_cast<unsigned long long>(iterations), static_cast<unsigned long long>(accepted),
      static_cast<unsigned long long>(rejected), worst_ratio);
  for (size_t k = 0; k < std::size(kRules); ++k) {
    std::printf("  %6llu  %s\n", static_cast<unsigned long long>(hits[k]), kRules[k].name);
    EXPECT_GT(hits[k], 0u) << "no mutated image reached rule: " << kRules[k].name;
  }
}

// Hostile claims that must be refused before anything proportional to the claim is allocated.
TEST(SafetensorsFuzz, HugeClaimsAllocateNothingLarge) {
  const std::string tib = R"({"w":{"dtype":"F64","shape":[137438953472],"data_offsets":[0,1099511627776]}})";
  const std::string overflow = R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
  const std::vector<std::string> images = {
      le64(UINT64_MAX) + "{}",
      le64(uint64_t{1} << 63) + "{}",
      le64(100ull << 20) + "{}",  // within the limit, past the file end
      le64(tib.size()) + tib,     // a 1 TiB tensor in a 90-byte file
      le64(tib.size()) + tib + std::string(64, 'x'),
      le64(40) + tib,  // stale length: cut JSON
      le64(overflow.size()) + overflow,
  };
  for (const std::string& image : images) {
    std::string copy = image;
    g_meter = AllocMeter{.on = true};
    Result<SafetensorsReader> r = SafetensorsReader::from_bytes(std::move(copy), "claims");
    g_meter.on = false;
    ASSERT_FALSE(r.ok()) << image;
    check_failure(r.status(), "claims");
    EXPECT_LE(g_meter.largest, 64u << 10) << r.status().message();
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::ckpt
