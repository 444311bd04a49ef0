// Tokenizer: pre-tokenizer coverage, encode/decode identity on arbitrary bytes (UTF-8 incl. Chinese
// and emoji, the empty string, invalid sequences), the heap merge against GPT-2's naive loop, the
// trainer against a naive retrain-from-scratch twin and a closed-form case, determinism, and the
// errors of tokenizer.json loading and of too small vocabularies.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/rng.h"
#include "data/bpe_train.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"
#include "unity_id.h"

namespace sp::data {
namespace {
namespace SP_TEST_ID {

const std::vector<std::string> kTrainText = {
    "The quick brown fox jumps over the lazy dog. The dog doesn't care; it's asleep.",
    "In 1984, 12345 hackers wrote 678 programs — they're still running!",
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？",
    "Mixed 中文 and English text: 你好，world! 🙂 emoji too.",
    "the theory of the thermal theme: there, then, these, those, the end.",
};

std::vector<std::string> pieces_of(std::string_view s) {
  std::vector<std::string> out;
  for (const Piece& p : pretokenize(s)) out.emplace_back(s.substr(p.begin, p.end - p.begin));
  return out;
}

Tokenizer trained(int64_t vocab) {
  BpeTrainer t;
  for (int rep = 0; rep < 3; ++rep)
    for (const auto& s : kTrainText) t.add_text(s);
  auto tok = t.train(vocab);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

std::string random_bytes(uint64_t seed, size_t n, bool small_alphabet) {
  const PhiloxKey key = philox_key(seed, "tokenizer-test");
  std::string s(n, '\0');
  const std::string alphabet = "aab the \xe6\x9c\x88\xe5\x85\x89,.'0123\n\xff";
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = random_u64(key, i);
    s[i] = small_alphabet ? alphabet[r % alphabet.size()] : static_cast<char>(r & 0xFF);
  }
  return s;
}

TEST(Pretokenize, FollowsGpt2RulesWithHanRunsAndDigitGroups) {
  EXPECT_EQ(pieces_of("Hello world"), (std::vector<std::string>{"Hello", " world"}));
  EXPECT_EQ(pieces_of("don't stop"), (std::vector<std::string>{"don", "'t", " stop"}));
  EXPECT_EQ(pieces_of("a  b"), (std::vector<std::string>{"a", " ", " b"}));
  EXPECT_EQ(pieces_of("x\n\ny"), (std::vector<std::string>{"x", "\n\n", "y"}));
  EXPECT_EQ(pieces_of("1234567"), (std::vector<std::string>{"123", "456", "7"}));
  EXPECT_EQ(pieces_of(" 12345"), (std::vector<std::string>{" 123", "45"}));
  EXPECT_EQ(pieces_of("中文abc"), (std::vector<std::string>{"中文", "abc"}));
  EXPECT_EQ(pieces_of("你好，世界！"), (std::vector<std::string>{"你好", "，", "世界", "！"}));
  EXPECT_EQ(pieces_of("a\xff"
                      "b"),
            (std::vector<std::string>{"a", "\xff", "b"}));
  EXPECT_EQ(pieces_of(" \xff"), (std::vector<std::string>{" ", "\xff"}));
  EXPECT_EQ(pieces_of("end.  "), (std::vector<std::string>{"end", ".", "  "}));
  EXPECT_TRUE(pieces_of("").empty());
}

TEST(Pretokenize, PiecesCoverEveryByteOfRandomInput) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::string s = random_bytes(seed, seed % 97, seed % 2 == 0);
    size_t pos = 0;
    for (const Piece& p : pretokenize(s)) {
      ASSERT_EQ(p.begin, pos);
      ASSERT_LT(p.begin, p.end);
      pos = p.end;
    }
    ASSERT_EQ(pos, s.size());
  }
}

TEST(Tokenizer, RoundTripIsIdentityOnUtf8ChineseEmojiEmptyAndInvalidBytes) {
  const Tokenizer tok = trained(420);
  const std::vector<std::string> cases = {"",
                                          "a",
                                          "hello world",
                                          "The quick brown fox",
                                          "床前明月光，疑是地上霜。",
                                          "🙂👍🏽 family: 👨‍👩‍👧",
                                          "Mixed 中文 and English 😀!",
                                          "<|endoftext|>",
                                          "tab\tnew\nline\r\n",
                                          std::string("nul\0byte", 8),
                                          "\xff\xfe",
                                          "abc\xc3(",
                                          "\xe4\xb8",
                                          "\xc0\xaf overlong",
                                          "\xed\xa0\x80 surrogate",
                                          "\xf4\x90\x80\x80 > U+10FFFF",
                                          "trailing lead byte \xe6"};
  for (const std::string& s : cases) EXPECT_EQ(tok.decode(tok.encode(s)), s) << s;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const std::string s = random_bytes(seed, 1 + seed % 300, seed % 3 != 0);
    ASSERT_EQ(tok.decode(tok.encode(s)), s) << "seed " << seed;
  }
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(Tokenizer, InvalidBytesStaySingleByteTokensAndSpecialTextIsNotSpecial) {
  const Tokenizer tok = trained(420);
  EXPECT_EQ(tok.encode("\xff"), (std::vector<uint32_t>{0xFF}));
  const std::vector<uint32_t> ids = tok.encode("the\xfethe");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 0xFEu), ids.end());
  for (uint32_t id : tok.encode("<|endoftext|>")) EXPECT_NE(id, kEndOfTextId);
  EXPECT_LT(tok.encode("the").size(), 3u);  // "the" is frequent in the training text: merged
}

