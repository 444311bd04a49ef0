// The judgement from the criteria table (judge/criteria.h): the gate, the first divergence, the notes, and
// the files written into the recording.
#include <fmt/format.h>

#include "evidence/bundle_paths.h"
#include "judge/criteria.h"

namespace sp::judge {

nlohmann::json JudgeDetection::to_json() const {
  return {{"view", view},        {"point", point},   {"found", found}, {"step", found ? nlohmann::json(step) : nullptr},
          {"phase", phase},      {"tensor", tensor}, {"ranks", ranks}, {"detail", detail},
          {"evidence", evidence}};
}

std::string JudgeVerdict::first_line() const {
  if (first < 0) return "first divergence: none — every view agrees with the single-device reference";
  const JudgeDetection& d = detections[static_cast<size_t>(first)];
  std::string s = fmt::format("first divergence: {}, step {}", d.view, d.step);
  if (!d.phase.empty()) s += ", " + d.phase;
  if (!d.tensor.empty()) s += ", " + d.tensor;
  if (!d.ranks.empty()) {
    s += d.ranks.size() == 1 ? ", rank " : ", ranks ";
    for (size_t i = 0; i < d.ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(d.ranks[i]);
  }
  return s + ": " + d.detail;
}

nlohmann::json JudgeVerdict::first_divergence_json() const {
  nlohmann::json views = nlohmann::json::array();
  for (const JudgeDetection& d : detections)
    if (d.point > 0) views.push_back(d.to_json());
  return {{"format_version", 1},
          {"first", first < 0 ? nlohmann::json(nullptr) : detections[static_cast<size_t>(first)].to_json()},
          {"line", first_line()},
          {"views", views}};
}

JudgeVerdict derive_judgement(const JudgeContext& x) {
  JudgeVerdict v;
  const RecordingContract& c = x.recording->contract();
  for (const JudgeRule& rule : judge_criteria()) {
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
  v.title = fmt::format("shardproof judge: {} (dp {} × tp {} × pp {}{}), {} steps", c.strategy_name, c.strategy.dp,
                        c.strategy.tp, c.strategy.pp, c.strategy.zero ? ", ZeRO-1" : "", c.steps);
  v.notes.push_back(v.first_line());
  v.notes.push_back(fmt::format(
      "recorded by {} on torch {} ({}); optimizer {}", c.doc.value("python", "?"), c.doc.value("torch", "?"),
      c.doc["script"].is_object() ? c.doc["script"].value("file", "?") : "no script", c.implementation));
  nlohmann::json anchors = nlohmann::json::array();
  int64_t bytes = 0;
  for (const AnchorResult& a : x.anchors) {
    bytes += a.bytes;
    nlohmann::json grads = nlohmann::json::object(), upd = nlohmann::json::object();
    for (const TensorError& e : a.grads) grads[e.tensor] = e.rel;
    for (const TensorError& e : a.update) upd[e.tensor] = e.rel;
    anchors.push_back({{"step", a.step},
                       {"bytes", a.bytes},
                       {"loss_rel", a.loss_rel},
                       {"tolerances", {{"grad", a.tol.grad}, {"loss", a.tol.loss}, {"update", a.tol.update}}},
                       {"grads", grads},
                       {"update", upd}});
  }
  if (!x.anchors.empty()) {
    const JudgeTolerances& t = x.anchors.front().tol;
    v.notes.push_back(
        fmt::format("foreign tolerances (docs/equivalence.md §7): R = {} reductions, K = {}: token {:.3g}, "
                    "loss {:.3g}, gradient {:.3g} (step {}), update {:.3g}, norm {:.3g}",
                    t.reductions, t.longest, t.token, t.loss, t.grad, x.anchors.front().step, t.update, t.norm));
    v.notes.push_back(fmt::format("anchors: {} steps, {} bytes ({} bytes per anchor)", x.anchors.size(), bytes,
                                  bytes / static_cast<int64_t>(x.anchors.size())));
  }
  for (const std::string& n : x.notes) v.notes.push_back(n);
  v.summary = {{"strategy", c.strategy_name},
               {"dp", c.strategy.dp},
               {"tp", c.strategy.tp},
               {"pp", c.strategy.pp},
               {"zero", c.strategy.zero},
               {"steps", c.steps},
               {"world", c.world},
               {"anchors", anchors},
               {"verdict", v.gate.passed() ? "PASS" : "FAIL"}};
  return v;
}

std::vector<std::pair<std::string, std::string>> judge_derived_files(const JudgeVerdict& v, const JudgeContext& x) {
  return {{std::string(evidence::kChecksumsFile), x.assembly.checksums_jsonl},
          {std::string(evidence::kGateFile), v.gate.to_json().dump(2) + "\n"},
          {std::string(evidence::kSummaryFile), v.gate.summary_markdown(v.title, v.notes)},
          {std::string(evidence::kFirstDivergenceFile), v.first_divergence_json().dump(2) + "\n"}};
}

}  // namespace sp::judge
