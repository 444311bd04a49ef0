// The judgement from the criteria table (judge/criteria.h): the gate, the verdict (PASS, FAIL, UNVERIFIED), the
// first divergence with its counts and pattern, the notes, and the files written under the recording's judge/.
#include <fmt/format.h>

#include <cmath>

#include "evidence/bundle_paths.h"
#include "judge/criteria.h"

namespace sp::judge {
namespace {

nlohmann::json ratio_json(double r) { return std::isfinite(r) ? nlohmann::json(r) : nlohmann::json("inf"); }

// One line per step (judge/step_result.cc): what each view read of it, and its ratios to the tolerances per
// tensor — the report's tensor × step map, and what `judge --follow` keeps of a step it discarded.
std::string steps_jsonl(const JudgeContext& x) {
  std::string out;
  for (const StepResult& s : x.steps) out += step_result_json(s).dump() + "\n";
  return out;
}

}  // namespace

nlohmann::json JudgeDetection::to_json() const {
  return {{"view", view},
          {"point", point},
          {"found", found},
          {"step", found ? nlohmann::json(step) : nullptr},
          {"phase", phase},
          {"tensor", tensor},
          {"ranks", ranks},
          {"detail", detail},
          {"evidence", evidence},
          {"ratio", found ? ratio_json(ratio) : nlohmann::json(nullptr)},
          {"tensors_failing", tensors_failing},
          {"steps_failing", steps_failing},
          {"pattern", pattern}};
}

std::string JudgeVerdict::verdict() const {
  if (!gate.passed()) return "FAIL";
  return unverified.empty() && unmodelled.empty() ? "PASS" : "UNVERIFIED";
}
int JudgeVerdict::exit_code() const { return !gate.passed() ? 1 : unverified.empty() && unmodelled.empty() ? 0 : 3; }

std::string JudgeVerdict::first_line() const {
  if (first < 0)
    return unverified.empty() ? "first divergence: none — every view agrees with the single-device reference"
                              : fmt::format(
                                    "first divergence: none among the steps checked; {} step{} not checked "
                                    "(UNVERIFIED)",
                                    unverified.size(), unverified.size() == 1 ? "" : "s");
  const JudgeDetection& d = detections[static_cast<size_t>(first)];
  std::string s = fmt::format("first divergence: {}, step {}", d.view, d.step);
  if (!d.phase.empty()) s += ", " + d.phase;
  if (!d.tensor.empty()) s += ", " + d.tensor;
  if (!d.ranks.empty()) {
    s += d.ranks.size() == 1 ? ", rank " : ", ranks ";
    for (size_t i = 0; i < d.ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(d.ranks[i]);
  }
  s += ": " + d.detail;
  if (d.steps_failing > 0 || d.tensors_failing > 0) {
    s += " [";
    if (d.tensors_failing > 0)
      s += fmt::format("{} tensor{} at step {}", d.tensors_failing, d.tensors_failing == 1 ? "" : "s", d.step);
    if (d.steps_failing > 0)
      s += fmt::format("{}{} step{} fail{} this view", d.tensors_failing > 0 ? "; " : "", d.steps_failing,
                       d.steps_failing == 1 ? "" : "s", d.steps_failing == 1 ? "s" : "");
    s += "]";
  }
  return s;
}

nlohmann::json JudgeVerdict::first_divergence_json() const {
  nlohmann::json views = nlohmann::json::array();
  for (const JudgeDetection& d : detections)
    if (d.point > 0) views.push_back(d.to_json());
  const JudgeDetection* f = first < 0 ? nullptr : &detections[static_cast<size_t>(first)];
  return {{"format_version", 2},
          {"verdict", verdict()},
          {"first", f == nullptr ? nlohmann::json(nullptr) : f->to_json()},
          {"line", first_line()},
          {"pattern", f == nullptr ? "" : f->pattern},
          {"unverified_steps", unverified},
          {"views", views}};
}

JudgeVerdict derive_judgement(const JudgeContext& x) {
  JudgeVerdict v;
  const RecordingContract& c = x.recording->contract();
  for (const JudgeRule& rule : judge_criteria()) {
    if (rule.applies != nullptr && !rule.applies(c)) continue;
    auto [criterion, detection] = rule.check(x);
    v.gate.criteria.push_back(std::move(criterion));
    v.detections.push_back(std::move(detection));
  }
  for (size_t i = 0; i < v.detections.size(); ++i) {
    const JudgeDetection& d = v.detections[i];
    if (!d.found || d.point == 0) continue;
    const JudgeDetection* f = v.first < 0 ? nullptr : &v.detections[static_cast<size_t>(v.first)];
    if (f == nullptr || d.step < f->step || (d.step == f->step && d.point < f->point)) v.first = static_cast<int>(i);
  }
  v.unverified = x.unchecked_steps();
  v.unmodelled = x.unmodelled_text();
  v.title = fmt::format("shardproof judge: {} (dp {} × tp {} × pp {}{}), {} steps", c.strategy_name, c.strategy.dp,
                        c.strategy.tp, c.strategy.pp, c.strategy.zero ? fmt::format(", ZeRO-{}", c.strategy.zero) : "",
                        c.steps);
  v.notes.push_back(v.first_line());
  if (v.first >= 0 && !v.detections[static_cast<size_t>(v.first)].pattern.empty())
    v.notes.push_back("pattern: " + v.detections[static_cast<size_t>(v.first)].pattern);
  v.notes.push_back(fmt::format(
      "recorded by {} on torch {} ({}); optimizer {} ({}), as declared: betas ({}, {}), eps {}, weight decay {} "
      "except {} no-decay tensors, clip {}",
      c.doc.value("python", "?"), c.doc.value("torch", "?"),
      c.doc["script"].is_object() ? c.doc["script"].value("file", "?") : "no script", c.implementation,
      c.every_step() ? std::string(kernels::adamw_arithmetic_name(c.arithmetic)) : "format 1", c.beta1, c.beta2, c.eps,
      c.weight_decay, c.no_decay.size(), c.max_grad_norm));
  int64_t bytes = 0, checked = 0;
  for (const StepResult& s : x.steps) {
    bytes += s.bytes;
    checked += s.checked ? 1 : 0;
  }
  if (!x.steps.empty()) {
    const JudgeTolerances& t = x.steps.front().tol;
    v.notes.push_back(
        fmt::format("foreign tolerances (docs/equivalence.md §7): R = {} reductions, K = {}: token {:.3g}, "
                    "loss {:.3g}, gradient {:.3g} (step 0), update {}, norm {:.3g}",
                    t.reductions, t.longest, t.token, t.loss, t.grad,
                    c.every_step() ? "bit for bit" : fmt::format("{:.3g}", t.update), t.norm) +
        (t.rounding_points > 0 ? fmt::format("; {}: loss and gradient are the 16-bit envelope 2·√R₁₆·u/√3 of R₁₆ = {} "
                                             "rounding points (§8)",
                                             c.param_bf16      ? "bf16 parameters"
                                             : c.autocast_fp16 ? "fp16 autocast (u = 2^-11)"
                                                               : "bf16 autocast",
                                             t.rounding_points)
                               : std::string()));
    v.notes.push_back(fmt::format("{} of {} steps checked; {} bytes of gradients and states read ({} per checked step)",
                                  checked, x.steps.size(), bytes, checked > 0 ? bytes / checked : 0));
  }
  for (const std::string& n : x.notes) v.notes.push_back(n);
  v.summary = {{"strategy", c.strategy_name},
               {"dp", c.strategy.dp},
               {"tp", c.strategy.tp},
               {"pp", c.strategy.pp},
               {"zero", c.strategy.zero},
               {"steps", c.steps},
               {"world", c.world},
               {"checked", checked},
               {"unverified_steps", v.unverified},
               {"format_version", c.format_version},
               {"verdict", v.verdict()}};
  return v;
}

std::vector<std::pair<std::string, std::string>> judge_derived_files(const JudgeVerdict& v, const JudgeContext& x) {
  nlohmann::json gate = v.gate.to_json();
  gate["verdict"] = v.verdict();
  gate["unverified_steps"] = v.unverified;
  std::string summary = v.gate.summary_markdown(v.title, v.notes);
  // The verdict line says UNVERIFIED where steps went unchecked (the gate's own PASS covers the steps it saw).
  if (v.verdict() == "UNVERIFIED") {
    const std::string pass = "**Verdict: PASS**";
    const std::string why =
        !v.unverified.empty()
            ? fmt::format("{} of {} steps could not be checked: {}", v.unverified.size(), x.steps.size(),
                          x.steps[static_cast<size_t>(v.unverified.front())].unchecked)
            : v.unmodelled;
    if (const size_t at = summary.find(pass); at != std::string::npos)
      summary.replace(at, pass.size(), "**Verdict: UNVERIFIED** — " + why);
    if (!v.unverified.empty()) summary += "\n## Steps not checked\n\n";
    for (int64_t s : v.unverified)
      summary += fmt::format("- step {}: {}\n", s, x.steps[static_cast<size_t>(s)].unchecked);
  }
  return {{judge_file(evidence::kChecksumsFile), x.assembly.checksums_jsonl},
          {judge_file(evidence::kGateFile), gate.dump(2) + "\n"},
          {judge_file(evidence::kSummaryFile), summary},
          {judge_file(evidence::kFirstDivergenceFile), v.first_divergence_json().dump(2) + "\n"},
          {judge_file("steps.jsonl"), steps_jsonl(x)}};
}

}  // namespace sp::judge
