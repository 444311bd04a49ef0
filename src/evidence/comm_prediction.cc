#include "evidence/comm_prediction.h"

#include <fmt/format.h>

#include "core/json_io.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {

std::string_view step_class_name(bool checksums, bool eval_after) {
  if (checksums) return eval_after ? "step+checksums+eval" : "step+checksums";
  return eval_after ? "step+eval" : "step";
}

std::optional<std::string_view> StepSchedule::class_of(int64_t step) const {
  if (step == -1) return kInitialEvalClass;
  if (step < -1 || step >= steps) return std::nullopt;
  return step_class_name(checksums(step), eval_after(step));
}

nlohmann::json StepSchedule::to_json() const {
  return {{"steps", steps}, {"checksum_every", checksum_every}, {"eval_every", eval_every}};
}

const ClassTraffic* CommPrediction::step(int rank, int64_t s) const {
  static const ClassTraffic kNone;
  const auto r = ranks.find(rank);
  if (r == ranks.end()) return nullptr;
  const std::optional<std::string_view> name = schedule.class_of(s);
  if (!name) return &kNone;
  const auto c = r->second.find(*name);
  return c == r->second.end() ? &kNone : &c->second;
}

Result<CommPrediction> parse_comm_prediction(const nlohmann::json& doc, const std::string& label) {
  constexpr int64_t kMax = int64_t{1} << 62;
  const JsonFields top(doc, label, "document");
  SP_RETURN_IF_ERROR(top.expect_keys({"format_version", "schedule", "ranks"}));
  SP_ASSIGN_OR_RETURN(const int64_t version, top.integer("format_version", 0, kMax));
  if (version != kCommPredictedFormatVersion)
    return corrupt("{}: format_version {} is not the {} this build reads", label, version, kCommPredictedFormatVersion)
        .with_hint("docs/formats/comm_predicted.md; re-run the training with this build to predict again");
  CommPrediction p;
  SP_ASSIGN_OR_RETURN(const nlohmann::json* schedule, top.object("schedule"));
  const JsonFields sf(*schedule, label, "schedule");
  SP_RETURN_IF_ERROR(sf.expect_keys({"steps", "checksum_every", "eval_every"}));
  SP_ASSIGN_OR_RETURN(p.schedule.steps, sf.integer("steps", 1, kMax));
  SP_ASSIGN_OR_RETURN(p.schedule.checksum_every, sf.integer("checksum_every", 0, kMax));
  SP_ASSIGN_OR_RETURN(p.schedule.eval_every, sf.integer("eval_every", 0, kMax));
  SP_ASSIGN_OR_RETURN(const nlohmann::json* ranks, top.array("ranks"));
  for (size_t i = 0; i < ranks->size(); ++i) {
    const std::string where = fmt::format("ranks[{}]", i);
    const JsonFields rf((*ranks)[i], label, where);
    SP_RETURN_IF_ERROR(rf.expect_keys({"rank", "classes"}));
    SP_ASSIGN_OR_RETURN(const int64_t rank, rf.integer("rank", 0, (int64_t{1} << 31) - 1));
    if (p.ranks.count(static_cast<int>(rank))) return rf.error("rank", fmt::format("= {} appears twice", rank));
    auto& classes = p.ranks[static_cast<int>(rank)];
    SP_ASSIGN_OR_RETURN(const nlohmann::json* cls, rf.object("classes"));
    for (std::string_view name : kStepClasses)
      if (!cls->contains(name)) return rf.error("classes", fmt::format("has no class \"{}\"", name));
    for (const auto& [name, groups] : cls->items()) {
      bool known = false;
      for (std::string_view k : kStepClasses) known = known || name == k;
      if (!known) return rf.error("classes", fmt::format("has an unknown class \"{}\"", name.substr(0, 80)));
      const std::string at = fmt::format("{}.classes.{}", where, name);
      if (!groups.is_object()) return corrupt("{}: {} must be an object", label, at);
      ClassTraffic& cells = classes[name];
      for (const auto& [group, phases] : groups.items()) {
        if (!phases.is_object()) return corrupt("{}: {}.{} must be an object", label, at, group.substr(0, 80));
        for (const auto& [phase, cell] : phases.items()) {
          const JsonFields cf(cell, label, fmt::format("{}.{}.{}", at, group.substr(0, 80), phase.substr(0, 80)));
          SP_RETURN_IF_ERROR(cf.expect_keys({"ops", "bytes"}));
          TrafficCell c;
          SP_ASSIGN_OR_RETURN(c.ops, cf.integer("ops", 0, kMax));
          SP_ASSIGN_OR_RETURN(c.bytes, cf.integer("bytes", 0, kMax));
          cells[{group, phase}] = c;
        }
      }
    }
  }
  return p;
}

}  // namespace sp::evidence
