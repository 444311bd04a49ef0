// Text-level pieces of the data pipeline, each against a closed form or a hand-checked answer:
// UTF-8 decoding, script detection, document splitting, units, quality filters, PII scrubbing
// (planted e-mails, phones, IPs and look-alikes that must survive), MinHash against exact Jaccard,
// the LSH banding curve, near-duplicate clustering and the n-gram contamination index.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/contamination.h"
#include "data/dedup.h"
#include "data/pii.h"
#include "data/quality_filter.h"
#include "data/sources.h"
#include "data/text_units.h"
#include "data/utf8.h"
#include "unity_id.h"

namespace sp::data {
namespace {
namespace SP_TEST_ID {

TEST(Utf8, StrictDecoding) {
  EXPECT_TRUE(utf8_valid("plain ascii"));
  EXPECT_TRUE(utf8_valid("中文 🙂 é"));
  size_t bad = 99;
  EXPECT_FALSE(utf8_valid("ab\xff", &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(utf8_valid("\xc0\xaf", &bad));          // overlong '/'
  EXPECT_FALSE(utf8_valid("\xed\xa0\x80", &bad));      // surrogate U+D800
  EXPECT_FALSE(utf8_valid("\xf4\x90\x80\x80", &bad));  // above U+10FFFF
  EXPECT_FALSE(utf8_valid("x\xe4\xb8", &bad));         // truncated at the end
  EXPECT_EQ(bad, 1u);
  const Utf8Char c = utf8_next("中", 0);
  EXPECT_TRUE(c.valid);
  EXPECT_EQ(c.cp, 0x4E2Du);
  EXPECT_EQ(c.len, 3);
  std::string out;
  utf8_append(0x1F642, out);
  EXPECT_EQ(out, "🙂");
}

TEST(Utf8, ScriptDetection) {
  EXPECT_STREQ(detect_script(count_scripts("床前明月光，疑是地上霜。")).language, "zh");
  EXPECT_STREQ(detect_script(count_scripts("The quick brown fox.")).language, "en");
  EXPECT_STREQ(detect_script(count_scripts("Жили-были дед да баба")).script, "Mixed");
  EXPECT_STREQ(detect_script(count_scripts("12345 !!!")).language, "und");
  const ScriptGuess g = detect_script(count_scripts("ab中文"));
  EXPECT_STREQ(g.script, "Han");
  EXPECT_DOUBLE_EQ(g.han_share, 0.5);
}

TEST(Sources, SplitDocumentsOnPercentLines) {
  const std::string f = "first\ndoc\n%\nsecond\n%\r\nthird\n%\n%\n";
  const auto d = split_documents(f, DocFormat::kPercentSeparated);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(f.substr(d[0].offset, d[0].size), "first\ndoc");
  EXPECT_EQ(f.substr(d[1].offset, d[1].size), "second");
  EXPECT_EQ(f.substr(d[2].offset, d[2].size), "third");
  EXPECT_EQ(split_documents("%\nonly\n", DocFormat::kPercentSeparated).size(), 1u);
  EXPECT_EQ(split_documents("50% off\n", DocFormat::kPercentSeparated).size(), 1u);
  EXPECT_TRUE(split_documents("", DocFormat::kPercentSeparated).empty());
  const auto w = split_documents("a\n%\nb", DocFormat::kWholeFile);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].size, 5);
}

TEST(TextUnits, WordsAndHanCharacters) {
  EXPECT_EQ(text_units("Hello, WORLD 中文").size(), 4u);
  EXPECT_EQ(text_units("hello world"), text_units("HELLO   world!"));
  EXPECT_EQ(normalize_text("  A\tb \n\n C  "), "a b c");
  const auto u = text_units("a b c d e");
  EXPECT_EQ(unit_ngrams(u, 3).size(), 3u);
  EXPECT_TRUE(unit_ngrams(u, 6).empty());
}

TEST(QualityFilter, EachReasonWithItsMeasurement) {
  FilterOptions opt;
  const std::string prose =
      "The keeper climbed the stairs every evening and lit the lamp, then wrote the time in his ledger "
      "before going down again.";
  EXPECT_EQ(quality_check(prose, opt).reason, FilterReason::kNone);
  EXPECT_EQ(quality_check("床前明月光，疑是地上霜。举头望明月，低头思故乡。", opt).reason, FilterReason::kNone);

  const QualityResult nul = quality_check(prose + std::string("\0", 1), opt);
  EXPECT_EQ(nul.reason, FilterReason::kBinary);
  EXPECT_EQ(nul.decisions[0]["nul"], true);

  const QualityResult bad = quality_check(prose + "\xff\xfe", opt);
  EXPECT_EQ(bad.reason, FilterReason::kInvalidUtf8);
  EXPECT_EQ(bad.decisions[1]["first_invalid_byte"], prose.size());

  const QualityResult short_doc = quality_check("Hi there.", opt);
  EXPECT_EQ(short_doc.reason, FilterReason::kTooShort);
  EXPECT_EQ(short_doc.decisions[2]["units"], 2);

  const std::string nav =
      "Table of Contents\nHome\nAbout\nContact\nCopyright (c) 2024 Example Corp. All rights reserved.\n"
      "Privacy Policy | Terms of Use\nNews\nBlog";
  const QualityResult bp = quality_check(nav, opt);
  EXPECT_EQ(bp.reason, FilterReason::kBoilerplate);
  EXPECT_GE(bp.decisions[3]["share"].get<double>(), 0.6);
  EXPECT_TRUE(boilerplate_line("=======|=======|======"));
  EXPECT_FALSE(boilerplate_line("作者：王维"));
  EXPECT_EQ(std::string(filter_reason_name(FilterReason::kInvalidUtf8)), "invalid_utf8");
}

TEST(Pii, PlantedCasesAreScrubbedAndCountedLookAlikesSurvive) {
  PiiCounts c;
  const std::string in =
      "Mail alice.liddell@example.com or bob+lists@mail.example.org. Call +1 (555) 010-0199, 555-010-0134 or "
      "+86 138 0013 8000. Hosts 192.0.2.17 and 198.51.100.4; IPv6 2001:db8::8a2e:370:7334 and fe80::1. "
      "Keep ISBN 0-937175-64-1, version 4.4.7, 10:30:00, :fab: and @-party and 2003-12-29 and 1.2.3.4.5.";
  const std::string out = scrub_pii(in, &c);
  EXPECT_EQ(c.email, 2);
  EXPECT_EQ(c.phone, 3);
  EXPECT_EQ(c.ipv4, 2);
  EXPECT_EQ(c.ipv6, 2);
  EXPECT_EQ(out,
            "Mail <EMAIL> or <EMAIL>. Call <PHONE>, <PHONE> or <PHONE>. Hosts <IPV4> and <IPV4>; IPv6 <IPV6> and "
            "<IPV6>. Keep ISBN 0-937175-64-1, version 4.4.7, 10:30:00, :fab: and @-party and 2003-12-29 and "
            "1.2.3.4.5.");
  PiiCounts none;
  EXPECT_EQ(scrub_pii("no pii here, 中文也没有。", &none), "no pii here, 中文也没有。");
  EXPECT_EQ(none.total(), 0);
  PiiCounts edge;
  EXPECT_EQ(scrub_pii("x@y.z a@b 1.2.3.256 ::", &edge), "x@y.z a@b 1.2.3.256 ::");  // 1-letter TLD, no dot, octet > 255
  EXPECT_EQ(edge.total(), 0);
}

std::vector<uint64_t> range_set(uint64_t begin, uint64_t end) {
  std::vector<uint64_t> s;
  for (uint64_t i = begin; i < end; ++i) s.push_back(i * 0x9E3779B97F4A7C15ull);
  std::sort(s.begin(), s.end());
  return s;
}

TEST(MinHash, EstimateMatchesExactJaccard) {
  // |A| = |B| = 1000, |A ∩ B| = k  →  J = k / (2000 − k). With 1024 hashes σ ≤ 0.016; allow 4σ.
  for (uint64_t k : {0u, 200u, 500u, 800u, 1000u}) {
    const auto a = range_set(0, 1000), b = range_set(1000 - k, 2000 - k);
    const double j = jaccard(a, b);
    EXPECT_NEAR(j, static_cast<double>(k) / static_cast<double>(2000 - k), 1e-12);
    const auto sa = minhash_signature(a, 1024, 7), sb = minhash_signature(b, 1024, 7);
    int equal = 0;
    for (size_t i = 0; i < sa.size(); ++i) equal += sa[i] == sb[i];
    EXPECT_NEAR(equal / 1024.0, j, 0.065) << "k = " << k;
  }
}

TEST(MinHash, BandingCurveClosedForm) {
  EXPECT_NEAR(lsh_candidate_probability(0.8, 20, 6), 1.0 - std::pow(1.0 - std::pow(0.8, 6), 20), 1e-15);
  EXPECT_GT(lsh_candidate_probability(0.8, 20, 6), 0.997);  // few false negatives at the threshold
  EXPECT_LT(lsh_candidate_probability(0.3, 20, 6), 0.015);  // few wasted exact checks far below it
  EXPECT_DOUBLE_EQ(lsh_candidate_probability(1.0, 20, 6), 1.0);
  EXPECT_DOUBLE_EQ(lsh_candidate_probability(0.0, 20, 6), 0.0);
}

TEST(NearDuplicates, ClustersAboveThresholdOnlyLowestIndexRepresents) {
  const auto base = range_set(0, 200);
  std::vector<std::vector<uint64_t>> sets = {
      range_set(5000, 5200),  // 0: unrelated
      base,                   // 1
      range_set(10, 210),     // 2: J(1,2) = 190/210 = 0.905
      range_set(0, 100),      // 3: J(1,3) = 0.5: not a duplicate
      range_set(20, 220),     // 4: J(2,4) = 0.905, J(1,4) = 0.818: same cluster
      {},                     // 5: empty shingle set never matches
  };
  const NearDupResult r = near_duplicates(sets, MinHashOptions{});
  EXPECT_EQ(r.representative, (std::vector<int64_t>{0, 1, 1, 3, 1, 5}));
  EXPECT_EQ(r.clusters, 1);
  EXPECT_GE(r.similar_pairs, 2);
  EXPECT_EQ(shingle_set({1, 2}, 5).size(), 1u);  // shorter than k: one shingle
  EXPECT_EQ(shingle_set({1, 2, 3, 4, 5, 6}, 5).size(), 2u);
}

TEST(Contamination, SharedNgramIsFound) {
  const auto train = text_units("one two three four five six seven eight nine ten eleven twelve thirteen fourteen");
  NgramIndex index(13);
  index.add(train);
  index.add(text_units("short"));
  index.finalize();
  EXPECT_EQ(index.size(), 2);
  const auto hit =
      index.overlap(text_units("zero ONE two three four five six seven eight nine ten eleven twelve thirteen"));
  EXPECT_EQ(hit.ngrams, 2);
  EXPECT_EQ(hit.overlapping, 1);
  const auto miss =
      index.overlap(text_units("one two three four five six seven eight nine ten eleven twelve fourteen"));
  EXPECT_EQ(miss.overlapping, 0);
  const auto han = text_units("床前明月光疑是地上霜举头望明");
  EXPECT_EQ(han.size(), 14u);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::data
