// The lab catalogue (cli/labs.h, docs/labs.md): 15 labs LSL-A … LSL-O in the order of chapter 4's
// sections; every available lab's run is a valid plan at its declared world size (Plan::make) and its
// fault can act on that run (proof::plan_protocol); unavailable labs say why and
// name a runnable lab. The validator itself is tested on broken variants, so it is not a rubber stamp.
// Independent of the catalogue: the expected keys and sections are written out here from the book.
#include "cli/labs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "core/file_io.h"
#include "evidence/faults.h"
#include "parallel/plan.h"
#include "proof/protocol.h"

namespace sp::cli {
namespace {

std::string root() {
  if (const char* r = std::getenv("SP_SOURCE_DIR"); r != nullptr && *r != '\0') return r;
  return SP_SOURCE_DIR;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Labs, FifteenKeysInSectionOrder) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"LSL-A", "4"},     {"LSL-B", "4.1"},   {"LSL-C", "4.2"},   {"LSL-D", "4.2.1"}, {"LSL-E", "4.2.2"},
      {"LSL-F", "4.2.3"}, {"LSL-G", "4.2.4"}, {"LSL-H", "4.3"},   {"LSL-I", "4.3.1"}, {"LSL-J", "4.3.2"},
      {"LSL-K", "4.3.3"}, {"LSL-L", "4.4"},   {"LSL-M", "4.4.1"}, {"LSL-N", "4.4.2"}, {"LSL-O", "4.5"}};
  const std::vector<Lab>& labs = lab_catalogue();
  ASSERT_EQ(labs.size(), expected.size());
  for (size_t i = 0; i < labs.size(); ++i) {
    EXPECT_EQ(labs[i].key, expected[i].first);
    EXPECT_EQ(labs[i].section, expected[i].second) << labs[i].key;
    EXPECT_FALSE(labs[i].title.empty()) << labs[i].key;
    EXPECT_FALSE(labs[i].mechanism.empty()) << labs[i].key;
  }
}

TEST(Labs, AvailableLabsAreCompleteAndSmall) {
  for (const Lab& lab : lab_catalogue()) {
    if (!lab.available) continue;
    SCOPED_TRACE(lab.key);
    EXPECT_FALSE(lab.fault.empty());
    EXPECT_FALSE(lab.observe.empty());
    EXPECT_FALSE(lab.cannot_extrapolate.empty());
    EXPECT_TRUE(lab.unavailable_reason.empty());
    EXPECT_GE(lab.world, 2);  // every lab has something to split
    EXPECT_LE(lab.world, 4);  // labs run on a laptop: at most 4 ranks
  }
  EXPECT_FALSE(lab_common_limits().empty());
  EXPECT_FALSE(lab_evaluation().empty());
}

// The test the catalogue exists for: each run is a valid plan at its world size, and its fault can act.
TEST(Labs, EveryAvailableLabValidatesAndItsFaultApplies) {
  int available = 0;
  for (const Lab& lab : lab_catalogue()) {
    if (!lab.available) continue;
    ++available;
    SCOPED_TRACE(lab.key);
    Result<parallel::RunConfig> config = lab_config(lab, root());
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    EXPECT_EQ(config->parallel.world(), lab.world) << "the declared ranks must equal dp·tp·pp of the sets";
    EXPECT_GE(config->train.steps, 6);
    EXPECT_LE(config->train.steps, 8);
    Result<parallel::Plan> plan = parallel::Plan::make(*config, lab.world);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    Result<evidence::FaultSpec> fault = evidence::parse_fault(lab.fault);
    ASSERT_TRUE(fault.ok()) << fault.status().to_string();
    EXPECT_TRUE(fault->any());
    // As prove plans stage 3: the fault's step, the checkpoint cadence, the rank that writes the shard.
    Result<proof::ProtocolPlan> protocol = proof::plan_protocol(*config, lab.fault);
    EXPECT_TRUE(protocol.ok()) << protocol.status().to_string();
    // validate_lab also checks the declared world size.
    Status valid = validate_lab(lab, root());
    EXPECT_TRUE(valid.ok()) << valid.to_string();
  }
  EXPECT_EQ(available, 13);
}

