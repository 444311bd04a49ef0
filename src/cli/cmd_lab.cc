// `shardproof lab list | show KEY | run KEY --out DIR | verify KEY DIR`: the learning labs LSL-A … LSL-P
// (docs/labs.md). A driver process like `prove`, not an MPI rank: `run` validates the lab (config, topology,
// fault; labs/lab_run.h) and hands a proof lab to the proof protocol (cli/prove.h), which launches its own
// mpirun stages, a plan lab to the planner (labs/plan_lab.h; no MPI) and a judge lab to labs/judge_lab.h (a
// PyTorch script recorded twice, each recording judged by `shardproof judge`, with this process's Python and
// job runner). `verify` re-derives a plan lab's gate.
// The catalogue is read from <root>/configs/labs/catalogue.toml (labs/catalogue.h) on every call.
// Exit codes: list/show 0, unknown key or a broken catalogue file 2; run and verify: 0 PASS, 1 FAIL,
// 2 usage (prove's for a proof lab), and 2 for a lab this engine cannot demonstrate (it prints why and the closest
// runnable lab; it never runs a substitute).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/prove.h"
#include "cli/run_setup.h"
#include "cli/run_source.h"
#include "core/file_io.h"
#include "evidence/bundle_paths.h"
#include "labs/against.h"
#include "labs/claims.h"
#include "labs/judge_lab.h"
#include "labs/lab_run.h"
#include "labs/plan_lab.h"
#include "labs/show.h"

