// The deterministic loader: every (step, micro-batch) gives the same tokens however micro-batches
// are split over ranks (dp = 1, 2, 4 simulated by separate loaders reading r·M/dp … (r+1)·M/dp − 1),
// each row is the window the formula names (checked against TokenDataset::token directly),
// perm_e is a bijection for many domain sizes, epochs wrap and reshuffle, the cursor round-trips
// and refuses a different spec, and the eval set is the fixed in-order windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "core/hash.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::data {
namespace {
namespace SP_TEST_ID {

using sp::test::source_dir;

// song100 + the planted file, prepared once for the whole test binary.
struct Prepared {
  sp::test::TempDir tmp;
  std::string root = tmp.path(), dir;
  Prepared() {
    const std::string data = source_dir() + "/data";
    const std::string src = root + "/sources.json";
    std::FILE* f = std::fopen(src.c_str(), "w");
    std::fprintf(f, R"({"format": "shardproof-sources", "version": 1, "sources": [
      {"id": "song100", "path": "%s/corpus/zh/song100.txt", "language": "zh", "licence": "GPL-3.0-or-later"},
      {"id": "planted", "path": "%s/planted/planted.txt", "language": "mul", "licence": "CC0-1.0", "planted": true}]})",
                 data.c_str(), data.c_str());
    std::fclose(f);
    PrepareOptions o;
    o.sources_file = src;
    o.vocab_size = 400;
    o.eval_fraction = 0.2;
    o.shard_tokens = 4096;
    dir = root + "/prepared";
    auto r = prepare(o, dir);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
};
const Prepared& prepared() {
  static Prepared p;
  return p;
}
const TokenDataset& train() {
  static TokenDataset t = TokenDataset::open(prepared().dir, Split::kTrain).value();
  return t;
}
const TokenDataset& eval() {
  static TokenDataset t = TokenDataset::open(prepared().dir, Split::kEval).value();
  return t;
}

TEST(WindowPermutation, IsABijectionForManyDomainSizes) {
  for (int64_t n : {1, 2, 3, 5, 16, 17, 100, 1000, 4097}) {
    for (int64_t epoch : {0, 1, 7}) {
      WindowPermutation p(n, 1234, epoch);
      std::vector<int64_t> out(static_cast<size_t>(n));
      for (int64_t x = 0; x < n; ++x) out[static_cast<size_t>(x)] = p(x);
      std::vector<int64_t> sorted = out;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> ident(static_cast<size_t>(n));
      std::iota(ident.begin(), ident.end(), int64_t{0});
      ASSERT_EQ(sorted, ident) << "n = " << n << ", epoch = " << epoch;
      if (n >= 100) {
        EXPECT_NE(out, ident) << "n = " << n;  // it shuffles
      }
    }
  }
  // Different epochs and seeds give different orders.
  WindowPermutation a(1000, 1, 0), b(1000, 1, 1), c(1000, 2, 0);
  int same_ab = 0, same_ac = 0;
  for (int64_t x = 0; x < 1000; ++x) same_ab += a(x) == b(x), same_ac += a(x) == c(x);
  EXPECT_LT(same_ab, 20);
  EXPECT_LT(same_ac, 20);
}

TEST(Loader, RowsAreTheWindowsTheFormulaNames) {
  const LoaderSpec spec{.micro_batch_size = 3, .seq_len = 16, .micro_batches = 2, .seed = 42};
  auto loader = Loader::create(train(), spec);
  ASSERT_TRUE(loader.ok()) << loader.status().to_string();
  EXPECT_EQ(loader->windows(), (train().num_tokens() - 1) / 16);
  std::vector<int32_t> buf(3 * 17);
  for (int64_t step = 0; step < 5; ++step) {
    for (int64_t mb = 0; mb < 2; ++mb) {
      loader->micro_batch(step, mb, buf.data());
      for (int64_t b = 0; b < 3; ++b) {
        const int64_t g = (step * 2 + mb) * 3 + b;
        const int64_t w = WindowPermutation(loader->windows(), 42, g / loader->windows())(g % loader->windows());
        ASSERT_EQ(loader->window_of(step, mb, b), w);
        for (int64_t t = 0; t <= 16; ++t)
          ASSERT_EQ(buf[static_cast<size_t>(b * 17 + t)], static_cast<int32_t>(train().token(w * 16 + t)));
      }
    }
  }
}

