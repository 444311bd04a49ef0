// Token shards and TokenDataset::open against every bad input of RELIABILITY.md #22/#23: wrong
// magic or version, truncation, trailing bytes, a flipped byte (SHA-256 mismatch), a token id ≥
// vocab_size (with the manifest re-signed so only the range check can catch it), a missing shard,
// a tampered tokenizer, a path-traversal file name. Every error must name the file, and the byte
// offset where one exists; nothing may crash (this test runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_io.h"
#include "core/hash.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"
#include "data/tokenizer.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::data {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

using sp::test::source_dir;
using sp::test::TempDir;

// One prepared copy of the planted corpus (small shards so that splits have several files).
const std::string& prepared() {
  static TempDir dir;
  static const std::string out = [] {
    PrepareOptions o;
    o.sources_file = source_dir() + "/data/planted/sources.json";
    o.vocab_size = 300;
    o.eval_fraction = 0.5;
    o.shard_tokens = 128;
    const std::string d = dir.path() + "/prepared";
    auto r = prepare(o, d);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return d;
  }();
  return out;
}

// A fresh copy of the prepared directory to damage.
std::string copy_prepared(const TempDir& t) {
  const std::string d = t.path() + "/copy";
  fs::copy(prepared(), d, fs::copy_options::recursive);
  return d;
}

std::string read(const std::string& p) { return read_file(p).value(); }
void write(const std::string& p, const std::string& b) { ASSERT_TRUE(write_file(p, b).ok()); }

// Rewrites the manifest so that it records the current bytes of every shard (as a forger would).
void resign_manifest(const std::string& dir) {
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(read(dir + "/manifest.json"));
  std::vector<ShardEntry> lists[2];
  int k = 0;
  for (const char* split : {"train", "eval"}) {
    for (auto& s : m["splits"][split]["shards"]) {
      const std::string bytes = read(dir + "/" + s["file"].get<std::string>());
      s["sha256"] = sha256_hex(bytes);
      s["bytes"] = bytes.size();
      lists[k].push_back(
          {s["file"], static_cast<int64_t>(bytes.size()), s["num_tokens"], s["num_documents"], s["sha256"]});
    }
    ++k;
  }
  m["identity"]["shards_sha256"] = shards_digest(lists[0], lists[1]);
  write(dir + "/manifest.json", m.dump(2));
}

void expect_error(const std::string& dir, Split split, StatusCode code, std::initializer_list<std::string> needles) {
  auto r = TokenDataset::open(dir, split);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  for (const std::string& n : needles)
    EXPECT_NE(r.status().message().find(n), std::string::npos) << "'" << n << "' not in: " << r.status().message();
}

TEST(TokenShard, EncodeDecodeRoundTripBothDtypes) {
  const std::vector<uint32_t> tokens = {1, 256, 299, 0, 256};
  for (uint32_t dtype : {2u, 4u}) {
    ShardHeader h;
    h.dtype_bytes = dtype;
    h.split = 1;
    h.vocab_size = 300;
    h.num_tokens = tokens.size();
    h.num_documents = 2;
    h.shard_index = 3;
    const std::string bytes = shard_encode(h, tokens);
    EXPECT_EQ(bytes.size(), 64 + tokens.size() * dtype);
    EXPECT_EQ(bytes.substr(0, 8), "SPTOKENS");
    EXPECT_EQ(static_cast<unsigned char>(bytes[64]), 1);  // little-endian
    std::vector<uint32_t> back;
    auto r = shard_decode(bytes, "x.bin", &h, &back);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(back, tokens);
    EXPECT_EQ(r->shard_index, 3u);
  }
  EXPECT_EQ(shard_dtype_bytes(65536), 2u);
  EXPECT_EQ(shard_dtype_bytes(65537), 4u);
}

TEST(TokenShard, DecodeRejectsHeaderLiesWithOffsets) {
  ShardHeader h;
  h.vocab_size = 300;
  h.num_tokens = 2;
  h.num_documents = 1;
  const std::string good = shard_encode(h, std::vector<uint32_t>{5, 256});
  auto bad = [&](std::string b, std::string needle) {
    auto r = shard_decode(b, "s.bin", nullptr, nullptr);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("s.bin"), std::string::npos);
  };
  bad(good.substr(0, 10), "truncated: 10 bytes");
  std::string s = good;
  s[16] = 3;
  bad(s, "dtype_bytes 3 at offset 16");
  s = good;
  s[32] = static_cast<char>(0xFF), s[39] = static_cast<char>(0x7F);  // num_tokens huge: no overflow, no huge allocation
  bad(s, "truncated");
  s = good;
  s[40] = 2;
  bad(s, "num_documents 2 at offset 40");
  s = good;
  s[60] = 1;
  bad(s, "reserved byte at offset 60");
  bad(good + "x", "1 trailing bytes from offset 68");
}