TEST(Tokenizer, HeapMergeEqualsNaiveGpt2Loop) {
  const Tokenizer tok = trained(480);
  PairRanks ranks;
  ranks.build(tok.merges());
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const std::string s = random_bytes(seed + 1000, 1 + seed % 200, true);
    std::vector<uint32_t> a, b;
    for (char c : s) a.push_back(static_cast<unsigned char>(c));
    b = a;
    bpe_merge_naive(ranks, a);
    bpe_merge_heap(ranks, b);
    ASSERT_EQ(a, b) << "seed " << seed;
  }
}

// Naive twin of BpeTrainer: recount every pair of every piece after each merge.
std::vector<Merge> naive_train(const std::vector<std::string>& texts, int reps, int64_t vocab) {
  std::map<std::string, int64_t> counts;
  for (int r = 0; r < reps; ++r)
    for (const auto& s : texts)
      for (const Piece& p : pretokenize(s))
        if (p.end - p.begin >= 2) ++counts[s.substr(p.begin, p.end - p.begin)];
  std::vector<std::pair<std::vector<uint32_t>, int64_t>> words;
  for (const auto& [w, c] : counts) {
    std::vector<uint32_t> sym;
    for (char ch : w) sym.push_back(static_cast<unsigned char>(ch));
    words.push_back({sym, c});
  }
  std::vector<Merge> merges;
  while (static_cast<int64_t>(merges.size()) < vocab - kFirstMergeId) {
    std::map<std::pair<uint32_t, uint32_t>, int64_t> pc;
    for (const auto& [sym, c] : words)
      for (size_t i = 0; i + 1 < sym.size(); ++i) pc[{sym[i], sym[i + 1]}] += c;
    if (pc.empty()) break;
    auto best = pc.begin();
    for (auto it = pc.begin(); it != pc.end(); ++it)
      if (it->second > best->second) best = it;  // map order = smallest pair first among ties
    const uint32_t id = kFirstMergeId + static_cast<uint32_t>(merges.size());
    merges.push_back({best->first.first, best->first.second});
    for (auto& [sym, c] : words) {
      std::vector<uint32_t> out;
      for (size_t i = 0; i < sym.size();) {
        if (i + 1 < sym.size() && sym[i] == best->first.first && sym[i + 1] == best->first.second) {
          out.push_back(id);
          i += 2;
        } else {
          out.push_back(sym[i++]);
        }
      }
      sym = out;
    }
  }
  return merges;
}

TEST(BpeTrain, EqualsNaiveRetrainTwin) {
  const Tokenizer tok = trained(450);
  EXPECT_EQ(tok.merges(), naive_train(kTrainText, 3, 450));
}

TEST(BpeTrain, ClosedFormRepeatedLetter) {
  BpeTrainer t;
  t.add_text("aaaa");
  auto tok = t.train(259);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->merges(), (std::vector<Merge>{{97, 97}, {257, 257}}));
  EXPECT_EQ(tok->encode("aaaa"), (std::vector<uint32_t>{258}));
  EXPECT_EQ(tok->encode("aaa"), (std::vector<uint32_t>{257, 97}));
  EXPECT_EQ(tok->token_bytes(258), "aaaa");
}

TEST(BpeTrain, DeterministicWhateverTheOrderOfTexts) {
  BpeTrainer a, b;
  for (int rep = 0; rep < 3; ++rep)
    for (const auto& s : kTrainText) a.add_text(s);
  for (int rep = 0; rep < 3; ++rep)
    for (auto it = kTrainText.rbegin(); it != kTrainText.rend(); ++it) b.add_text(*it);
  auto ta = a.train(480), tb = b.train(480), ta2 = a.train(480);
  ASSERT_TRUE(ta.ok() && tb.ok() && ta2.ok());
  EXPECT_EQ(ta->merges(), tb->merges());
  EXPECT_EQ(sha256_hex(ta->to_json()), sha256_hex(tb->to_json()));
  EXPECT_EQ(ta->to_json(), ta2->to_json());
}

TEST(BpeTrain, VocabularyErrors) {
  BpeTrainer t;
  t.add_text("hello hello");
  auto small = t.train(256);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("257"), std::string::npos) << small.status().message();
  EXPECT_TRUE(t.train(257).ok());  // zero merges is a valid byte-level tokenizer
  auto big = t.train(1000);        // "hello" and " hello" have only 5 merges to give
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(big.status().hint().find("262"), std::string::npos) << big.status().hint();
}

TEST(TokenizerJson, RoundTripAndRejectsBadFiles) {
  const Tokenizer tok = trained(300);
  auto again = Tokenizer::from_json(tok.to_json(), "t.json");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->merges(), tok.merges());
  EXPECT_EQ(again->to_json(), tok.to_json());
  EXPECT_EQ(again->vocab_size(), 300);

  auto expect_bad = [](std::string text, std::string needle) {
    auto r = Tokenizer::from_json(text, "bad.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("bad.json"), std::string::npos) << r.status().message();
  };
  const std::string good = tok.to_json();
  expect_bad("not json", "not a JSON object");
  std::string v2 = good;
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  expect_bad(v2, "version");
  std::string head = good.substr(0, good.find("\"merges\""));
  head.replace(head.find("\"vocab_size\": 300"), 17, "\"vocab_size\": 258");
  expect_bad(head + "\"merges\": [[97, 257]]}", "merge 0 [97, 257]");  // refers to itself
  expect_bad(head + "\"merges\": [[97, 256]]}", "<|endoftext|>");
  std::string wrong_vocab = good;
  wrong_vocab.replace(wrong_vocab.find("\"vocab_size\": 300"), 17, "\"vocab_size\": 299");
  expect_bad(wrong_vocab, "vocab_size");
  auto missing = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::data
