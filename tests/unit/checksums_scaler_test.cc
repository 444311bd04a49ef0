// The fp16 loss scaler's records in checksums.jsonl (docs/formats/checksums.md, evidence/compare.h): read
// strictly, exact under every promise (a different scale or skip is out of class even where the tensors
// are judged within tolerance, and is the first divergence of its step), and required exactly where the
// contract implies them (plan::expected_records: every step of an fp16 run, never in fp32/bf16).
// Synthetic checksums.jsonl files whose differences are stated in the test; the end-to-end check (a real
// fp16 run with a forced overflow against a clean one) is tests/runs case fp16_scaler.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checksum_records.h"
#include "config/run_config.h"
#include "core/file_io.h"
#include "evidence/checksums.h"
#include "evidence/compare.h"
#include "plan/promise.h"
#include "preset_config.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {

namespace fs = std::filesystem;
using json = nlohmann::json;

using sp::test::grad_record;  // tests/support/checksum_records.h
using sp::test::loss_record;
using sp::test::scaler_record;

struct Dir {
  const sp::test::TempDir dir;
  std::string write(const std::string& name, const std::vector<json>& records) const {
    const std::string file = dir.file(name);
    EXPECT_TRUE(write_file_atomic(file, sp::test::jsonl_text(records)).ok());
    return file;
  }
};

const std::string kA(32, 'a'), kB(32, 'b');

// Two steps: the reference applies both at scale 2^16; the run skips step 1 (an overflow) at the same scale.
std::vector<json> reference() {
  return {loss_record(0, 2.0), scaler_record(0, 65536.0, false), grad_record(0, 1.0, kA),
          loss_record(1, 1.5), scaler_record(1, 65536.0, false), grad_record(1, 0.5, kA)};
}

TEST(ChecksumsScaler, AWriterRecordIsReadBack) {
  Dir d;
  const std::string file = d.dir.file("checksums.jsonl");
  {
    auto w = ChecksumWriter::open(file, JsonlWriter::Mode::kTruncate);
    ASSERT_TRUE(w.ok()) << w.status().message();
    w->write_scalar(3, "loss", "loss", 4.25);
    w->write_scaler(3, 32768.0, true);
    ASSERT_TRUE(w->close().ok());
  }
  auto records = read_checksums(file);
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), 2u);
  const ChecksumRecord& s = (*records)[1];
  EXPECT_EQ(s.key.step, 3);
  EXPECT_EQ(s.key.phase, kScalerPhase);
  EXPECT_EQ(s.key.tensor, kScalerTensor);
  EXPECT_EQ(s.scale, 32768.0);
  EXPECT_TRUE(s.skipped);
}

TEST(ChecksumsScaler, RecordsAreReadStrictly) {
  Dir d;
  const std::vector<std::pair<json, std::string>> bad = {
      {json{{"step", 0}, {"phase", "scaler"}, {"tensor", "loss_scaler"}, {"scale", 2.0}}, "skipped"},
      {[] {
         json j = scaler_record(0, 2.0, false);
         j["value"] = 1.0;
         return j;
       }(),
       "value"},
      {scaler_record(0, 0.0, false), "scale"},
      {scaler_record(0, -4.0, false), "scale"},
      {[] {
         json j = scaler_record(0, 2.0, false);
         j["tensor"] = "loss";
         return j;
       }(),
       "tensor"},
      {[] {
         json j = scaler_record(0, 2.0, false);
         j["skipped"] = 1;
         return j;
       }(),
       "skipped"},
      {[] {
         json j = scaler_record(0, 2.0, false);
         j["scale"] = "65536";
         return j;
       }(),
       "scale"},
  };
  for (const auto& [record, field] : bad) {
    auto r = read_checksums(d.write("bad.jsonl", {record}));
    ASSERT_FALSE(r.ok()) << record.dump();
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("bad.jsonl:1"), std::string::npos) << r.status().message();
  }
}

TEST(ChecksumsScaler, EqualScalersAreBitwise) {
  Dir d;
  auto c = compare_checksums(d.write("run", reference()), d.write("ref", reference()));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->verdict, Equivalence::kBitwise) << c->describe();
  EXPECT_EQ(c->records, 6);
  EXPECT_EQ(c->bitwise_records, 6);
}