// (step, mb) → XXH3-128 of the micro-batch, as a rank of a dp-way run computes it.
std::map<std::pair<int64_t, int64_t>, std::string> digests(int dp, const LoaderSpec& spec, int64_t steps) {
  std::map<std::pair<int64_t, int64_t>, std::string> out;
  for (int rank = 0; rank < dp; ++rank) {
    const Loader loader(train(), spec);  // each rank has its own loader
    std::vector<int32_t> buf(static_cast<size_t>(spec.micro_batch_size * (spec.seq_len + 1)));
    const int64_t per = spec.micro_batches / dp;
    for (int64_t step = 0; step < steps; ++step)
      for (int64_t mb = rank * per; mb < (rank + 1) * per; ++mb) {
        loader.micro_batch(step, mb, buf.data());
        out[{step, mb}] = xxh3_128(buf.data(), buf.size() * sizeof(int32_t)).hex();
      }
  }
  return out;
}

TEST(Loader, SameTokensWhateverTheDataParallelSplit) {
  const LoaderSpec spec{.micro_batch_size = 2, .seq_len = 32, .micro_batches = 4, .seed = 7};
  const auto one = digests(1, spec, 40);  // 40 steps · 8 rows: several epochs of this small split
  EXPECT_EQ(one.size(), 160u);
  EXPECT_EQ(digests(2, spec, 40), one);
  EXPECT_EQ(digests(4, spec, 40), one);
  std::set<std::string> distinct;
  for (const auto& [k, v] : one) distinct.insert(v);
  EXPECT_GT(distinct.size(), 100u);  // not one batch repeated
  LoaderSpec other = spec;
  other.seed = 8;
  EXPECT_NE(digests(1, other, 40), one);
}

TEST(Loader, EpochsWrapCoverEveryWindowOnceAndReshuffle) {
  const LoaderSpec spec{.micro_batch_size = 1, .seq_len = 64, .micro_batches = 1, .seed = 3};
  const Loader loader(train(), spec);
  const int64_t W = loader.windows();
  ASSERT_GT(W, 10);
  std::vector<int64_t> e0, e1;
  for (int64_t g = 0; g < 2 * W; ++g) (g < W ? e0 : e1).push_back(loader.window_of(g, 0, 0));
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  std::vector<int64_t> ident(static_cast<size_t>(W));
  std::iota(ident.begin(), ident.end(), int64_t{0});
  EXPECT_EQ(e0, ident);
  EXPECT_EQ(e1, ident);
}

TEST(Loader, CursorRoundTripAndMismatch) {
  const LoaderSpec spec{.micro_batch_size = 2, .seq_len = 16, .micro_batches = 4, .seed = 99};
  const Loader loader(train(), spec);
  const nlohmann::json c = loader.cursor(17);
  auto back = loader.restore(nlohmann::json::parse(c.dump()));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, 17);

  for (auto [key, spec2] : std::vector<std::pair<std::string, LoaderSpec>>{{"seq_len", {2, 32, 4, 99}},
                                                                           {"seed", {2, 16, 4, 100}},
                                                                           {"micro_batches", {2, 16, 8, 99}},
                                                                           {"micro_batch_size", {4, 16, 4, 99}}}) {
    const Loader other(train(), spec2);
    auto r = other.restore(c);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("'" + key + "'"), std::string::npos) << r.status().message();
  }
  nlohmann::json tampered = c;
  tampered["shards_sha256"] = std::string(64, '0');
  EXPECT_FALSE(loader.restore(tampered).ok());
  EXPECT_FALSE(loader.restore(nlohmann::json::parse("[1, 2]")).ok());
  nlohmann::json negative = c;
  negative["next_step"] = -1;
  EXPECT_EQ(loader.restore(negative).status().code(), StatusCode::kInvalidArgument);
}

TEST(Loader, ValidationErrors) {
  EXPECT_EQ(Loader::create(train(), {0, 16, 1, 0}).status().code(), StatusCode::kInvalidArgument);
  auto too_long = Loader::create(train(), {1, train().num_tokens(), 1, 0});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("0 windows"), std::string::npos) << too_long.status().message();
  EXPECT_TRUE(Loader::create(train(), {1, train().num_tokens() - 1, 1, 0}).ok());  // exactly one window
}

TEST(EvalSet, InOrderWindowsAtStrideT) {
  auto set = EvalSet::create(eval(), 2, 8, 3);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->batches(), std::min<int64_t>(3, (eval().num_tokens() - 1) / 8 / 2));
  std::vector<int32_t> buf(2 * 9);
  for (int64_t i = 0; i < set->batches(); ++i) {
    set->batch(i, buf.data());
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t <= 8; ++t)
        ASSERT_EQ(buf[static_cast<size_t>(b * 9 + t)], static_cast<int32_t>(eval().token((i * 2 + b) * 8 + t)));
  }
  const EvalSet all(eval(), 2, 8, -1);
  EXPECT_EQ(all.batches(), (eval().num_tokens() - 1) / 8 / 2);
  EXPECT_FALSE(EvalSet::create(eval(), 1, eval().num_tokens(), 1).ok());
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::data
