// The lab catalogue (configs/labs/catalogue.toml read by labs/catalogue.h; labs/show.h; docs/labs.md):
// 16 labs LSL-A … LSL-P in the order of chapter 4's sections; every available proof lab's run is a valid
// plan at its declared world size (RunPlan::make) and its fault can act on that run (plan::plan_protocol);
// every plan lab's cases evaluate with the planner, its fault placement flagged and its sound ones not;
// a judge lab's script exists and its planted bug is one of the script's; unavailable labs say why and name a
// runnable lab. The validator and the file reader are tested on
// broken variants (of a lab, of the file), so neither is a rubber stamp.
// Independent of the catalogue: the expected keys and sections are written out here from the book.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "cli/command.h"
#include "cli/prove.h"
#include "cli_run.h"
#include "core/file_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/faults.h"
#include "labs/judge_lab.h"
#include "labs/lab_run.h"
#include "labs/plan_lab.h"
#include "labs/show.h"
#include "plan/protocol.h"
#include "plan/run_plan.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::labs {
namespace {
namespace SP_TEST_ID {

std::string root() { return sp::test::source_dir(); }

// The source tree's catalogue, read once; a file that does not read fails every test that uses it.
const LabCatalogue& catalogue() {
  static const LabCatalogue c = [] {
    Result<LabCatalogue> r = load_lab_catalogue(lab_catalogue_path(root()));
    if (!r.ok()) {
      ADD_FAILURE() << r.status().to_string();
      return LabCatalogue{};
    }
    return *std::move(r);
  }();
  return c;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Labs, TheCatalogueFileReads) {
  Result<LabCatalogue> c = load_lab_catalogue(lab_catalogue_path(root()));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->path, root() + "/configs/labs/catalogue.toml");
}

TEST(Labs, KeysInSectionOrder) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"LSL-A", "4"},     {"LSL-B", "4.1"},   {"LSL-C", "4.2"},   {"LSL-D", "4.2.1"},
      {"LSL-E", "4.2.2"}, {"LSL-F", "4.2.3"}, {"LSL-G", "4.2.4"}, {"LSL-H", "4.3"},
      {"LSL-I", "4.3.1"}, {"LSL-J", "4.3.2"}, {"LSL-K", "4.3.3"}, {"LSL-L", "4.4"},
      {"LSL-M", "4.4.1"}, {"LSL-N", "4.4.2"}, {"LSL-P", "4.4.2"}, {"LSL-O", "4.5"}};
  const std::vector<Lab>& labs = catalogue().labs;
  ASSERT_EQ(labs.size(), expected.size());
  for (size_t i = 0; i < labs.size(); ++i) {
    EXPECT_EQ(labs[i].key, expected[i].first);
    EXPECT_EQ(labs[i].section, expected[i].second) << labs[i].key;
    EXPECT_FALSE(labs[i].title.empty()) << labs[i].key;
    EXPECT_FALSE(labs[i].mechanism.empty()) << labs[i].key;
  }
}

TEST(Labs, AvailableLabsAreCompleteAndSmall) {
  for (const Lab& lab : catalogue().labs) {
    if (!lab.available) continue;
    SCOPED_TRACE(lab.key);
    EXPECT_FALSE(lab.observe.empty());
    EXPECT_FALSE(lab.cannot_extrapolate.empty());
    if (lab.is_plan()) continue;  // no ranks run: PlanLabsEvaluateEveryCase
    EXPECT_FALSE(lab.fault.empty());
    EXPECT_FALSE(lab.cannot_extrapolate.empty());
    EXPECT_TRUE(lab.unavailable_reason.empty());
    EXPECT_GE(lab.world, 2);  // every lab has something to split
    EXPECT_LE(lab.world, 4);  // labs run on a laptop: at most 4 ranks
  }
  EXPECT_FALSE(catalogue().common_limits.empty());
  EXPECT_FALSE(catalogue().evaluation.empty());
}

// The test the catalogue exists for: each run is a valid plan at its world size, and its fault can act.
TEST(Labs, EveryAvailableLabValidatesAndItsFaultApplies) {
  int available = 0;
  for (const Lab& lab : catalogue().labs) {
    if (!lab.available || lab.is_plan() || lab.is_judge()) continue;
    ++available;
    SCOPED_TRACE(lab.key);
    Result<config::RunConfig> config = lab_config(lab, root());
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    EXPECT_EQ(config->parallel.world(), lab.world) << "the declared ranks must equal dp·tp·pp of the sets";
    EXPECT_GE(config->train.steps, 6);
    EXPECT_LE(config->train.steps, 8);
    Result<plan::RunPlan> plan = plan::RunPlan::make(*config, lab.world);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    Result<evidence::FaultSpec> fault = evidence::parse_fault(lab.fault);
    ASSERT_TRUE(fault.ok()) << fault.status().to_string();
    EXPECT_TRUE(fault->any());
    // As prove plans stage 3: the fault's step, the checkpoint cadence, the rank that writes the shard.
    Result<plan::ProtocolPlan> protocol = plan::plan_protocol(*config, lab.fault);
    EXPECT_TRUE(protocol.ok()) << protocol.status().to_string();
    // validate_lab also checks the declared world size.
    Status valid = validate_lab(lab, root());
    EXPECT_TRUE(valid.ok()) << valid.to_string();
  }
  EXPECT_EQ(available, 14);
}