TEST(ChecksumsScaler, ASkipIsOutOfClassUnderEveryPromiseAndComesFirst) {
  Dir d;
  std::vector<json> run = reference();
  run[4] = scaler_record(1, 65536.0, true);       // skipped step 1
  run[5] = grad_record(1, 0.5 * (1 + 1e-7), kB);  // a gradient inside any tolerance
  const std::string got = d.write("run", run), want = d.write("ref", reference());
  for (Equivalence promised : {Equivalence::kBitwise, Equivalence::kWithinTolerance}) {
    auto c = compare_checksums(got, want, {.promised = promised, .keep_records = true});
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->verdict, Equivalence::kDivergent) << c->describe();
    ASSERT_EQ(c->divergence.size(), 1u);
    const Divergence& first = c->divergence[0];
    EXPECT_EQ(first.step, 1);
    EXPECT_EQ(first.phase, kScalerPhase);
    EXPECT_NE(first.reason.find("skipped"), std::string::npos) << first.reason;
    EXPECT_NE(first.to_string().find("step 1 loss scaler"), std::string::npos) << first.to_string();
    ASSERT_EQ(c->record_differences.size(), 6u);
    EXPECT_TRUE(c->record_differences[4].out_of_class());
    // Within tolerance the gradient itself stays in class: the scaler alone names the step.
    if (promised == Equivalence::kWithinTolerance) {
      EXPECT_FALSE(c->record_differences[5].out_of_class());
    }
  }
}

TEST(ChecksumsScaler, ADifferentScaleIsOutOfClass) {
  Dir d;
  std::vector<json> run = reference();
  run[1] = scaler_record(0, 32768.0, false);
  auto c =
      compare_checksums(d.write("run", run), d.write("ref", reference()), {.promised = Equivalence::kWithinTolerance});
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->divergence.size(), 1u);
  EXPECT_EQ(c->divergence[0].step, 0);
  EXPECT_EQ(c->divergence[0].phase, kScalerPhase);
  EXPECT_NE(c->divergence[0].reason.find("loss scale 32768"), std::string::npos) << c->divergence[0].reason;
  EXPECT_DOUBLE_EQ(c->divergence[0].rel_l2, 0.5);
}

TEST(ChecksumsScaler, StepsNotJudgedOnlyDrift) {
  Dir d;
  std::vector<json> run = reference();
  run[4] = scaler_record(1, 32768.0, true);
  auto c = compare_checksums(d.write("run", run), d.write("ref", reference()),
                             {.promised = Equivalence::kWithinTolerance, .judged_steps = {0}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Equivalence::kBitwise) << c->describe();
  ASSERT_EQ(c->drift_per_step.size(), 2u);
  EXPECT_DOUBLE_EQ(c->drift_per_step[1].second, 0.5);
}

config::RunConfig config_with(const std::vector<std::string>& sets) {
  auto rc = sp::test::preset_config("tiny", sets);
  EXPECT_TRUE(rc.ok()) << rc.status().message();
  return *rc;
}

TEST(ChecksumsScaler, TheContractRequiresThemInFp16Only) {
  const config::RunConfig fp16 = config_with(
      {"train.precision=fp16", "fp16.initial_scale_power=16", "train.steps=2", "evidence.checksum_every=0"});
  const config::RunConfig bf16 = config_with({"train.precision=bf16", "train.steps=2", "evidence.checksum_every=0"});
  const std::vector<RecordKey> want16 = {
      {0, "loss", "loss"}, {0, kScalerPhase, kScalerTensor}, {1, "loss", "loss"}, {1, kScalerPhase, kScalerTensor}};
  EXPECT_EQ(plan::expected_records(fp16), want16);
  EXPECT_EQ(plan::expected_records(bf16), (std::vector<RecordKey>{{0, "loss", "loss"}, {1, "loss", "loss"}}));

  Dir d;
  const std::string with = d.write("with", {loss_record(0, 2.0), scaler_record(0, 65536.0, false), loss_record(1, 1.5),
                                            scaler_record(1, 65536.0, false)});
  const std::string without = d.write("without", {loss_record(0, 2.0), loss_record(1, 1.5)});
  // An fp16 contract: both files must hold a scaler record per step.
  auto c = compare_checksums(without, with, {.expected = plan::expected_records(fp16)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Equivalence::kIncomplete);
  ASSERT_FALSE(c->problems.empty());
  EXPECT_NE(c->problems[0].find("missing, the first step 0 loss scaler"), std::string::npos) << c->problems[0];
  // A bf16 contract: a scaler record is not expected.
  c = compare_checksums(with, without, {.expected = plan::expected_records(bf16)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Equivalence::kIncomplete);
  ASSERT_FALSE(c->problems.empty());
  EXPECT_NE(c->problems[0].find("step 0 loss scaler is not expected by the contract"), std::string::npos)
      << c->problems[0];
  c = compare_checksums(with, with, {.expected = plan::expected_records(fp16)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Equivalence::kBitwise) << c->describe();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
