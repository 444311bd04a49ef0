// compare_checksums' per-record output (CompareSpec::keep_records, evidence/compare.h), which the report's
// divergence view draws: every aligned record in the run's file order, flagged as the comparison judged
// it, so that the record the view highlights is the comparison's own first divergence and never a second
// reading of the files. Synthetic checksums.jsonl files with closed-form differences.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checksum_records.h"
#include "core/file_io.h"
#include "evidence/compare.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The records (tests/support/checksum_records.h): a gradient of (a, a, a, a) has l2 = 2a, sum = 4a, absmax = a.
const auto& loss = sp::test::loss_record;
const auto& grad = sp::test::grad_record;
const auto& jsonl = sp::test::jsonl_text;

const std::string kDigestA(32, 'a'), kDigestB(32, 'b'), kDigestC(32, 'c');

// The two files of one test, in a fresh directory that goes with it.
struct Files {
  const sp::test::TempDir dir;
  const std::string run = dir.file("run.jsonl"), ref = dir.file("ref.jsonl");
  Files() {
    // Step 0 bit-identical; step 1: the gradient differs by 1e-7 relative (inside 2^-16), the loss by 1e-3.
    EXPECT_TRUE(
        write_file_atomic(ref, jsonl({loss(0, 2.0), grad(0, 1.0, kDigestA), loss(1, 1.5), grad(1, 0.5, kDigestB)}))
            .ok());
    EXPECT_TRUE(write_file_atomic(run, jsonl({loss(0, 2.0), grad(0, 1.0, kDigestA), loss(1, 1.5 * (1 + 1e-3)),
                                              grad(1, 0.5 * (1 + 1e-7), kDigestC)}))
                    .ok());
  }
};

TEST(CompareRecords, EveryAlignedRecordAsTheComparisonJudgedIt) {
  Files f;
  auto c = compare_checksums(f.run, f.ref, {.promised = Equivalence::kWithinTolerance, .keep_records = true});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->verdict, Equivalence::kDivergent);
  ASSERT_EQ(c->record_differences.size(), 4u);
  const auto& r = c->record_differences;
  EXPECT_TRUE(r[0].bitwise && r[1].bitwise);
  EXPECT_FALSE(r[0].out_of_class() || r[1].out_of_class());
  EXPECT_FALSE(r[2].bitwise);
  EXPECT_TRUE(r[2].out_of_class()) << "a loss 1e-3 away is outside 2^-16";
  EXPECT_NEAR(r[2].diff.rel_l2, 1e-3, 1e-12);
  EXPECT_FALSE(r[3].bitwise);
  EXPECT_FALSE(r[3].out_of_class()) << r[3].diff.to_string();
  EXPECT_NEAR(r[3].diff.rel_l2, 1e-7, 1e-12);
  // The records the comparison summarizes are exactly these.
  int64_t bitwise = 0;
  for (const RecordDifference& d : r) bitwise += d.bitwise;
  EXPECT_EQ(bitwise, c->bitwise_records);
  ASSERT_EQ(c->divergence.size(), 1u);
  EXPECT_EQ(c->divergence[0].step, r[2].diff.step);
  EXPECT_EQ(c->divergence[0].tensor, r[2].diff.tensor);
  EXPECT_EQ(c->divergence[0].reason, r[2].diff.reason);
  ASSERT_EQ(c->first_mismatch.size(), 1u);
  EXPECT_EQ(c->first_mismatch[0].step, 1);
}

TEST(CompareRecords, ABitwisePromiseMakesEveryChangedBitOutOfClass) {
  Files f;
  auto c = compare_checksums(f.run, f.ref, {.promised = Equivalence::kBitwise, .keep_records = true});
  ASSERT_TRUE(c.ok());
  const auto& r = c->record_differences;
  ASSERT_EQ(r.size(), 4u);
  EXPECT_TRUE(r[2].out_of_class() && r[3].out_of_class());
  EXPECT_NE(r[3].diff.reason.find("promised bitwise"), std::string::npos) << r[3].diff.reason;
}

TEST(CompareRecords, StepsNotJudgedAreListedButNeverOutOfClass) {
  Files f;
  auto c = compare_checksums(f.run, f.ref,
                             {.promised = Equivalence::kWithinTolerance, .judged_steps = {0}, .keep_records = true});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Equivalence::kBitwise);  // step 0, the only judged step, is bit-identical
  const auto& r = c->record_differences;
  ASSERT_EQ(r.size(), 4u);
  EXPECT_TRUE(r[0].judged && r[1].judged);
  EXPECT_FALSE(r[2].judged || r[3].judged);
  EXPECT_FALSE(r[2].out_of_class());
  EXPECT_NEAR(r[2].diff.rel_l2, 1e-3, 1e-12) << "the drift of a step not judged is still measured";
}

TEST(CompareRecords, NothingIsKeptUnlessAsked) {
  Files f;
  auto c = compare_checksums(f.run, f.ref, {.promised = Equivalence::kWithinTolerance});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->record_differences.empty());
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
