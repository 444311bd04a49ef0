// The formats the engine shares with the Python recorder (docs/formats/shared_vectors.md), checked from the
// vectors both sides read: tests/fixtures/shared_vectors/vectors.json (tests/python/test_shared_vectors.py is
// the recorder's half). Digests: the engine's summary_mix lanes and ExactSum words over the listed logical
// indices equal the recorded partial (lanes, Σx in 2^-149 and Σx² in 2^-298 as exact integers, counts, absmax);
// safetensors: the engine's writer produces the same bytes and its reader reads them back; token batches: the
// engine's encoder produces the same bytes, its reader and target count agree. Not a test of either format's
// validation (safetensors_test, token_batch_test): only that the two implementations are one format.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "core/exact_sum.h"
#include "core/file_io.h"
#include "data/token_batch.h"
#include "evidence/tensor_summary.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

using json = nlohmann::json;

json vectors() {
  const std::string path = test::source_dir() + "/tests/fixtures/shared_vectors/vectors.json";
  Result<std::string> text = read_file(path);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? json::parse(*text) : json::object();
}

std::string unhex(const std::string& h) {
  std::string out(h.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::vector<float> floats_of(const json& bits) {
  std::vector<float> x;
  for (const auto& b : bits)
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(std::stoul(b.get<std::string>(), nullptr, 16))));
  return x;
}

// The `formula` case of make_vectors.py: bits = 0x3c000000 + (j · 2654435761 mod 2^24), sign set where 3 | j.
std::vector<float> formula(int64_t n) {
  std::vector<float> x(n);
  for (int64_t j = 0; j < n; ++j) {
    uint32_t b = 0x3C000000u + static_cast<uint32_t>((static_cast<uint64_t>(j) * 2654435761ull) % (1ull << 24));
    if (j % 3 == 0) b |= 0x80000000u;
    x[j] = std::bit_cast<float>(b);
  }
  return x;
}

// Hex of the integer held in 32-bit limbs (least significant first), without leading zeros ("0" for zero).
std::string limbs_hex(std::vector<uint64_t> limbs) {
  std::string out;
  bool started = false;
  for (size_t i = limbs.size(); i-- > 0;) {
    if (!started && limbs[i] == 0) continue;
    out += started ? fmt::format("{:08x}", limbs[i]) : fmt::format("{:x}", limbs[i]);
    started = true;
  }
  return started ? out : "0";
}

// pos − neg of two limb vectors, as the recorder's signed hex ("-…" when negative).
std::string signed_hex(std::vector<uint64_t> pos, std::vector<uint64_t> neg) {
  bool negative = false;
  for (size_t i = pos.size(); i-- > 0;) {
    if (pos[i] != neg[i]) {
      negative = neg[i] > pos[i];
      break;
    }
  }
  if (negative) std::swap(pos, neg);
  int64_t borrow = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    int64_t d = static_cast<int64_t>(pos[i]) - static_cast<int64_t>(neg[i]) - borrow;
    borrow = d < 0;
    pos[i] = static_cast<uint64_t>(d + (borrow << 32));
  }
  const std::string mag = limbs_hex(pos);
  return negative ? "-" + mag : mag;
}

