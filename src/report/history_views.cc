// The views of a run's history (views.h): curves from metrics.jsonl (loss, eval loss, tokens/s, grad
// norm, learning rate, step time) and checkpoints from checkpoints/ (ckpt::list_checkpoints, each one
// fully re-verified by ckpt::verify_checkpoint, its manifest read for the resume point).
// Invariant: every value is the file's; nothing is smoothed or resampled.
#include <fmt/format.h>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "core/json_io.h"
#include "report/views.h"

namespace sp::report {
namespace {

json number_or_null(const json& record, const char* key) {
  return record.contains(key) && record[key].is_number() ? record[key] : json(nullptr);
}

}  // namespace

View curves_view(const std::vector<RunDir>& runs, const json& marks) {
  View v{.id = "curves", .title = "Curves: loss, eval loss, tokens/s, grad norm"};
  json out = json::array();
  for (const RunDir& run : runs) {
    v.files.push_back(run.label(evidence::kMetricsFile));
    // A stage that crashed may leave a torn last line: the page says so and draws the records before it.
    auto doc = read_jsonl_file(run.paths().metrics(), TornTail::kAllow);
    if (!doc.ok()) {
      v.unreadable(run, evidence::kMetricsFile, doc.status());
      continue;
    }
    if (doc->torn_bytes > 0)
      v.notes.push_back(fmt::format("{}: a torn last line ({} bytes) is not drawn", run.label(evidence::kMetricsFile),
                                    doc->torn_bytes));
    const std::vector<json>& lines = doc->records;
    // Columns, one entry per training step (step ≥ 0) in file order; eval points separately
    // (step −1 is the evaluation before training).
    json step = json::array(), loss = json::array(), grad_norm = json::array(), tokens = json::array(),
         lr = json::array(), step_s = json::array(), compute_s = json::array(), eval = json::array();
    size_t training = 0;
    for (const json& m : lines)
      if (m.contains("step") && m["step"].is_number_integer() && m["step"].get<int64_t>() >= 0 && m.contains("loss"))
        ++training;
    // Long runs keep every k-th step and the last one (docs/report.md §Size).
    const size_t stride = (training + kMaxCurvePoints - 1) / kMaxCurvePoints;
    size_t index = 0;
    for (const json& m : lines) {
      if (!m.contains("step") || !m["step"].is_number_integer()) continue;
      const int64_t s = m["step"].get<int64_t>();
      if (m.contains("eval_loss") && m["eval_loss"].is_number())
        eval.push_back({{"step", s}, {"eval_loss", m["eval_loss"]}});
      if (s < 0 || !m.contains("loss")) continue;
      const size_t i = index++;
      if (stride > 1 && i % stride != 0 && i + 1 != training) continue;
      step.push_back(s);
      loss.push_back(number_or_null(m, "loss"));
      grad_norm.push_back(number_or_null(m, "grad_norm"));
      tokens.push_back(number_or_null(m, "tokens_per_s"));
      lr.push_back(number_or_null(m, "lr"));
      step_s.push_back(number_or_null(m, "step_s"));
      compute_s.push_back(number_or_null(m, "compute_s"));
    }
    out.push_back({{"run", run.name},
                   {"file", run.label(evidence::kMetricsFile)},
                   {"every_kth_step", std::max<size_t>(stride, 1)},
                   {"step", step},
                   {"loss", loss},
                   {"grad_norm", grad_norm},
                   {"tokens_per_s", tokens},
                   {"lr", lr},
                   {"step_s", step_s},
                   {"compute_s", compute_s},
                   {"eval", eval}});
  }
  if (!out.empty()) v.data = {{"runs", out}, {"marks", marks}};
  return v;
}

View checkpoints_view(const std::vector<RunDir>& runs, const json& resume) {
  View v{.id = "checkpoints", .title = "Checkpoints: verification and resume point"};
  json out = json::array();
  for (const RunDir& run : runs) {
    v.files.push_back(run.dir_label(evidence::kCheckpointsDir));
    const ckpt::CheckpointPaths paths = run.paths().checkpoints();
    auto listing = ckpt::list_checkpoints(paths);
    if (!listing.ok()) {
      v.unreadable(run, evidence::kCheckpointsDir, listing.status());
      continue;
    }
    json list = json::array();
    for (int64_t s : listing->steps) {
      const Status st = ckpt::verify_checkpoint(paths, s);
      json c = {{"step", s}, {"verified", st.ok()}, {"problem", st.ok() ? "" : st.message()}};
      if (auto m = ckpt::read_manifest(paths, s); m.ok()) {
        c["shards"] = m->shards.size();
        c["bytes"] = m->total_bytes();
        c["optimizer_steps"] = m->optimizer_steps;
      }
      list.push_back(std::move(c));
    }
    json latest = nullptr;
    if (auto l = ckpt::read_latest(paths); l.ok()) latest = l->step;
    out.push_back({{"run", run.name},
                   {"dir", run.dir_label(evidence::kCheckpointsDir)},
                   {"latest", latest},
                   {"checkpoints", list},
                   {"leftovers", listing->leftovers},
                   {"refused", listing->refused},
                   {"unknown", listing->unknown}});
  }
  if (!out.empty()) v.data = {{"runs", out}, {"resume", resume}};
  return v;
}

}  // namespace sp::report
