// The lab claims' evaluator (labs/claims.h) on a small bundle written here: every quantity holds on
// what the files say and fails on a value they do not say, so no quantity is a constant; a missing file, a
// glob that matches nothing, a bad filter or pointer, a malformed claim and an ordering of strings do not
// hold and say why. The catalogue reader refuses an observation without claims. The claims of the real
// catalogue against real bundles: tests/labs (tests/support/lab_claims.py).
#include <gtest/gtest.h>

#include "core/file_io.h"
#include "evidence/bundle_paths.h"
#include "labs/claims.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::labs {
namespace {
namespace SP_TEST_ID {

// A bundle with a trace (two ranks), a JSON document, a checksums pair and a two-stage timeline.
class Bundle {
 public:
  Bundle() {
    write("parallel/trace/rank-00000.jsonl",
          "{\"group\":\"dp[tp0.pp0]\",\"op\":\"all_to_all\",\"phase\":\"grad_sync\",\"step\":1,\"bytes\":40,"
          "\"wire_bytes\":20}\n"
          "{\"group\":\"dp[tp0.pp0]\",\"op\":\"all_gather\",\"phase\":\"grad_sync\",\"step\":1,\"bytes\":40,"
          "\"wire_bytes\":20}\n"
          "{\"group\":\"world\",\"op\":\"all_reduce\",\"phase\":\"evidence\",\"step\":1,\"bytes\":8,"
          "\"wire_bytes\":4,\"micro_batch\":-1}\n");
    write("parallel/trace/rank-00001.jsonl",
          "{\"group\":\"dp[tp0.pp0]\",\"op\":\"all_to_all\",\"phase\":\"grad_sync\",\"step\":1,\"bytes\":40,"
          "\"wire_bytes\":20}\n");
    write(
        "first_divergence.json",
        "{\"first\":{\"view\":\"trace vs predicted communication\",\"step\":2,\"ranks\":[0,1]},"
        "\"views\":[{\"view\":\"trace consistency\",\"found\":false},{\"view\":\"checksums\",\"found\":true}],"
        "\"tensors\":{\"param.gather.embed\":{\"category\":\"param\"},\"recompute.h\":{\"category\":\"activation\"}}}");
    write("parallel/checksums.jsonl",
          "{\"step\":0,\"phase\":\"grad\",\"tensor\":\"w\",\"digest\":\"aa\"}\n"
          "{\"step\":0,\"phase\":\"grad\",\"tensor\":\"v\",\"digest\":\"bb\"}\n");
    write("reference/checksums.jsonl",
          "{\"step\":0,\"phase\":\"grad\",\"tensor\":\"v\",\"digest\":\"bb\"}\n"
          "{\"step\":0,\"phase\":\"grad\",\"tensor\":\"w\",\"digest\":\"ab\"}\n");
    write("summary.md", "# LSL-D\n\n**Verdict: PASS**\n");
    // Stage 0 (rank 0) computes from the step's start and ends last; stage 1 (rank 1) starts late, ends early.
    write("run/topology.json", "{\"world_size\":2,\"groups\":{\"pp\":[[0,1]]}}");
    write("run/timeline/rank-00000.jsonl",
          "{\"kind\":\"forward\",\"step\":1,\"micro_batch\":0,\"t0_us\":0,\"t1_us\":10,\"virtual_stage\":0}\n"
          "{\"kind\":\"backward\",\"step\":1,\"micro_batch\":0,\"t0_us\":40,\"t1_us\":60,\"virtual_stage\":0}\n");
    write("run/timeline/rank-00001.jsonl",
          "{\"kind\":\"recv\",\"step\":1,\"micro_batch\":0,\"t0_us\":0,\"t1_us\":10,\"virtual_stage\":0}\n"
          "{\"kind\":\"forward\",\"step\":1,\"micro_batch\":0,\"t0_us\":10,\"t1_us\":20,\"virtual_stage\":0}\n"
          "{\"kind\":\"backward\",\"step\":1,\"micro_batch\":0,\"t0_us\":20,\"t1_us\":40,\"virtual_stage\":0}\n");
    write("run/contract.json",
          "{\"config\":{\"parallel\":{\"dp\":1,\"tp\":1,\"pp\":2,\"schedule\":\"1f1b\",\"virtual_stages\":1},"
          "\"train\":{\"global_batch\":2,\"micro_batch_size\":2}}}");
  }
  bool holds(const std::string& claim) const { return evaluate_claim(dir_.path(), claim).holds; }
  std::string measured(const std::string& claim) const { return evaluate_claim(dir_.path(), claim).measured; }
  void write(const std::string& rel, const std::string& text) {
    const std::string path = dir_.path() + "/" + rel;
    ASSERT_TRUE(make_directories(path.substr(0, path.rfind('/'))).ok());
    ASSERT_TRUE(write_file(path, text).ok());
  }