// A plan lab's invariant: every (cluster, placement) case is evaluated by the planner and fits; the fault
// placement is the one the topology check flags, and only it; it is the slower one on each cluster.
TEST(Labs, PlanLabsEvaluateEveryCase) {
  int plan_labs = 0;
  for (const Lab& lab : catalogue().labs) {
    if (!lab.available || !lab.is_plan()) continue;
    ++plan_labs;
    SCOPED_TRACE(lab.key);
    EXPECT_TRUE(validate_lab(lab, root()).ok()) << validate_lab(lab, root()).to_string();
    const std::vector<PlanLabCase> cases = plan_lab_cases(lab.plan);
    ASSERT_EQ(cases.size(), lab.plan.clusters.size() * lab.plan.placements.size());
    std::map<std::string, double> sound_step;  // cluster → slowest sound placement's step
    std::map<std::string, double> fault_step;
    for (const PlanLabCase& c : cases) {
      SCOPED_TRACE(c.dir());
      Result<planner::PlanQuery> q = plan_lab_query(lab, c, root());
      ASSERT_TRUE(q.ok()) << q.status().to_string();
      EXPECT_EQ(q->config.parallel.world(), lab.world);
      EXPECT_EQ(q->config.parallel.axis_order, c.placement);
      Result<planner::PlanEvaluation> e = planner::evaluate_plan(*q);
      ASSERT_TRUE(e.ok()) << e.status().to_string();
      EXPECT_TRUE(e->fits());
      const bool fault = c.placement == lab.plan.fault_placement;
      EXPECT_EQ(e->placement_warnings.empty(), !fault);
      double& step = fault ? fault_step[c.cluster] : sound_step[c.cluster];
      step = std::max(step, e->step_seconds);
    }
    for (const auto& [cluster, s] : sound_step) EXPECT_GT(fault_step[cluster], s) << cluster;
  }
  EXPECT_EQ(plan_labs, 1);
}

// The plan lab validator refuses what the planner cannot evaluate, naming the lab.
TEST(Labs, PlanLabValidatorRefusesBrokenVariants) {
  const Lab i = **catalogue().find("LSL-I");
  auto refused = [&](const Lab& lab, const std::string& needle) {
    Status s = validate_lab(lab, root());
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.exit_code(), 2) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "lab LSL-I")) << s.to_string();
    EXPECT_TRUE(contains(s.message(), needle)) << s.to_string();
  };
  Lab no_cluster = i;
  no_cluster.plan.clusters.back() = "dgx-b200";
  refused(no_cluster, "'clusters' names 'dgx-b200', which is not a cluster preset");
  Lab wrong_nodes = i;  // 32 ranks on 2 nodes of 8 devices
  wrong_nodes.plan.nodes = 2;
  refused(wrong_nodes, "impossible placement");
  Lab no_divide = i;
  no_divide.plan.global_batch = 6;  // not a multiple of dp 4
  refused(no_divide, "global_batch");
  EXPECT_FALSE(validate_lab(i, root(), {"parallel.dp=2"}).ok());  // --set is a proof lab's
}

// Every lab teaches a different fault (14 runnable labs; the catalogue has more faults than labs, and the
// faults no lab teaches are exercised by tests/faults and tests/tp).
TEST(Labs, EachCatalogueFaultIsTaughtAtMostOnce) {
  std::multiset<std::string> used;
  for (const Lab& lab : catalogue().labs)
    if (lab.available && !lab.is_plan() && !lab.is_judge()) {
      Result<evidence::FaultSpec> f = evidence::parse_fault(lab.fault);
      ASSERT_TRUE(f.ok()) << lab.key;
      used.insert(std::string(evidence::fault_info(f->kind).name));
    }
  for (const evidence::FaultInfo& info : evidence::fault_catalogue())
    EXPECT_LE(used.count(std::string(info.name)), 1u) << info.name;
  EXPECT_EQ(used.size(), 14u);
}