TEST(TokenDataset, OpensPreparedSplitsAndMatchesManifest) {
  auto train = TokenDataset::open(prepared(), Split::kTrain);
  auto eval = TokenDataset::open(prepared(), Split::kEval);
  ASSERT_TRUE(train.ok()) << train.status().to_string();
  ASSERT_TRUE(eval.ok()) << eval.status().to_string();
  EXPECT_EQ(train->vocab_size(), 300);
  EXPECT_GT(train->num_tokens(), 128);  // several shards
  EXPECT_EQ(train->identity(), eval->identity());
  const auto m = nlohmann::json::parse(read(prepared() + "/manifest.json"));
  EXPECT_EQ(train->num_tokens(), m["splits"]["train"]["num_tokens"].get<int64_t>());
  EXPECT_GE(m["splits"]["train"]["shards"].size(), 2u);
  EXPECT_EQ(train->token(train->num_tokens() - 1), kEndOfTextId);
  for (uint32_t t : train->tokens()) EXPECT_LT(t, 300u);
}

TEST(TokenDataset, TruncatedShard) {
  TempDir t;
  const std::string d = copy_prepared(t);
  const std::string f = d + "/train-00001.bin";
  std::string b = read(f);
  write(f, b.substr(0, b.size() - 1));
  expect_error(d, Split::kTrain, StatusCode::kCorrupt, {"train-00001.bin", "truncated", "offset"});
  write(f, "");
  expect_error(d, Split::kTrain, StatusCode::kCorrupt, {"train-00001.bin", "truncated: 0 bytes"});
  EXPECT_TRUE(TokenDataset::open(d, Split::kEval).ok());  // the other split does not read this file
}

TEST(TokenDataset, FlippedByteIsAShaMismatch) {
  TempDir t;
  const std::string d = copy_prepared(t);
  const std::string f = d + "/train-00000.bin";
  std::string b = read(f);
  b[70] ^= 1;  // low bit of token 3: still a valid id, only the hash can tell
  write(f, b);
  expect_error(d, Split::kTrain, StatusCode::kCorrupt, {"train-00000.bin", "SHA-256"});
}

TEST(TokenDataset, WrongMagicAndVersionNameTheOffset) {
  TempDir t;
  const std::string d = copy_prepared(t);
  const std::string f = d + "/eval-00000.bin";
  const std::string orig = read(f);
  std::string b = orig;
  b[0] = 'X';
  write(f, b);
  expect_error(d, Split::kEval, StatusCode::kCorrupt, {"eval-00000.bin", "magic at offset 0"});
  b = orig;
  b[8] = 2;
  write(f, b);
  expect_error(d, Split::kEval, StatusCode::kCorrupt, {"eval-00000.bin", "version 2 at offset 8"});
}

TEST(TokenDataset, TokenIdBeyondVocabEvenWithAResignedManifest) {
  TempDir t;
  const std::string d = copy_prepared(t);
  const std::string f = d + "/train-00000.bin";
  std::string b = read(f);
  b[64 + 2 * 5] = static_cast<char>(0xFF), b[64 + 2 * 5 + 1] = static_cast<char>(0xFF);  // token 5 = 65535
  write(f, b);
  resign_manifest(d);
  expect_error(d, Split::kTrain, StatusCode::kCorrupt,
               {"train-00000.bin", "65535 >= vocab_size 300", "byte offset 74"});
}

TEST(TokenDataset, MissingShardTokenizerManifestAndTraversal) {
  TempDir t;
  const std::string d = copy_prepared(t);
  fs::remove(d + "/eval-00000.bin");
  expect_error(d, Split::kEval, StatusCode::kNotFound, {"eval-00000.bin"});
  EXPECT_TRUE(TokenDataset::open(d, Split::kTrain).ok());  // the other split is intact

  std::string tok = read(d + "/tokenizer.json");
  write(d + "/tokenizer.json", tok + " ");
  expect_error(d, Split::kTrain, StatusCode::kCorrupt, {"tokenizer.json", "SHA-256"});
  write(d + "/tokenizer.json", tok);

  std::string m = read(d + "/manifest.json");
  std::string evil = m;
  evil.replace(evil.find("\"train-00000.bin\""), 17, "\"../train-00000.bin\"");
  write(d + "/manifest.json", evil);
  expect_error(d, Split::kTrain, StatusCode::kCorrupt, {"manifest.json", "plain file name"});
  write(d + "/manifest.json", "{ not json");
  expect_error(d, Split::kTrain, StatusCode::kCorrupt, {"manifest.json"});
  fs::remove(d + "/manifest.json");
  auto r = TokenDataset::open(d, Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().hint().find("data prepare"), std::string::npos);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::data