 private:
  sp::test::TempDir dir_;
};

TEST(LabClaims, CountsFiltersAndRatios) {
  const Bundle b;
  EXPECT_TRUE(b.holds("count parallel/trace/rank-*.jsonl group=dp* op=all_to_all == 2"));
  EXPECT_FALSE(b.holds("count parallel/trace/rank-*.jsonl group=dp* op=all_to_all == 3"));
  EXPECT_TRUE(b.holds("count parallel/trace/rank-00000.jsonl phase!=grad_sync == 1"));
  EXPECT_TRUE(b.holds("count parallel/trace/rank-0000[0-1].jsonl micro_batch=* == 1"));
  EXPECT_TRUE(b.holds("count parallel/trace/rank-00000.jsonl !micro_batch == 2"));
  EXPECT_TRUE(b.holds("count parallel/trace/rank-00000.jsonl micro_batch=-1 == 1"));
  EXPECT_TRUE(
      b.holds("sum parallel/trace/rank-00000.jsonl wire_bytes phase=grad_sync / sum "
              "parallel/trace/rank-00000.jsonl bytes phase=grad_sync == 0.5"));
  EXPECT_FALSE(
      b.holds("sum parallel/trace/rank-00000.jsonl wire_bytes / sum parallel/trace/rank-00000.jsonl bytes "
              "> 0.5"));
  EXPECT_TRUE(b.holds("max parallel/trace/rank-*.jsonl bytes >= 40"));
  EXPECT_TRUE(b.holds("distinct parallel/trace/rank-*.jsonl op == 3"));
  EXPECT_TRUE(b.holds("files parallel/trace/rank-*.jsonl == 2"));
  EXPECT_EQ(b.measured("count parallel/trace/rank-*.jsonl == 0"), "4");
}

TEST(LabClaims, ValuesPointersTextAndDifferences) {
  const Bundle b;
  EXPECT_TRUE(b.holds("value first_divergence.json /first/view == trace vs predicted communication"));
  EXPECT_FALSE(b.holds("value first_divergence.json /first/view == trace consistency"));
  EXPECT_TRUE(b.holds("value first_divergence.json /first/ranks == [0,1]"));
  EXPECT_TRUE(b.holds("value first_divergence.json /first/view has predicted"));
  EXPECT_TRUE(b.holds("count first_divergence.json#/views view=trace* found=true == 0"));
  EXPECT_TRUE(b.holds("count first_divergence.json#/tensors _key=recompute.* category=activation == 1"));
  EXPECT_TRUE(b.holds("count first_divergence.json /first/step=2 == 1"));
  EXPECT_TRUE(b.holds("text summary.md has **Verdict: PASS**"));
  EXPECT_FALSE(b.holds("text summary.md lacks **Verdict: PASS**"));
  // w's digest differs; v's is equal although the files list the records in another order.
  EXPECT_TRUE(b.holds("differ parallel/checksums.jsonl reference/checksums.jsonl digest == 1"));
  EXPECT_TRUE(b.holds("differ parallel/checksums.jsonl reference/checksums.jsonl digest tensor=v == 0"));
}

TEST(LabClaims, WhichStageIdles) {
  const Bundle b;
  // span 60: stage 0 idles 0 at the end, stage 1 idles 20; stage 1 starts 10 late.
  EXPECT_TRUE(b.holds("idle_end_stage run == 1"));
  EXPECT_FALSE(b.holds("idle_end_stage run == 0"));
  EXPECT_TRUE(b.holds("idle_start_stage run == 1"));
}

TEST(LabClaims, WhatCannotBeEvaluatedDoesNotHold) {
  const Bundle b;
  EXPECT_FALSE(b.holds("count parallel/trace/rank-9*.jsonl >= 0"));
  EXPECT_NE(b.measured("count parallel/trace/rank-9*.jsonl >= 0").find("no file matches"), std::string::npos);
  EXPECT_FALSE(b.holds("value first_divergence.json /first/nothing == 1"));
  EXPECT_FALSE(b.holds("value first_divergence.json first == 1"));  // not a JSON Pointer
  EXPECT_FALSE(b.holds("count parallel/trace/rank-*.jsonl group == 1"));
  EXPECT_FALSE(b.holds("count parallel/trace/rank-*.jsonl"));
  EXPECT_FALSE(b.holds("frobnicate summary.md == 1"));
  EXPECT_FALSE(b.holds("value first_divergence.json /first/view > a"));  // strings are not ordered
  EXPECT_FALSE(b.holds("sum parallel/trace/rank-*.jsonl group == 1"));
  EXPECT_FALSE(b.holds("count parallel/trace/rank-*.jsonl / count parallel/trace/rank-9*.jsonl == 1"));
}

// A claim names bundle files by the names evidence/bundle_paths.h gives them: a file that exists under another
// name is refused by name, never read.
TEST(LabClaims, FilesAreNamedByTheBundlesNames) {
  Bundle b;
  b.write("parallel/checksum.jsonl", "{\"step\":0}\n");  // a name no writer uses
  EXPECT_FALSE(b.holds("count parallel/checksum.jsonl == 1"));
  EXPECT_NE(b.measured("count parallel/checksum.jsonl == 1").find("names no bundle file"), std::string::npos)
      << b.measured("count parallel/checksum.jsonl == 1");
  b.write("parallel/trace/notes.jsonl", "{\"step\":0}\n");
  EXPECT_FALSE(b.holds("count parallel/trace/notes.jsonl == 1"));
  EXPECT_TRUE(b.holds("count parallel/checksums.jsonl == 2"));
  EXPECT_TRUE(b.holds("count parallel/trace/rank-0000*.jsonl == 4"));
  for (const char* name : {"parallel/ledger.json", "fault/first_divergence.json", "*/report.html", "logs/fault.log",
                           "parallel/checkpoints/step-*/manifest.json", "parallel/activations/*", "run/lab.json",
                           "dgx-a100-tp-dp-pp/plan.json", "compare.json", "contract.json"})
    EXPECT_TRUE(evidence::check_bundle_name(name).ok()) << name;
  for (const char* name : {"parallel/ledger.jsonl", "parallel/trace/rank-0.json", "notes.txt", "checkpoints/x.json"})
    EXPECT_FALSE(evidence::check_bundle_name(name).ok()) << name;
}

// An observation is prose and at least one claim; a plain string or an empty check is refused.
TEST(LabClaims, TheCatalogueRefusesObservationsWithoutClaims) {
  const std::string head =
      "format = \"shardproof-labs\"\nversion = 1\nevaluation = \"e\"\ncommon_limits = [\"c\"]\n"
      "[[lab]]\nkey = \"LSL-D\"\nsection = \"4.2.1\"\ntitle = \"t\"\nmechanism = \"m\"\nworld = 2\n"
      "fault = \"skip-grad-allreduce@2\"\ncannot_extrapolate = [\"x\"]\n";
  const auto read = [&](const std::string& observe) {
    const sp::test::TempDir dir;
    EXPECT_TRUE(write_file(dir.file("c.toml"), head + observe).ok());
    return load_lab_catalogue(dir.file("c.toml"));
  };
  Result<LabCatalogue> good = read("observe = [{ text = \"a\", check = [\"files summary.md == 1\"] }]\n");
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ(good->labs[0].observe[0].checks, std::vector<std::string>{"files summary.md == 1"});
  for (const char* bad : {"observe = [\"a\"]\n", "observe = [{ text = \"a\", check = [] }]\n",
                          "observe = [{ text = \"a\" }]\n", "observe = [{ text = \"a\", check = [1] }]\n"}) {
    Result<LabCatalogue> c = read(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().to_string().find("LSL-D"), std::string::npos) << c.status().to_string();
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::labs