// A judge lab (kind "judge"): its script exists, its planted bug is one the script offers (its BUGS table),
// its world is the script's --world; --set is refused; `lab show` prints the two recordings and the judge.
TEST(Labs, JudgeLabRecordsTheExampleScript) {
  const Lab& p = **catalogue().find("LSL-P");
  ASSERT_TRUE(p.is_judge());
  EXPECT_TRUE(validate_lab(p, root()).ok()) << validate_lab(p, root()).to_string();
  Result<std::string> script = read_file(root() + "/" + p.script);
  ASSERT_TRUE(script.ok()) << script.status().to_string();
  EXPECT_TRUE(contains(*script, "\"" + p.fault + "\": (")) << p.fault << " is no bug of " << p.script;
  EXPECT_FALSE(validate_lab(p, root(), {"parallel.dp=2"}).ok());
  Lab missing = p;
  missing.script = "examples/torch/no_such_script.py";
  EXPECT_TRUE(contains(validate_lab(missing, root()).message(), "no_such_script.py"));
  const std::vector<std::string> fault = judge_lab_command("/usr/bin/python3", p, root(), "D/fault", p.fault);
  EXPECT_EQ(fault[1], root() + "/examples/torch/train_llama.py");
  EXPECT_TRUE(
      contains(fmt::format("{}", fmt::join(fault, " ")), "--world 2 --out D/fault --quiet --bug tp-norm-unreduced"));
  const std::string show = lab_show_text(catalogue(), p, "python3");
  EXPECT_TRUE(contains(show, "shardproof lab run LSL-P --out runs/lsl-p"));
  EXPECT_TRUE(contains(show, "examples/torch/train_llama.py --strategy tp --steps 3 --world 2 --out DIR/run --quiet"));
  EXPECT_TRUE(contains(show, "--out DIR/fault --quiet --bug tp-norm-unreduced"));
  EXPECT_TRUE(contains(show, "shardproof judge DIR/fault"));
  EXPECT_TRUE(contains(show, "python3-torch"));
  EXPECT_TRUE(contains(lab_list_text(catalogue()), "judge: tp-norm-unreduced"));
}

// No section is unavailable today; the mechanism stays for one that is: a lab with a reason and the closest
// runnable labs is refused by validate_lab and explained by lab_unavailable_text (the CLI: LabCli below).
TEST(Labs, UnavailableLabsSayWhyAndPointToARunnableLab) {
  for (const Lab& lab : catalogue().labs) EXPECT_TRUE(lab.available) << lab.key;
  Lab lab = **catalogue().find("LSL-I");
  lab.available = false;
  lab.unavailable_reason = "no accelerator backend here";
  lab.closest = {"LSL-H", "LSL-K"};
  Status s = validate_lab(lab, root());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(s.message(), lab.unavailable_reason));
  const std::string text = lab_unavailable_text(catalogue(), lab);
  EXPECT_TRUE(contains(text, "not available"));
  EXPECT_TRUE(contains(text, "lab run LSL-H"));
  EXPECT_TRUE(contains(lab_show_text(catalogue(), lab, "python3"), "not available"));
  // The section this engine cannot run on, cluster hardware, is a plan lab; the parameter server (LSL-J) runs.
  EXPECT_TRUE((*catalogue().find("LSL-I"))->is_plan());
  EXPECT_TRUE((*catalogue().find("LSL-J"))->available);
}

TEST(Labs, FindAcceptsKeyForms) {
  const Lab* d = *catalogue().find("LSL-D");
  EXPECT_EQ(d->section, "4.2.1");
  EXPECT_EQ(*catalogue().find("lsl-d"), d);
  EXPECT_EQ(*catalogue().find("d"), d);
  EXPECT_EQ(*catalogue().find("D"), d);
}