// 13 runnable labs and 13 catalogue faults: every fault is taught by exactly one lab.
TEST(Labs, EachCatalogueFaultIsTaughtOnce) {
  std::multiset<std::string> used;
  for (const Lab& lab : lab_catalogue())
    if (lab.available) {
      Result<evidence::FaultSpec> f = evidence::parse_fault(lab.fault);
      ASSERT_TRUE(f.ok()) << lab.key;
      used.insert(std::string(evidence::fault_info(f->kind).name));
    }
  for (const evidence::FaultInfo& info : evidence::fault_catalogue())
    EXPECT_EQ(used.count(std::string(info.name)), 1u) << info.name;
}

TEST(Labs, UnavailableLabsSayWhyAndPointToARunnableLab) {
  int unavailable = 0;
  for (const Lab& lab : lab_catalogue()) {
    if (lab.available) continue;
    ++unavailable;
    SCOPED_TRACE(lab.key);
    EXPECT_FALSE(lab.unavailable_reason.empty());
    EXPECT_TRUE(lab.fault.empty());
    EXPECT_TRUE(lab.sets.empty());
    ASSERT_FALSE(lab.closest.empty());
    for (const std::string& key : lab.closest) {
      Result<const Lab*> c = find_lab(key);
      ASSERT_TRUE(c.ok()) << key;
      EXPECT_TRUE((*c)->available) << key << " is named as runnable but is not";
    }
    Status s = validate_lab(lab, root());
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(contains(s.message(), lab.unavailable_reason));
    const std::string text = lab_unavailable_text(lab);
    EXPECT_TRUE(contains(text, "not available"));
    EXPECT_TRUE(contains(text, "lab run " + lab.closest.front()));
  }
  EXPECT_EQ(unavailable, 2);
  // The two sections this engine cannot show: cluster hardware and the parameter server.
  EXPECT_FALSE((*find_lab("LSL-I"))->available);
  EXPECT_FALSE((*find_lab("LSL-J"))->available);
  EXPECT_TRUE(contains((*find_lab("LSL-J"))->unavailable_reason, "no parameter-server mode"));
}

TEST(Labs, FindAcceptsKeyForms) {
  const Lab* d = *find_lab("LSL-D");
  EXPECT_EQ(d->section, "4.2.1");
  EXPECT_EQ(*find_lab("lsl-d"), d);
  EXPECT_EQ(*find_lab("d"), d);
  EXPECT_EQ(*find_lab("D"), d);
}

