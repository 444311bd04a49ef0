// The catalogue as a learner reads it (labs/show.h): `lab list`, `lab show KEY` and an unavailable lab's
// explanation, rendered from the catalogue's data (configs/labs/catalogue.toml, labs/catalogue.h).
#include "labs/show.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "evidence/faults.h"
#include "labs/judge_lab.h"
#include "labs/plan_lab_case.h"
#include "plan/strategy.h"

namespace sp::labs {

namespace {

// Display width in columns: UTF-8 code points (the catalogue's text is Latin plus §, ≥, ×).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Wraps `text` at `width` columns; the first line starts with `first`, later lines with `rest`.
std::string wrap(std::string_view text, const std::string& first, const std::string& rest, size_t width = 100) {
  std::string out = first;
  size_t col = columns(first);
  bool line_empty = true;
  size_t i = 0;
  while (i < text.size()) {
    const size_t j = std::min(text.find(' ', i), text.size());
    const std::string_view word = text.substr(i, j - i);
    i = j + 1;
    if (word.empty()) continue;
    if (!line_empty && col + 1 + columns(word) > width) {
      out += "\n" + rest;
      col = columns(rest);
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++col;
    }
    out += word;
    col += columns(word);
    line_empty = false;
  }
  return out + "\n";
}

std::string command_of(const Lab& lab) {
  std::string low = lab.key;
  for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return fmt::format("shardproof lab run {} --out runs/{}", lab.key, low);
}

std::string prove_equivalent(const Lab& lab) {
  std::string s = "shardproof prove --preset " + lab.preset;
  if (!lab.model_config.empty()) s += " --model-config " + lab.model_config;
  if (!lab.deepspeed.empty()) s += fmt::format(" --deepspeed {} --np {}", lab.deepspeed, lab.world);
  for (const std::string& set : lab.sets) s += " --set " + set;
  return s + " --fault " + lab.fault + " --out DIR";
}

// The `shardproof plan` command of one case of a plan lab (what `lab run` evaluates, as a learner types it).
std::string plan_equivalent(const Lab& lab, const PlanLabCase& c) {
  std::string s = fmt::format("shardproof plan --cluster {} --nodes {} --model {} --global-batch {}", c.cluster,
                              lab.plan.nodes, lab.plan.model, lab.plan.global_batch);
  const plan::Strategy& st = lab.plan.parsed;
  s += fmt::format(" --dp {} --tp {} --pp {} --zero {}", st.dp, st.tp, st.pp, st.zero);
  if (st.schedule != config::Schedule::k1F1B || st.virtual_stages != 1)
    s += fmt::format(" --schedule {} --virtual-stages {}", config::schedule_name(st.schedule), st.virtual_stages);
  if (st.recompute != model::Recompute::kNone) s += fmt::format(" --recompute {}", model::recompute_name(st.recompute));
  return s + " --axis-order " + c.placement + " --out DIR/" + c.dir();
}

// What a plan lab's gate requires (labs/plan_lab_criteria.h), for `lab show`.
constexpr std::string_view kPlanGate =
    "every (cluster, placement) case is evaluated by the planner and fits in device memory; the sound placements "
    "carry no topology warning; the fault placement is flagged by the topology check (its tp groups cross nodes), "
    "its dominant communication is on that inter-node link and its step is slower than every sound placement's "
    "on the same cluster; each placement's step time differs between the clusters by more than 1 %. gate.json and "
    "summary.md are derived from the cases' plan.json files alone (`shardproof lab verify KEY DIR`).";

}  // namespace

std::string lab_list_text(const LabCatalogue& catalogue) {
  std::string out = fmt::format("{:<6} {:<6} {:>5}  {:<28} {}\n", "key", "§", "ranks", "fault", "title");
  for (const Lab& lab : catalogue.labs) {
    const std::string ranks = lab.available ? std::to_string(lab.world) : "-";
    const std::string fault = !lab.available   ? "(unavailable)"
                              : lab.is_plan()  ? "plan: flag " + lab.plan.fault_placement
                              : lab.is_judge() ? "judge: " + lab.fault
                                               : lab.fault;
    out += fmt::format("{:<6} {:<6} {:>5}  {:<28} {}\n", lab.key, lab.section, ranks, fault, lab.title);
  }
  out +=
      "\nshardproof lab show KEY   what a lab runs, what to observe, what it cannot be extrapolated to\nshardproof lab "
      "run KEY --out DIR   run it (the proof protocol; the planner for a plan lab; a PyTorch run and `shardproof "
      "judge` for a judge lab; docs/labs.md)\n";
  return out;
}

namespace {

// The reason and the closest runnable labs of an unavailable lab.
std::string unavailable_body(const LabCatalogue& catalogue, const Lab& lab) {
  std::string out = wrap(lab.unavailable_reason, "  why: ", "       ");
  for (const std::string& key : lab.closest) {
    Result<const Lab*> c = catalogue.find(key);
    out += fmt::format("  closest runnable demonstration: {} §{} {}\n    shardproof lab run {} --out DIR\n", key,
                       c.ok() ? (*c)->section : "?", c.ok() ? (*c)->title : "?", key);
  }
  return out;
}

// Each observation with its claims.
std::string observations_text(const std::vector<Observation>& observe) {
  std::string out;
  for (const Observation& o : observe) {
    out += wrap(o.text, "  - ", "    ");
    for (const std::string& c : o.checks) out += "      claim: " + c + "\n";
  }
  return out;
}

// What to observe, the variations with theirs, and the lab's own limits, as `lab show` prints them.
std::string notes_text(const Lab& lab) {
  std::string out = "\n\nwhat to observe:\n" + observations_text(lab.observe);
  for (const Variation& v : lab.variations) {
    out += fmt::format("\nvariation {} (shardproof lab run {} --variation {} --out DIR; the same as --set {}):\n",
                       v.name, lab.key, v.name, fmt::join(v.sets, " --set "));
    out += observations_text(v.observe);
  }
  out += "\nwhat it cannot be extrapolated to:\n";
  for (const std::string& line : lab.cannot_extrapolate) out += wrap(line, "  - ", "    ");
  return out;
}

// The run part of `lab show` for a plan lab: the contrast, the gate, the commands and the lab's limits.
std::string plan_lab_show_text(const Lab& lab) {
  const PlanLabSpec& p = lab.plan;
  std::string out = "\nplan (no training; the planner, docs/plan.md):\n";
  out += fmt::format("  model: {}   strategy: {} ({} ranks)   nodes: {}   global batch: {}\n", p.model, p.strategy,
                     lab.world, p.nodes, p.global_batch);
  out += fmt::format("  clusters: {}\n  placements (rank-grid axis order): {}\n", fmt::join(p.clusters, ", "),
                     fmt::join(p.placements, ", "));
  out += wrap(fmt::format("{}: puts the tp groups across nodes; expected detector: the planner's topology check "
                          "(placement.warnings)",
                          p.fault_placement),
              "  fault placement: ", "    ");
  out += wrap(kPlanGate, "  gate: ", "    ");
  out += "  command: " + command_of(lab) + "\n  (the same as, per case:\n";
  for (const PlanLabCase& c : plan_lab_cases(lab.plan))
    out += "    " + plan_equivalent(lab, c) + "\n";  // one line: to copy
  out.back() = ')';
  out += notes_text(lab);
  return out;
}

// The run part of `lab show` for a judge lab: the two recordings, what the lab requires, the commands.
std::string judge_lab_show_text(const Lab& lab, const std::string& python) {
  std::string out =
      "\nrun (a PyTorch script recorded with python/shardproof_torch, judged by `shardproof judge`, "
      "docs/judge.md):\n";
  out += fmt::format("  script: {} {}   processes: {}\n", lab.script, fmt::join(lab.script_args, " "), lab.world);
  out += wrap(fmt::format("{}: the script's planted bug (its --bug), recorded into DIR/fault/; the run as it is is "
                          "recorded into DIR/run/",
                          lab.fault),
              "  fault: ", "    ");
  out += wrap(
      "DIR/run/ is judged PASS and DIR/fault/ FAIL (each directory's judge/ holds the judge's gate.json, summary.md, "
      "first_divergence.json, checksums.jsonl, steps.jsonl and report.html); PyTorch for Python 3 is needed "
      "(python3-torch, scripts/install-deps.sh)",
      "  gate: ", "    ");
  out += "  command: " + command_of(lab) + "\n  (the same as:\n";
  for (const char* name : {"run", "fault"}) {
    std::vector<std::string> argv =
        judge_lab_command(python, lab, ".", std::string("DIR/") + name, std::string(name) == "run" ? "" : lab.fault);
    argv[1] = lab.script;  // as typed in the source tree
    out += fmt::format("    {}\n    shardproof judge DIR/{}\n", fmt::join(argv, " "), name);  // one line: to copy
  }
  out.back() = ')';
  return out + notes_text(lab);
}

}  // namespace

std::string lab_unavailable_text(const LabCatalogue& catalogue, const Lab& lab) {
  return fmt::format("{} §{} {}: not available in shardproof\n", lab.key, lab.section, lab.title) +
         unavailable_body(catalogue, lab);
}

std::string lab_show_text(const LabCatalogue& catalogue, const Lab& lab, const std::string& python) {
  std::string out = fmt::format("{}  §{} {}\n\n", lab.key, lab.section, lab.title);
  out += wrap(lab.mechanism, "", "");
  if (!lab.available) return out + "\nnot available in shardproof:\n" + unavailable_body(catalogue, lab);
  if (lab.is_plan()) return out + plan_lab_show_text(lab);
  if (lab.is_judge()) return out + judge_lab_show_text(lab, python);
  out += "\nrun:\n";
  out += fmt::format("  ranks: {}   preset: {}   overrides: ", lab.world, lab.preset);
  for (size_t i = 0; i < lab.sets.size(); ++i) out += (i ? " " : "") + lab.sets[i];
  out += "\n";
  if (!lab.model_config.empty()) out += "  model: " + lab.model_config + " (a Hugging Face config.json)\n";
  if (!lab.deepspeed.empty()) out += "  DeepSpeed configuration: " + lab.deepspeed + "\n";
  Result<evidence::FaultSpec> f = evidence::parse_fault(lab.fault);
  if (f.ok()) {
    const evidence::FaultInfo& info = evidence::fault_info(f->kind);
    out += wrap(fmt::format("{}: {}; expected first detector: {} ({})", lab.fault, info.breaks,
                            evidence::view_name(info.expected_view), info.expectation),
                "  fault: ", "    ");
  } else {
    out += "  fault: " + lab.fault + " (does not parse: " + f.status().message() + ")\n";
  }
  out += wrap(catalogue.evaluation, "  independent evaluation: ", "    ");
  out += "  command: " + command_of(lab) + "\n";
  out += wrap(prove_equivalent(lab), "  (the same as: ", "    ");
  out.back() = ')';
  out += notes_text(lab);
  for (const std::string& line : catalogue.common_limits) out += wrap(line, "  - ", "    ");
  return out;
}

}  // namespace sp::labs