TEST(Labs, UnknownKeyListsEveryKey) {
  for (const char* bad : {"LSL-Z", "", "4.2.1", "LSL-"}) {
    Result<const Lab*> r = catalogue().find(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_TRUE(contains(r.status().message(), std::string("'") + bad + "'"));
    for (const Lab& lab : catalogue().labs) EXPECT_TRUE(contains(r.status().hint(), lab.key)) << lab.key;
  }
}

// The validator must refuse broken variants, or the catalogue test above could not fail.
TEST(Labs, ValidatorRefusesBrokenVariants) {
  const Lab d = **catalogue().find("LSL-D");  // dp 2, skip-grad-allreduce
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
  Lab replica_ckpt = **catalogue().find("LSL-O");
  replica_ckpt.fault = "ckpt-bitflip@3:1";
  refused(replica_ckpt, {}, "writes none");
  // A learner's variation that breaks the fault's precondition is refused too (dp 1 cannot skip dp sync).
  refused(d, {"parallel.dp=1"}, "dp = 1");
  // … while a compatible variation is accepted at its own world size.
  EXPECT_TRUE(validate_lab(d, root(), {"parallel.dp=4"}).ok());
}

// A variation is a valid run too: its sets on the lab's, at its world, with the lab's (or its own) fault; it
// carries claims of its own, found by name or by its exact sets, and its bundle names it.
TEST(Labs, EveryVariationValidatesAndCarriesItsOwnClaims) {
  int variations = 0;
  for (const Lab& lab : catalogue().labs)
    for (const Variation& v : lab.variations) {
      ++variations;
      SCOPED_TRACE(lab.key + " variation " + v.name);
      const Lab varied = lab_variation(lab, v);
      Status valid = validate_lab(varied, root());
      EXPECT_TRUE(valid.ok()) << valid.to_string();
      EXPECT_EQ(varied.observe.size(), v.observe.size());
      EXPECT_EQ(varied.sets.size(), lab.sets.size() + v.sets.size());
      ASSERT_TRUE(lab.find_variation(v.name).ok());
      std::vector<std::string> reversed(v.sets.rbegin(), v.sets.rend());
      EXPECT_EQ(lab.variation_of_sets(reversed), &v);
      const nlohmann::json j = lab_bundle_json(varied);
      EXPECT_EQ(j["variation"]["name"], v.name);
      EXPECT_TRUE(contains(j["check"].get<std::string>(), "--variation " + v.name));
      EXPECT_TRUE(contains(lab_show_text(catalogue(), lab, "python3"), "--variation " + v.name));
    }
  EXPECT_GE(variations, 4);
  const Lab& d = **catalogue().find("LSL-D");
  EXPECT_FALSE(d.find_variation("nope").ok());
  EXPECT_EQ(d.variation_of_sets({"parallel.dp=4"}), nullptr);
}

// Every file a claim of the catalogue reads (count/sum/max/distinct/files/text/value GLOB, differ A B) is named by
// a name of evidence/bundle_paths.h, in every lab and variation.
TEST(Labs, ClaimsNameFilesByTheBundlesNames) {
  int files = 0;
  const auto check_claims = [&](const std::string& at, const std::vector<Observation>& observe) {
    for (const Observation& o : observe)
      for (const std::string& claim : o.checks) {
        std::istringstream in(claim);
        std::vector<std::string> w;
        for (std::string s; in >> s;) w.push_back(s);
        // The quantity is the claim's first word (labs/claims.h); what follows the comparator is free text
        // ("has a partial sum never reduced"), never a file.
        const std::string& q = w.empty() ? claim : w[0];
        const bool one =
            q == "count" || q == "sum" || q == "max" || q == "distinct" || q == "files" || q == "text" || q == "value";
        for (size_t k = 1; k <= (q == "differ" ? 2u : one ? 1u : 0u) && k < w.size(); ++k, ++files) {
          const std::string file = w[k].substr(0, w[k].find('#'));
          EXPECT_TRUE(evidence::check_bundle_name(file).ok()) << at << ": " << claim;
        }
      }
  };
  for (const Lab& lab : catalogue().labs) {
    check_claims(lab.key, lab.observe);
    for (const Variation& v : lab.variations) check_claims(lab.key + " variation " + v.name, v.observe);
  }
  EXPECT_GE(files, 250);
}

TEST(Labs, ProveOptionsCarryTheLab) {
  const Lab& g = **catalogue().find("LSL-G");
  cli::ProveOptions p = cli::lab_prove_options(
      g, cli::LabRunOptions{
             .out = "runs/g", .root = "/r", .cache = "/c", .extra_sets = {"train.recompute=none"}, .quiet = true});
  EXPECT_EQ(p.source.preset, "tiny");
  EXPECT_TRUE(p.source.config.empty());
  EXPECT_EQ(p.fault, g.fault);
  EXPECT_EQ(p.out, "runs/g");
  EXPECT_EQ(p.source.root, "/r");
  EXPECT_EQ(p.cache, "/c");
  EXPECT_TRUE(p.quiet);
  ASSERT_EQ(p.source.sets.size(), g.sets.size() + 1);
  EXPECT_EQ(p.source.sets.back(), "train.recompute=none");  // last wins over the lab's train.recompute=full
  EXPECT_TRUE(contains(p.title, "LSL-G"));
  EXPECT_TRUE(contains(p.title, "4.2.4"));
}

TEST(Labs, ListAndShowRenderEverything) {
  const std::string list = lab_list_text(catalogue());
  for (const Lab& lab : catalogue().labs) {
    EXPECT_TRUE(contains(list, lab.key));
    EXPECT_TRUE(contains(list, lab.is_plan() ? "plan: flag " + lab.plan.fault_placement : lab.fault)) << lab.key;
  }
  const std::string show = lab_show_text(catalogue(), **catalogue().find("LSL-K"), "python3");
  EXPECT_TRUE(contains(show, "§4.3.3"));
  EXPECT_TRUE(contains(show, "desync-extra-collective@2:2"));
  EXPECT_TRUE(contains(show, "trace consistency"));  // the fault's expected detector, from the catalogue
  EXPECT_TRUE(contains(show, "what to observe"));
  EXPECT_TRUE(contains(show, "cannot be extrapolated"));
  EXPECT_TRUE(contains(show, "shardproof lab run LSL-K --out runs/lsl-k"));
  EXPECT_TRUE(contains(show, "--set parallel.dp=4"));
  EXPECT_TRUE(contains(show, "NVLink"));  // a common limit
  const std::string i = lab_show_text(catalogue(), **catalogue().find("LSL-I"), "python3");
  EXPECT_FALSE(contains(i, "not available"));
  EXPECT_TRUE(contains(i, "shardproof lab run LSL-I --out runs/lsl-i"));
  EXPECT_TRUE(contains(i, "llama-7b"));
  EXPECT_TRUE(contains(i, "fault placement: dp-tp-pp"));
  // One plan command per case, as a learner types it.
  EXPECT_TRUE(contains(i,
                       "shardproof plan --cluster dgx-h100 --nodes 4 --model llama-7b --global-batch 256 --dp 4 "
                       "--tp 4 --pp 2 --zero 1 --axis-order dp-tp-pp --out DIR/dgx-h100-dp-tp-pp"))
      << i;
  EXPECT_TRUE(contains(i, "lab verify"));
  EXPECT_FALSE(contains(i, "NVLink, PCIe, InfiniBand or RoCE"));  // the proof labs' common limits are not its own
  const std::string j = lab_show_text(catalogue(), **catalogue().find("LSL-J"), "python3");
  EXPECT_TRUE(contains(j, "ps-drop-push@2:2"));
  EXPECT_TRUE(contains(j, "trace vs predicted communication"));  // the fault's expected detector
  EXPECT_TRUE(contains(j, "--set parallel.architecture=ps"));
}

// docs/labs.md is the learner's copy of the catalogue: a section per lab naming its fault and command.
TEST(Labs, DocsHaveASectionPerLab) {
  Result<std::string> doc = read_file(root() + "/docs/labs.md", uint64_t{1} << 20);
  ASSERT_TRUE(doc.ok()) << doc.status().to_string();
  for (const Lab& lab : catalogue().labs) {
    SCOPED_TRACE(lab.key);
    const size_t at = doc->find("\n## " + lab.key + " — §" + lab.section + " ");
    ASSERT_NE(at, std::string::npos);
    const size_t next = doc->find("\n## ", at + 1);
    const std::string section = doc->substr(at, next == std::string::npos ? std::string::npos : next - at);
    EXPECT_TRUE(contains(section, "lab run " + lab.key));
    if (lab.is_plan())
      EXPECT_TRUE(contains(section, "`" + lab.plan.fault_placement + "`"));
    else if (lab.available)
      EXPECT_TRUE(contains(section, "`" + lab.fault + "`"));
    else
      EXPECT_TRUE(contains(section, "not available"));
  }
}

// ------------------------------------------------------------------ the catalogue file's reader

std::string catalogue_text() { return read_file(lab_catalogue_path(root()), uint64_t{1} << 20).value(); }

// `text` with the first `from` inside lab `key`'s [[lab]] table replaced by `to` (the lab must hold it).
std::string edit_lab(std::string text, const std::string& key, const std::string& from, const std::string& to) {
  const size_t begin = text.find("key = \"" + key + "\"");
  const size_t end = std::min(text.find("[[lab]]", begin), text.size());
  const size_t at = text.find(from, begin);
  if (begin == std::string::npos || at == std::string::npos || at >= end) {
    ADD_FAILURE() << "lab " << key << " has no '" << from << "'";
    return text;
  }
  return text.replace(at, from.size(), to);
}

// `text` with LSL-I's run (everything from its `kind`) replaced by an unavailable lab's fields.
std::string unavailable_i(const std::string& text) {
  const size_t begin = text.find("key = \"LSL-I\"");
  const size_t from = text.find("kind = \"plan\"", begin);
  const size_t end = text.find("[[lab]]", from);
  if (begin == std::string::npos || from == std::string::npos || end == std::string::npos) {
    ADD_FAILURE() << "LSL-I is not a plan lab in the catalogue";
    return text;
  }
  return std::string(text).replace(
      from, end - from,
      "available = false\nunavailable_reason = \"no accelerator backend\"\nclosest = [\"LSL-H\", \"LSL-K\"]\n\n");
}

// 1-based line of the first `needle` in `text`.
size_t line_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  return at == std::string::npos ? 0 : 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
}