TEST(Labs, UnknownKeyListsEveryKey) {
  for (const char* bad : {"LSL-Z", "", "4.2.1", "LSL-"}) {
    Result<const Lab*> r = find_lab(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_TRUE(contains(r.status().message(), std::string("'") + bad + "'"));
    for (const Lab& lab : lab_catalogue()) EXPECT_TRUE(contains(r.status().hint(), lab.key)) << lab.key;
  }
}

// The validator must refuse broken variants, or the catalogue test above could not fail.
TEST(Labs, ValidatorRefusesBrokenVariants) {
  const Lab d = **find_lab("LSL-D");  // dp 2, skip-grad-allreduce
  auto refused = [&](Lab lab, const std::vector<std::string>& extra, const std::string& needle) {
    Status s = validate_lab(lab, root(), extra);
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_TRUE(contains(s.message(), needle)) << s.to_string();
  };
  Lab wrong_world = d;
  wrong_world.world = 4;
  refused(wrong_world, {}, "world size 4");
  Lab bad_split = d;
  bad_split.sets.push_back("parallel.dp=3");
  bad_split.world = 3;
  refused(bad_split, {}, "not divisible");
  Lab bad_key = d;
  bad_key.sets.push_back("train.stepz=6");
  refused(bad_key, {}, "stepz");
  Lab tp_fault = d;
  tp_fault.fault = "drop-tp-allreduce@2";
  refused(tp_fault, {}, "tp = 1");
  Lab late_fault = d;
  late_fault.fault = "skip-grad-allreduce@6";
  refused(late_fault, {}, "train.steps = 6");
  Lab no_such_fault = d;
  no_such_fault.fault = "cosmic-ray@2";
  refused(no_such_fault, {}, "unknown fault 'cosmic-ray'");
  // A checkpoint fault needs a checkpoint after its step …
  Lab no_ckpt = d;
  no_ckpt.fault = "ckpt-bitflip@3:0";
  refused(no_ckpt, {}, "saves none");
  // … at prove's cadence: k = steps / 2 = 3, so checkpoints follow steps 2 and 5 (or no @step: prove picks k − 1).
  Lab ckpt_ok = d;
  ckpt_ok.fault = "ckpt-bitflip@2:0";
  EXPECT_TRUE(validate_lab(ckpt_ok, root()).ok()) << validate_lab(ckpt_ok, root()).to_string();
  ckpt_ok.fault = "ckpt-truncate:0";
  EXPECT_TRUE(validate_lab(ckpt_ok, root()).ok()) << validate_lab(ckpt_ok, root()).to_string();
  // … and a rank that writes a shard: without ZeRO only dp rank 0 does.
  Lab replica_ckpt = **find_lab("LSL-O");
  replica_ckpt.fault = "ckpt-bitflip@3:1";
  refused(replica_ckpt, {}, "writes none");
  // A learner's variation that breaks the fault's precondition is refused too (dp 1 cannot skip dp sync).
  refused(d, {"parallel.dp=1"}, "dp = 1");
  // … while a compatible variation is accepted at its own world size.
  EXPECT_TRUE(validate_lab(d, root(), {"parallel.dp=4"}).ok());
}

TEST(Labs, ProveOptionsCarryTheLab) {
  const Lab& g = **find_lab("LSL-G");
  ProveOptions p = lab_prove_options(
      g, LabRunOptions{
             .out = "runs/g", .root = "/r", .cache = "/c", .extra_sets = {"train.recompute=none"}, .quiet = true});
  EXPECT_EQ(p.preset, "tiny");
  EXPECT_TRUE(p.config.empty());
  EXPECT_EQ(p.fault, g.fault);
  EXPECT_EQ(p.out, "runs/g");
  EXPECT_EQ(p.root, "/r");
  EXPECT_EQ(p.cache, "/c");
  EXPECT_TRUE(p.quiet);
  ASSERT_EQ(p.sets.size(), g.sets.size() + 1);
  EXPECT_EQ(p.sets.back(), "train.recompute=none");  // last wins over the lab's train.recompute=full
  EXPECT_TRUE(contains(p.title, "LSL-G"));
  EXPECT_TRUE(contains(p.title, "4.2.4"));
}

TEST(Labs, ListAndShowRenderEverything) {
  const std::string list = lab_list_text();
  for (const Lab& lab : lab_catalogue()) {
    EXPECT_TRUE(contains(list, lab.key));
    EXPECT_TRUE(contains(list, lab.available ? lab.fault : "(unavailable)")) << lab.key;
  }
  const std::string show = lab_show_text(**find_lab("LSL-K"));
  EXPECT_TRUE(contains(show, "§4.3.3"));
  EXPECT_TRUE(contains(show, "desync-extra-collective@2:2"));
  EXPECT_TRUE(contains(show, "trace consistency"));  // the fault's expected detector, from the catalogue
  EXPECT_TRUE(contains(show, "what to observe"));
  EXPECT_TRUE(contains(show, "cannot be extrapolated"));
  EXPECT_TRUE(contains(show, "shardproof lab run LSL-K --out runs/lsl-k"));
  EXPECT_TRUE(contains(show, "--set parallel.dp=4"));
  EXPECT_TRUE(contains(show, "NVLink"));  // a common limit
  const std::string j = lab_show_text(**find_lab("LSL-J"));
  EXPECT_TRUE(contains(j, "not available"));
  EXPECT_TRUE(contains(j, "LSL-K"));
}

// docs/labs.md is the learner's copy of the catalogue: a section per lab naming its fault and command.
TEST(Labs, DocsHaveASectionPerLab) {
  Result<std::string> doc = read_file(root() + "/docs/labs.md", uint64_t{1} << 20);
  ASSERT_TRUE(doc.ok()) << doc.status().to_string();
  for (const Lab& lab : lab_catalogue()) {
    SCOPED_TRACE(lab.key);
    const size_t at = doc->find("\n## " + lab.key + " — §" + lab.section + " ");
    ASSERT_NE(at, std::string::npos);
    const size_t next = doc->find("\n## ", at + 1);
    const std::string section = doc->substr(at, next == std::string::npos ? std::string::npos : next - at);
    EXPECT_TRUE(contains(section, "lab run " + lab.key));
    if (lab.available)
      EXPECT_TRUE(contains(section, "`" + lab.fault + "`"));
    else
      EXPECT_TRUE(contains(section, "not available"));
  }
}

}  // namespace
}  // namespace sp::cli