namespace sp::cli {

using labs::Lab;
using labs::LabCatalogue;
using labs::Variation;

ProveOptions lab_prove_options(const Lab& lab, const LabRunOptions& options) {
  ProveOptions p;
  const std::string root = options.root.empty() ? default_root() : options.root;
  p.source.preset = lab.preset;
  p.source.model_config = labs::lab_file(root, lab.model_config);
  p.source.deepspeed = labs::lab_file(root, lab.deepspeed);
  // DeepSpeed's batch rule reads dp from the world, as its launcher does.
  p.source.np = lab.deepspeed.empty() ? 0 : lab.world;
  p.source.sets = lab.sets;
  p.source.sets.insert(p.source.sets.end(), options.extra_sets.begin(), options.extra_sets.end());
  p.source.root = options.root;
  p.fault = lab.fault;
  p.out = options.out;
  p.cache = options.cache;
  p.title = fmt::format("{} §{} {}{}", lab.key, lab.section, lab.title,
                        lab.variation.empty() ? "" : " (variation " + lab.variation + ")");
  p.quiet = options.quiet;
  p.lab = labs::lab_bundle_json(lab);
  return p;
}

namespace {

// The Python that runs a judge lab's script: $SHARDPROOF_PYTHON, else /usr/bin/python3 (Debian's, with
// python3-torch), else python3 on PATH.
std::string judge_lab_python() {
  if (const char* p = std::getenv("SHARDPROOF_PYTHON"); p != nullptr && *p != '\0') return p;
  return path_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// What a judge lab runs with: this process's Python, this binary and its job runner (run_setup.h run_job).
labs::JudgeLabHost judge_lab_host() {
  std::error_code ec;
  return labs::JudgeLabHost{
      .python = judge_lab_python(),
      .self = std::filesystem::canonical("/proc/self/exe", ec).string(),
      .run_job = [](std::vector<std::string> argv, const std::string& log) { return run_job(std::move(argv), log); }};
}

// A lab's verdict as an exit code: 0 PASS, 1 FAIL, else the error's (printed).
int exit_code_of(const Result<bool>& passed) {
  return passed.ok() ? (*passed ? 0 : 1) : report_status(passed.status());
}

struct LabOptions {
  std::string key;
  std::string out;
  RunSource source;  // --set (a variation on a proof lab) and --root
  std::string cache;
  std::string against;    // lab run --against DIR: the lab's own bundle to compare the variation with
  std::string catalogue;  // lab check --catalogue: another catalogue file (a planted wrong claim, in tests)
  std::string variation;  // lab run / check --variation NAME: one of the lab's variations, with its own claims
  bool quiet = false;
};

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The catalogue of the source tree, or nothing after reporting why not. A catalogue file that does not
// read is a configuration error (exit 2), whatever the Status code.
std::optional<LabCatalogue> catalogue_or_report(const LabOptions& o, CommandResult& result) {
  Result<LabCatalogue> c = labs::load_lab_catalogue(
      o.catalogue.empty() ? labs::lab_catalogue_path(o.source.root_or_default()) : o.catalogue);
  if (c.ok()) return *std::move(c);
  report_status(c.status());
  result.exit_code = 2;
  return std::nullopt;
}

// Unknown keys are usage errors (exit 2), whatever the Status code.
const Lab* lab_or_report(const LabCatalogue& catalogue, const std::string& key, CommandResult& result) {
  Result<const Lab*> lab = catalogue.find(key);
  if (lab.ok()) return *lab;
  report_status(lab.status());
  result.exit_code = 2;
  return nullptr;
}

// The lab as `o` asks for it: itself, the variation --variation names, or the variation whose sets equal the
// --set list (then the list is the variation's, not the learner's). Unknown names are usage errors (exit 2).
std::optional<Lab> varied_lab(const Lab& lab, LabOptions& o, CommandResult& result) {
  if (o.variation.empty()) {
    const Variation* v = o.source.sets.empty() ? nullptr : lab.variation_of_sets(o.source.sets);
    if (v == nullptr) return lab;
    o.source.sets.clear();
    return labs::lab_variation(lab, *v);
  }
  Result<const Variation*> v = lab.find_variation(o.variation);
  if (!v.ok()) {
    report_status(v.status());
    result.exit_code = 2;
    return std::nullopt;
  }
  return labs::lab_variation(lab, **v);
}

// Every observation with its claims evaluated against the bundle just written. A claim that does not hold
// on the lab's own run (or on one of its catalogued variations, whose claims these are) means the notes
// contradict the engine: the run fails (exit 1) even if the proof passed. Under a learner's own --set the
// claims describe the lab's run, not theirs: reported, not failed.
int with_claims(const Lab& lab, const std::string& out, bool varied, int rc) {
  if (rc == 2) return rc;  // usage: no bundle was written
  int failed = 0, total = 0;
  print(labs::lab_claims_text(lab, out, failed, total));
  if (failed == 0) {
    print(fmt::format("every claim of the notes holds on this bundle ({} claims)\n", total));
    return rc;
  }
  if (varied) {
    print(fmt::format("{} of {} claims differ under your --set variation: the notes describe the lab's own run\n",
                      failed, total));
    return rc;
  }
  print(
      fmt::format("{} of {} claims of the notes do not hold on the lab's own run: the notes contradict the "
                  "bundle\n",
                  failed, total));
  return rc == 0 ? 1 : rc;
}

int run_lab(const LabCatalogue& catalogue, const Lab& lab, const LabOptions& o) {
  if (!lab.available) {
    print(labs::lab_unavailable_text(catalogue, lab));
    return 2;
  }
  const std::string root = o.source.root_or_default();
  if (lab.is_plan() && (!o.source.sets.empty() || !o.cache.empty() || !o.against.empty()))
    return report_status(
        invalid_argument("lab {} is a plan lab: --set, --cache and --against apply to a proof lab's runs", lab.key)
            .with_hint("vary the plan with the `shardproof plan` commands that `lab show " + lab.key + "` prints"));
  if (lab.is_plan()) return with_claims(lab, o.out, false, exit_code_of(labs::run_plan_lab(lab, root, o.out)));
  if (lab.is_judge()) {
    if (!o.cache.empty() || !o.against.empty())
      return report_status(
          invalid_argument("lab {} is a judge lab: --cache and --against apply to a proof lab's runs", lab.key));
    if (Status s = labs::validate_lab(lab, root, o.source.sets); !s.ok()) return report_status(s);
    // No __pycache__ next to the script: an installed root is read-only by intent (cli/run_setup.h).
    ::setenv("PYTHONDONTWRITEBYTECODE", "1", 0);
    return with_claims(lab, o.out, false, exit_code_of(labs::run_judge_lab(lab, root, o.out, judge_lab_host())));
  }
  if (Status s = labs::validate_lab(lab, root, o.source.sets); !s.ok()) {
    report_status(s);
    return 2;
  }
  if (!o.against.empty())
    if (Status s = labs::check_against_dir(o.against); !s.ok()) return report_status(s);
  ProveOptions p = lab_prove_options(
      lab, LabRunOptions{.out = o.out, .root = root, .cache = o.cache, .extra_sets = o.source.sets, .quiet = o.quiet});
  print(lab.key + " §" + lab.section + " " + lab.title + (lab.variation.empty() ? "" : ", variation " + lab.variation) +
        ": " + std::to_string(lab.world) + " ranks, fault " + lab.fault +
        (o.source.sets.empty() ? "" : " (with your --set overrides: not the lab's preset)") + "\n");
  const int rc = run_prove(p);
  // The lab's point: where to look next (printed with --quiet too; it is not progress output).
  print(
      fmt::format("\nwhat to observe in {} (shardproof lab show {}):\n  - {}: every view below as a chart, each "
                  "naming its file (docs/report.md)\n",
                  o.out, lab.key, evidence::kReportFile));
  const int claims_rc = with_claims(lab, o.out, !o.source.sets.empty(), rc);
  if (!o.against.empty() && rc != 2) print(labs::lab_against_text(o.out, o.against));
  return claims_rc;
}

}  // namespace

void register_lab(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<LabOptions>();
  CLI::App* lab = app.add_subcommand("lab",
                                     "learning labs LSL-A … LSL-P, one per section of chapter 4 "
                                     "(distributed training): list, show, run, verify");
  lab->require_subcommand(1);

  const std::string root_help =
      "repository root: configs/ (presets, the lab catalogue) and data/ (default: the source tree)";
  CLI::App* list = lab->add_subcommand("list", "every lab: key, section, ranks, fault, title");
  list->add_option("--root", o->source.root, root_help);
  list->callback([o, &result] {
    if (auto c = catalogue_or_report(*o, result)) print(labs::lab_list_text(*c));
  });

  CLI::App* show = lab->add_subcommand("show", "what a lab runs, what to observe, what it cannot be extrapolated to");
  show->add_option("KEY", o->key, "lab key: LSL-D, lsl-d or D")->required();
  show->add_option("--root", o->source.root, root_help);
  show->callback([o, &result] {
    if (auto c = catalogue_or_report(*o, result))
      if (const Lab* l = lab_or_report(*c, o->key, result)) print(labs::lab_show_text(*c, *l, judge_lab_python()));
  });

  CLI::App* run = lab->add_subcommand(
      "run", "run a lab into DIR: the proof protocol (shardproof prove), or the planner for a plan lab");
  run->add_option("KEY", o->key, "lab key: LSL-D, lsl-d or D")->required();
  run->add_option("--out", o->out, "bundle directory (must not hold a previous bundle)")->required();
  add_run_source_options(run, o->source,
                         {.files = false,
                          .model_config = false,
                          .deepspeed = false,
                          .set_help = "a variation on the lab: --set train.recompute=none (repeatable; applied after "
                                      "the lab's own overrides)",
                          .root_help = root_help});
  run->add_option("--cache", o->cache, "prepared-data cache (default: <root>/.shardproof-cache)");
  run->add_flag("--quiet", o->quiet, "no per-step progress lines");
  run->add_option("--against", o->against,
                  "the lab's own bundle (lab run KEY --out DIR): print what your --set variation changed (memory "
                  "per category, bytes per group, bubble, tokens/s)");
  run->add_option("--variation", o->variation,
                  "one of the lab's variations (lab show KEY lists them): its --sets, checked by its own claims");
  run->callback([o, &result] {
    if (auto c = catalogue_or_report(*o, result))
      if (const Lab* l = lab_or_report(*c, o->key, result))
        if (std::optional<Lab> v = varied_lab(*l, *o, result)) result.exit_code = run_lab(*c, *v, *o);
  });

  CLI::App* check = lab->add_subcommand(
      "check", "evaluate every claim of a lab's observations against DIR, the bundle `lab run KEY` wrote");
  check->add_option("KEY", o->key, "lab key: LSL-D, lsl-d or D")->required();
  check->add_option("DIR", o->out, "the directory `lab run KEY --out DIR` wrote")->required();
  check->add_option("--root", o->source.root, root_help);
  check->add_option("--catalogue", o->catalogue, "a lab catalogue file (default: <root>/configs/labs/catalogue.toml)");
  check->add_option("--variation", o->variation, "DIR is this variation's bundle: its claims, not the lab's");
  check->callback([o, &result] {
    if (auto c = catalogue_or_report(*o, result))
      if (const Lab* base = lab_or_report(*c, o->key, result)) {
        const std::optional<Lab> v = varied_lab(*base, *o, result);
        if (!v) return;
        const Lab* l = &*v;
        if (!l->available) {
          result.exit_code = report_status(invalid_argument("lab {} is not available: it has no claims", l->key));
          return;
        }
        int failed = 0, total = 0;
        print(labs::lab_claims_text(*l, o->out, failed, total));
        print(fmt::format("{}{}: {} of {} claims hold\n", l->key,
                          l->variation.empty() ? "" : " variation " + l->variation, total - failed, total));
        result.exit_code = failed == 0 ? 0 : 1;
        // A plan lab's figures are the planner's: claims that hold on edited figures prove nothing.
        if (l->is_plan())
          for (const std::string& edited : labs::plan_lab_edited_cases(*l, o->out, o->source.root_or_default())) {
            print(
                fmt::format("FAIL: {}: the claims above were evaluated on a plan the planner does not give "
                            "(shardproof lab verify {} {} derives the gate again)\n",
                            edited, l->key, o->out));
            result.exit_code = 1;
          }
      }
  });

  CLI::App* verify = lab->add_subcommand(
      "verify", "derive a plan lab's gate again from DIR's files (a proof lab's bundle: shardproof verify DIR)");
  verify->add_option("KEY", o->key, "lab key: LSL-I, lsl-i or I")->required();
  verify->add_option("DIR", o->out, "the directory `lab run KEY --out DIR` wrote")->required();
  verify->add_option("--root", o->source.root, root_help);
  verify->callback([o, &result] {
    if (auto c = catalogue_or_report(*o, result))
      if (const Lab* l = lab_or_report(*c, o->key, result)) {
        if (!l->is_plan() || !l->available) {
          result.exit_code = report_status(
              invalid_argument("lab {} is not a plan lab; its bundle is {}", l->key,
                               l->is_judge() ? "two judged recordings" : "a proof")
                  .with_hint(l->is_judge() ? "shardproof judge " + o->out + "/run (and /fault) judges them again"
                                           : "shardproof verify " + o->out + " derives a proof bundle's gate again"));
          return;
        }
        result.exit_code = exit_code_of(labs::verify_plan_lab(*l, o->out, o->source.root_or_default()));
      }
  });
}

}  // namespace sp::cli