TEST(SharedVectors, DigestsAndExactSumsAreTheRecordersPartials) {
  const json v = vectors();
  ASSERT_EQ(v.value("format", ""), "shardproof-shared-vectors");
  ASSERT_GE(v["digest"].size(), 5u);
  for (const json& c : v["digest"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<float> x;
    std::vector<uint64_t> index;
    if (c.contains("formula")) {
      x = formula(c["formula"].get<int64_t>());
      for (size_t k = 0; k < x.size(); ++k) index.push_back(c["first"].get<uint64_t>() + k);
    } else {
      x = floats_of(c["bits"]);
      for (const auto& j : c["indices"]) index.push_back(j.get<uint64_t>());
    }
    ASSERT_EQ(x.size(), index.size());
    uint64_t lane0 = 0, lane1 = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      lane0 += evidence::summary_mix(index[k], std::bit_cast<uint32_t>(x[k]), 0);
      lane1 += evidence::summary_mix(index[k], std::bit_cast<uint32_t>(x[k]), 1);
    }
    EXPECT_EQ(fmt::format("{:016x}", lane0), c["lanes"][0].get<std::string>());
    EXPECT_EQ(fmt::format("{:016x}", lane1), c["lanes"][1].get<std::string>());

    ExactSum s;
    s.add(x.data(), x.size());
    const std::vector<uint64_t> w = s.to_words();
    const auto limb = [&w](size_t begin, size_t n) {
      return std::vector<uint64_t>(w.begin() + static_cast<std::ptrdiff_t>(begin),
                                   w.begin() + static_cast<std::ptrdiff_t>(begin + n));
    };
    EXPECT_EQ(signed_hex(limb(0, ExactSum::kSumLimbs), limb(ExactSum::kSumLimbs, ExactSum::kSumLimbs)),
              c["sum"].get<std::string>());
    EXPECT_EQ(limbs_hex(limb(2 * ExactSum::kSumLimbs, ExactSum::kSqLimbs)), c["sq"].get<std::string>());
    EXPECT_EQ(s.count(), c["count"].get<uint64_t>());
    EXPECT_EQ(s.nan_count(), c["nan"].get<uint64_t>());
    EXPECT_EQ(s.inf_count(), c["inf"].get<uint64_t>());
    EXPECT_EQ(fmt::format("{:08x}", std::bit_cast<uint32_t>(s.absmax())), c["absmax_bits"].get<std::string>());
    EXPECT_EQ(fmt::format("{:016x}", std::bit_cast<uint64_t>(s.sum())), c["sum_double"].get<std::string>());
    EXPECT_EQ(fmt::format("{:016x}", std::bit_cast<uint64_t>(s.l2_norm())), c["l2_double"].get<std::string>());
  }
}

TEST(SharedVectors, SafetensorsBytesAreTheEnginesOwn) {
  const json v = vectors();
  ASSERT_GE(v["safetensors"].size(), 2u);
  for (const json& c : v["safetensors"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<std::vector<float>> data;
    ckpt::SafetensorsWriter w;
    for (const auto& [key, value] : c["metadata"].items()) w.set_metadata(key, value.get<std::string>());
    for (const json& t : c["tensors"]) data.push_back(floats_of(t["bits"]));
    for (size_t i = 0; i < data.size(); ++i) {
      const json& t = c["tensors"][i];
      w.add(t["name"].get<std::string>(), DType::kF32, t["shape"].get<Shape>(), data[i].data());
    }
    const std::string bytes = unhex(c["bytes"].get<std::string>());
    EXPECT_EQ(w.to_bytes(), bytes) << "the engine's writer lays the file out otherwise";

    Result<ckpt::SafetensorsReader> r = ckpt::SafetensorsReader::from_bytes(bytes, c["name"].get<std::string>());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->metadata(), (c["metadata"].get<std::map<std::string, std::string>>()));
    for (size_t i = 0; i < data.size(); ++i) {
      const json& t = c["tensors"][i];
      std::vector<float> got(data[i].size());
      ASSERT_TRUE(r->read_f32(t["name"].get<std::string>(), t["shape"].get<Shape>(), got.data()).ok());
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(data[i][k]));
    }
  }
}

TEST(SharedVectors, TokenBatchBytesAreTheEnginesOwn) {
  const json v = vectors();
  ASSERT_GE(v["token_batch"].size(), 2u);
  test::TempDir dir;
  for (const json& c : v["token_batch"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    data::TokenBatch b{.rows = c["rows"].get<int64_t>(),
                       .cols = c["cols"].get<int64_t>(),
                       .tokens = c["ids"].get<std::vector<int32_t>>()};
    const std::string bytes = unhex(c["bytes"].get<std::string>());
    EXPECT_EQ(data::encode_token_batch(b), bytes);
    const std::string path = dir.path() + "/" + c["name"].get<std::string>() + ".bin";
    ASSERT_TRUE(write_file(path, bytes).ok());
    Result<data::TokenBatch> r = data::read_token_batch(path, 100);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->tokens, b.tokens);
    EXPECT_EQ(data::token_batch_targets(*r), c["targets"].get<int64_t>());
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