// Writes `text` as a catalogue file and requires the reader to refuse it with every fragment in the message.
void expect_refused(const std::string& text, const std::vector<std::string>& fragments) {
  const sp::test::TempDir dir;
  const std::string path = dir.file("catalogue.toml");
  ASSERT_TRUE(write_file(path, text).ok());
  Result<LabCatalogue> c = load_lab_catalogue(path);
  ASSERT_FALSE(c.ok()) << "accepted a broken catalogue; expected " << fragments.front();
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().to_string();
  EXPECT_TRUE(contains(c.status().message(), path)) << c.status().message();  // names the file
  EXPECT_FALSE(c.status().hint().empty()) << c.status().message();
  for (const std::string& f : fragments) EXPECT_TRUE(contains(c.status().message(), f)) << c.status().message();
}

TEST(LabCatalogueFile, TheSameTextReadsAgainFromAnotherPath) {
  const sp::test::TempDir dir;
  ASSERT_TRUE(write_file(dir.file("catalogue.toml"), catalogue_text()).ok());
  Result<LabCatalogue> c = load_lab_catalogue(dir.file("catalogue.toml"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->labs.size(), catalogue().labs.size());
  EXPECT_EQ(c->labs.back().cannot_extrapolate, catalogue().labs.back().cannot_extrapolate);
}

// Every kind of damage is refused naming the file, the line, the lab and the field.
TEST(LabCatalogueFile, RefusesBrokenFiles) {
  const std::string good = catalogue_text();
  // A value of the wrong type, at its own line and column.
  std::string t = edit_lab(good, "LSL-D", "world = 2", "world = \"2\"");
  expect_refused(t, {fmt::format(":{}: lab LSL-D.world = \"2\" must be an integer", line_of(t, "world = \"2\""))});
  expect_refused(edit_lab(good, "LSL-D", "sets = [\"parallel.dp=2\"", "sets = [2"),
                 {"lab LSL-D.sets must be an array of strings; element 1 is 2"});
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "world = 2\navailable = \"no\""),
                 {"lab LSL-D.available = \"no\" must be true or false"});
  // Unknown keys, in a lab and at the top level.
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "world = 2\nranks = 2"), {"unknown key lab LSL-D.ranks"});
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "worlds = 2"),
                 {"lab LSL-D.world: missing field", "unknown key lab LSL-D.worlds"});
  expect_refused(std::string(good).replace(good.find("version = 1"), 11, "version = 1\ncolour = 1"),
                 {"unknown key colour"});
  // Missing required fields.
  expect_refused(edit_lab(good, "LSL-D", "title = ", "titel = "), {"lab LSL-D.title: missing field"});
  expect_refused(edit_lab(good, "LSL-D", "fault = ", "fault_ = "), {"lab LSL-D.fault: missing field"});
  // A key given twice (TOML itself), a lab key used twice.
  t = edit_lab(good, "LSL-D", "world = 2", "world = 2\nworld = 2");
  expect_refused(t, {fmt::format(":{}:", line_of(t, "world = 2\nworld = 2") + 1)});
  t = edit_lab(good, "LSL-E", "key = \"LSL-E\"", "key = \"LSL-D\"");
  expect_refused(t, {"lab LSL-D is defined twice", fmt::format("first at line {}", line_of(t, "key = \"LSL-D\"") - 1)});
  expect_refused(edit_lab(good, "LSL-D", "key = \"LSL-D\"", "key = \"lsl-d\""), {"'key' must be LSL-"});
  // An unavailable lab without a reason, or with a run; an available one with a reason.
  const std::string unavailable = unavailable_i(good);
  {
    Result<LabCatalogue> c = [&] {
      const sp::test::TempDir dir;
      EXPECT_TRUE(write_file(dir.file("catalogue.toml"), unavailable).ok());
      return load_lab_catalogue(dir.file("catalogue.toml"));
    }();
    ASSERT_TRUE(c.ok()) << c.status().to_string();  // the unavailable variant itself reads
    EXPECT_FALSE((*c->find("LSL-I"))->available);
  }
  expect_refused(edit_lab(unavailable, "LSL-I", "unavailable_reason = ", "reason = "),
                 {"lab LSL-I.unavailable_reason: missing field"});
  expect_refused(edit_lab(unavailable, "LSL-I", "available = false", "available = false\nfault = \"stale-grad@2\""),
                 {"lab LSL-I", "'fault' does not belong to an unavailable lab"});
  expect_refused(edit_lab(unavailable, "LSL-I", "available = false", "available = false\nclusters = [\"dgx-a100\"]"),
                 {"lab LSL-I", "'clusters' does not belong to an unavailable lab"});
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "world = 2\nunavailable_reason = \"x\""),
                 {"lab LSL-D", "'unavailable_reason' does not belong to an available lab"});
  // A pointer to no runnable lab; empty texts; an implausible rank count.
  expect_refused(edit_lab(unavailable, "LSL-I", "closest = [\"LSL-H\", \"LSL-K\"]", "closest = [\"LSL-Z\"]"),
                 {"lab LSL-I", "'closest' names 'LSL-Z'"});
  expect_refused(edit_lab(unavailable, "LSL-I", "closest = [\"LSL-H\", \"LSL-K\"]", "closest = [\"LSL-I\"]"),
                 {"lab LSL-I", "'closest' names 'LSL-I'"});
  expect_refused(edit_lab(good, "LSL-D", "title = \"Data parallelism\"", "title = \"\""),
                 {"lab LSL-D", "'title' is empty"});
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "world = 0"), {"lab LSL-D", "'world' is 0"});
  // Variations: a bad name, a name used twice, no sets, an implausible world, an unknown key.
  const std::string v = "{ name = \"x\", sets = [\"parallel.zero=1\"], observe = [{ text = \"t\", check = [\"c\"] }] }";
  const auto with_variations = [&](const std::string& list) {
    return edit_lab(good, "LSL-B", "world = 2", "world = 2\nvariations = [" + list + "]");
  };
  {
    const sp::test::TempDir dir;
    ASSERT_TRUE(write_file(dir.file("catalogue.toml"), with_variations(v)).ok());
    Result<LabCatalogue> c = load_lab_catalogue(dir.file("catalogue.toml"));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ((*c->find("LSL-B"))->variations.at(0).sets, std::vector<std::string>{"parallel.zero=1"});
  }
  expect_refused(with_variations(std::string(v).replace(v.find("\"x\""), 3, "\"X y\"")),
                 {"lab LSL-B.variations[1]", "'name' must be lowercase"});
  expect_refused(with_variations(v + ", " + v), {"variation 'x' is defined twice"});
  expect_refused(with_variations(std::string(v).replace(v.find("[\"parallel"), 19, "[]")),
                 {"lab LSL-B.variations[1] needs at least one --set"});
  expect_refused(with_variations(std::string(v).replace(v.find("sets"), 4, "world = 0, sets")), {"'world' is 0"});
  expect_refused(with_variations(std::string(v).replace(v.find("name"), 4, "colour = 1, name")),
                 {"unknown key lab LSL-B.variations[1].colour"});
  // A claim written twice: in one observation, across a variation's observations.
  expect_refused(with_variations(std::string(v).replace(v.find("[\"c\"]"), 5, "[\"c\", \"c\"]")),
                 {"lab LSL-B.variations[1].observe[1]: the claim 'c' is written twice"});
  expect_refused(with_variations(std::string(v).replace(v.find("] }"), 3, "] }, { text = \"u\", check = [\"c\"] }")),
                 {"lab LSL-B.variations[1].observe[2]: the claim 'c' is written twice"});
  // Not this format, not this version, not TOML.
  expect_refused(std::string(good).replace(good.find("version = 1"), 11, "version = 2"),
                 {"'version' is 2; this build reads version 1"});
  expect_refused(std::string(good).replace(good.find("shardproof-labs"), 15, "shardproof-lab"),
                 {"'format' is 'shardproof-lab'"});
  expect_refused("format = \"shardproof-labs\"\nversion = 1\n[[lab]\n", {":3:"});
  expect_refused("format = \"shardproof-labs\"\nversion = 1\nevaluation = \"e\"\ncommon_limits = [\"c\"]\n",
                 {"missing array of tables [[lab]]"});
}

// A plan lab's fields: each kind of damage is refused naming the lab and the field.
TEST(LabCatalogueFile, RefusesBrokenPlanLabs) {
  const std::string good = catalogue_text();
  const auto i = [&](const std::string& from, const std::string& to) { return edit_lab(good, "LSL-I", from, to); };
  expect_refused(i("kind = \"plan\"", "kind = \"plans\""), {"lab LSL-I", "'kind' is 'plans'"});
  expect_refused(i("nodes = 4", "nodes = 4\nnode = 4"), {"unknown key lab LSL-I.node"});
  expect_refused(i("placements = ", "placement = "), {"lab LSL-I.placements: missing field"});
  expect_refused(i("model = \"llama-7b\"", "model = \"llama-8b\""), {"lab LSL-I", "'model' names no model shape"});
  expect_refused(i("strategy = \"dp4-tp4-pp2-zero1\"", "strategy = \"dp4-tp4-pp2-zero9\""),
                 {"lab LSL-I", "'strategy' 'dp4-tp4-pp2-zero9'"});
  expect_refused(i("nodes = 4", "nodes = 0"), {"lab LSL-I", "'nodes' is 0"});
  expect_refused(i("global_batch = 256", "global_batch = \"256\""),
                 {"lab LSL-I.global_batch = \"256\" must be an integer"});
  expect_refused(i("clusters = [\"dgx-a100\", \"dgx-h100\"]", "clusters = [\"dgx-a100\"]"),
                 {"lab LSL-I", "'clusters' has 1 entry"});
  expect_refused(i("clusters = [\"dgx-a100\", \"dgx-h100\"]", "clusters = [\"dgx-a100\", \"dgx-a100\"]"),
                 {"lab LSL-I", "'clusters' names 'dgx-a100' twice"});
  expect_refused(i("clusters = [\"dgx-a100\", \"dgx-h100\"]", "clusters = [\"dgx-a100\", \"../dgx-h100\"]"),
                 {"lab LSL-I", "'clusters' names '../dgx-h100', which is not a preset name"});
  expect_refused(i("placements = [\"tp-dp-pp\", \"dp-tp-pp\"]", "placements = [\"tp-dp-pp\", \"dp-tp\"]"),
                 {"lab LSL-I", "'placements' names 'dp-tp'"});
  expect_refused(i("fault_placement = \"dp-tp-pp\"", "fault_placement = \"pp-tp-dp\""),
                 {"lab LSL-I", "'fault_placement' 'pp-tp-dp' is not one of 'placements'"});
  // A field of the other kind: a proof lab's run in a plan lab, a plan lab's contrast in a proof lab.
  expect_refused(i("nodes = 4", "nodes = 4\nworld = 32"), {"lab LSL-I", "'world' does not belong to a plan lab"});
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "world = 2\nclusters = [\"dgx-a100\"]"),
                 {"lab LSL-D", "'clusters' does not belong to a proof lab"});
  expect_refused(i("kind = \"plan\"", "kind = \"prove\""), {"lab LSL-I.world: missing field"});
  // The judge kind: its own fields only, its script required.
  expect_refused(edit_lab(good, "LSL-P", "world = 2", "world = 2\npreset = \"tiny\""),
                 {"lab LSL-P", "'preset' does not belong to a judge lab"});
  expect_refused(edit_lab(good, "LSL-D", "world = 2", "world = 2\nscript = \"x.py\""),
                 {"lab LSL-D", "'script' does not belong to a proof lab"});
  expect_refused(edit_lab(good, "LSL-P", "script = ", "scripts = "), {"lab LSL-P.script: missing field"});
  expect_refused(edit_lab(good, "LSL-P", "kind = \"judge\"", "kind = \"judges\""),
                 {"lab LSL-P", "\"prove\", \"plan\" or \"judge\""});
}

TEST(LabCatalogueFile, MissingFileIsNotFound) {
  const sp::test::TempDir dir;
  Result<LabCatalogue> c = load_lab_catalogue(dir.file("catalogue.toml"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(c.status().message(), dir.file("catalogue.toml")));
}

// `shardproof lab list | show | run` through the real CLI11 wiring: a broken catalogue is exit 2.
int lab_cli(const std::string& line) { return sp::test::run_command(cli::register_lab, line); }

TEST(LabCli, BrokenCatalogueIsAUsageError) {
  const sp::test::TempDir tree;  // a source root whose catalogue is broken
  ASSERT_TRUE(make_directories(tree.file("configs/labs")).ok());
  ASSERT_TRUE(write_file(tree.file("configs/labs/catalogue.toml"),
                         edit_lab(catalogue_text(), "LSL-D", "world = 2", "world = \"2\""))
                  .ok());
  EXPECT_EQ(lab_cli("lab list --root " + tree.path()), 2);
  EXPECT_EQ(lab_cli("lab show LSL-K --root " + tree.path()), 2);
  EXPECT_EQ(lab_cli("lab run LSL-K --out " + tree.file("out") + " --root " + tree.path()), 2);
  EXPECT_FALSE(path_exists(tree.file("out")));
  EXPECT_EQ(lab_cli("lab list --root " + tree.file("nowhere")), 2);
  // The source tree's catalogue: list and show succeed, an unknown key and an unavailable lab exit 2.
  EXPECT_EQ(lab_cli("lab list --root " + root()), 0);
  EXPECT_EQ(lab_cli("lab show LSL-K --root " + root()), 0);
  EXPECT_EQ(lab_cli("lab show LSL-Z --root " + root()), 2);
  // A plan lab takes no --set; a proof lab has no `lab verify` (shardproof verify checks its bundle).
  EXPECT_EQ(lab_cli("lab run LSL-I --out " + tree.file("i") + " --set parallel.dp=2 --root " + root()), 2);
  EXPECT_FALSE(path_exists(tree.file("i")));
  EXPECT_EQ(lab_cli("lab verify LSL-D " + tree.path() + " --root " + root()), 2);
  // An unavailable lab: exit 2 and nothing written.
  const sp::test::TempDir other;
  ASSERT_TRUE(make_directories(other.file("configs/labs")).ok());
  ASSERT_TRUE(write_file(other.file("configs/labs/catalogue.toml"), unavailable_i(catalogue_text())).ok());
  EXPECT_EQ(lab_cli("lab run LSL-I --out " + other.file("i") + " --root " + other.path()), 2);
  EXPECT_FALSE(path_exists(other.file("i")));
  // A plan lab whose cluster is not a preset of the tree (this tree has no configs/clusters): exit 2.
  ASSERT_TRUE(write_file(other.file("configs/labs/catalogue.toml"), catalogue_text()).ok());
  EXPECT_EQ(lab_cli("lab run LSL-I --out " + other.file("i") + " --root " + other.path()), 2);
  EXPECT_FALSE(path_exists(other.file("i")));
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::labs
