// A StepResult as one line of judge/steps.jsonl (context.h): everything a view reads of a step, so that a step
// judged as it came (`judge --follow`, whose gradients were then discarded) is judged again from this line, and
// each view's ratio to its tolerance per tensor (the report's map). Non-finite numbers are "inf", "-inf", "nan".
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/json_io.h"
#include "judge/context.h"

namespace sp::judge {
using json = nlohmann::json;
namespace {

json json_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

Result<double> read_number(const JsonFields& f, const json& j, std::string_view key) {
  const json& v = j.at(key);
  if (v.is_number()) return v.get<double>();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  return f.error(key, "must be a number (or \"nan\", \"inf\", \"-inf\")");
}

json errors_json(const std::vector<TensorError>& v) {
  json out = json::array();
  for (const TensorError& e : v)
    out.push_back({{"tensor", e.tensor},
                   {"rel", json_number(e.rel)},
                   {"bitwise", e.bitwise},
                   {"ranks", e.ranks},
                   {"nonfinite", e.nonfinite},
                   {"nonzero", e.nonzero},
                   {"sixteen", e.sixteen}});
  return out;
}

Status errors_from(const JsonFields& f, const json& j, std::string_view key, const std::string& where,
                   std::vector<TensorError>& out) {
  SP_ASSIGN_OR_RETURN(const json* a, f.array(key));
  for (const json& e : *a) {
    const JsonFields ef(e, where, std::string(key));
    SP_RETURN_IF_ERROR(ef.expect_keys({"tensor", "rel", "bitwise", "ranks", "nonfinite", "nonzero", "sixteen"}));
    TensorError t;
    SP_ASSIGN_OR_RETURN(t.tensor, ef.string("tensor"));
    SP_ASSIGN_OR_RETURN(t.rel, read_number(ef, e, "rel"));
    if (!e.at("bitwise").is_boolean()) return ef.error("bitwise", "must be true or false");
    t.bitwise = e.at("bitwise").get<bool>();
    SP_ASSIGN_OR_RETURN(const json* ranks, ef.array("ranks"));
    for (const json& r : *ranks) {
      if (!r.is_number_integer()) return ef.error("ranks", "must list ranks");
      t.ranks.push_back(r.get<int>());
    }
    SP_ASSIGN_OR_RETURN(t.nonfinite, ef.integer("nonfinite", 0, int64_t{1} << 62));
    SP_ASSIGN_OR_RETURN(t.nonzero, ef.integer("nonzero", 0, int64_t{1} << 62));
    SP_ASSIGN_OR_RETURN(t.sixteen, ef.integer("sixteen", 0, t.nonzero));
    out.push_back(std::move(t));
  }
  (void)j;
  return Status();
}

Result<std::vector<std::string>> strings(const JsonFields& f, std::string_view key) {
  SP_ASSIGN_OR_RETURN(const json* a, f.array(key));
  std::vector<std::string> out;
  for (const json& s : *a) {
    if (!s.is_string()) return f.error(key, "must list strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

Status probe_from(const JsonFields& f, const std::string& where, ProbeCheck& p) {
  SP_ASSIGN_OR_RETURN(const json* o, f.object("probe"));
  const JsonFields pf(*o, where, "probe");
  SP_RETURN_IF_ERROR(pf.expect_keys(
      {"recorded", "rank", "elements", "flips", "boundary", "wrong", "expected", "threshold", "first_wrong"}));
  if (!o->at("recorded").is_boolean()) return pf.error("recorded", "must be true or false");
  p.recorded = o->at("recorded").get<bool>();
  SP_ASSIGN_OR_RETURN(const int64_t rank, pf.integer("rank", -1, 1 << 20));
  p.rank = static_cast<int>(rank);
  SP_ASSIGN_OR_RETURN(p.elements, pf.integer("elements", 0, int64_t{1} << 40));
  SP_ASSIGN_OR_RETURN(p.flips, pf.integer("flips", 0, p.elements));
  SP_ASSIGN_OR_RETURN(p.boundary, pf.integer("boundary", 0, p.elements));
  SP_ASSIGN_OR_RETURN(p.wrong, pf.integer("wrong", 0, p.elements));
  SP_ASSIGN_OR_RETURN(p.expected, read_number(pf, *o, "expected"));
  SP_ASSIGN_OR_RETURN(p.threshold, read_number(pf, *o, "threshold"));
  SP_ASSIGN_OR_RETURN(p.first_wrong, pf.string("first_wrong"));
  return Status();
}

}  // namespace

json step_result_json(const StepResult& s) {
  json ratios = {{"gradients", json::object()}, {"update", json::object()}};
  for (const TensorError& e : s.grads)
    ratios["gradients"][e.tensor] = json_number(e.nonfinite > 0 ? INFINITY : e.rel / s.tol.grad);
  for (const TensorError& e : s.update)
    ratios["update"][e.tensor] = json_number(e.bitwise ? 0.0 : (e.rel > 0 ? e.rel / s.tol.update : INFINITY));
  const JudgeTolerances& t = s.tol;
  return {{"step", s.step},
          {"checked", s.checked},
          {"overflow", s.overflow},
          {"unchecked", s.unchecked},
          {"tolerances",
           {{"token", t.token},
            {"loss", t.loss},
            {"grad", t.grad},
            {"update", t.update},
            {"norm", t.norm},
            {"semantics", t.semantics},
            {"reductions", t.reductions},
            {"longest", t.longest},
            {"rounding_points", t.rounding_points}}},
          {"bytes", s.bytes},
          {"files", s.files},
          {"loss_run", json_number(s.loss_run)},
          {"loss_ref", json_number(s.loss_ref)},
          {"loss_rel", json_number(s.loss_rel)},
          {"worst_micro_batch", s.worst_micro_batch},
          {"worst_micro_batch_rel", json_number(s.worst_micro_batch_rel)},
          {"worst_micro_batch_rank", s.worst_micro_batch_rank},
          {"coefficient", json_number(s.coefficient)},
          {"grads", errors_json(s.grads)},
          {"update", errors_json(s.update)},
          {"disagreements", s.disagreements},
          {"grad_pattern", s.grad_pattern},
          {"update_pattern", s.update_pattern},
          {"resume_mismatch", s.resume_mismatch},
          {"probe",
           {{"recorded", s.probe.recorded},
            {"rank", s.probe.rank},
            {"elements", s.probe.elements},
            {"flips", s.probe.flips},
            {"boundary", s.probe.boundary},
            {"wrong", s.probe.wrong},
            {"expected", s.probe.expected},
            {"threshold", s.probe.threshold},
            {"first_wrong", s.probe.first_wrong}}},
          {"loss", s.checked ? json_number(std::max(s.loss_rel, s.worst_micro_batch_rel) / s.tol.loss) : json(nullptr)},
          {"ratios", ratios}};
}

Result<StepResult> step_result_from_json(const json& j, const std::string& where) {
  const JsonFields f(j, where, "step");
  SP_RETURN_IF_ERROR(f.expect_keys({"step",
                                    "checked",
                                    "overflow",
                                    "unchecked",
                                    "tolerances",
                                    "bytes",
                                    "files",
                                    "loss_run",
                                    "loss_ref",
                                    "loss_rel",
                                    "worst_micro_batch",
                                    "worst_micro_batch_rel",
                                    "worst_micro_batch_rank",
                                    "coefficient",
                                    "grads",
                                    "update",
                                    "disagreements",
                                    "grad_pattern",
                                    "update_pattern",
                                    "resume_mismatch",
                                    "probe",
                                    "loss",
                                    "ratios"}));
  StepResult s;
  SP_ASSIGN_OR_RETURN(s.step, f.integer("step", 0, int64_t{1} << 40));
  if (!j.at("checked").is_boolean()) return f.error("checked", "must be true or false");
  s.checked = j.at("checked").get<bool>();
  if (!j.at("overflow").is_boolean()) return f.error("overflow", "must be true or false");
  s.overflow = j.at("overflow").get<bool>();
  SP_ASSIGN_OR_RETURN(s.unchecked, f.string("unchecked"));
  SP_ASSIGN_OR_RETURN(const json* tol, f.object("tolerances"));
  const JsonFields tf(*tol, where, "tolerances");
  SP_RETURN_IF_ERROR(tf.expect_keys(
      {"token", "loss", "grad", "update", "norm", "semantics", "reductions", "longest", "rounding_points"}));
  SP_ASSIGN_OR_RETURN(s.tol.token, read_number(tf, *tol, "token"));
  SP_ASSIGN_OR_RETURN(s.tol.loss, read_number(tf, *tol, "loss"));
  SP_ASSIGN_OR_RETURN(s.tol.grad, read_number(tf, *tol, "grad"));
  SP_ASSIGN_OR_RETURN(s.tol.update, read_number(tf, *tol, "update"));
  SP_ASSIGN_OR_RETURN(s.tol.norm, read_number(tf, *tol, "norm"));
  SP_ASSIGN_OR_RETURN(s.tol.semantics, read_number(tf, *tol, "semantics"));
  SP_ASSIGN_OR_RETURN(s.tol.reductions, tf.integer("reductions", 0, int64_t{1} << 40));
  SP_ASSIGN_OR_RETURN(s.tol.longest, tf.integer("longest", 0, int64_t{1} << 40));
  SP_ASSIGN_OR_RETURN(s.tol.rounding_points, tf.integer("rounding_points", 0, int64_t{1} << 40));
  SP_ASSIGN_OR_RETURN(s.bytes, f.integer("bytes", 0, int64_t{1} << 62));
  SP_ASSIGN_OR_RETURN(const int64_t files, f.integer("files", 0, 1 << 30));
  s.files = static_cast<int>(files);
  SP_ASSIGN_OR_RETURN(s.loss_run, read_number(f, j, "loss_run"));
  SP_ASSIGN_OR_RETURN(s.loss_ref, read_number(f, j, "loss_ref"));
  SP_ASSIGN_OR_RETURN(s.loss_rel, read_number(f, j, "loss_rel"));
  SP_ASSIGN_OR_RETURN(s.worst_micro_batch, f.integer("worst_micro_batch", -1, int64_t{1} << 40));
  SP_ASSIGN_OR_RETURN(s.worst_micro_batch_rel, read_number(f, j, "worst_micro_batch_rel"));
  SP_ASSIGN_OR_RETURN(const int64_t wr, f.integer("worst_micro_batch_rank", -1, 1 << 20));
  s.worst_micro_batch_rank = static_cast<int>(wr);
  SP_ASSIGN_OR_RETURN(s.coefficient, read_number(f, j, "coefficient"));
  SP_RETURN_IF_ERROR(errors_from(f, j, "grads", where, s.grads));
  SP_RETURN_IF_ERROR(errors_from(f, j, "update", where, s.update));
  SP_ASSIGN_OR_RETURN(s.disagreements, strings(f, "disagreements"));
  SP_ASSIGN_OR_RETURN(s.grad_pattern, f.string("grad_pattern"));
  SP_ASSIGN_OR_RETURN(s.update_pattern, f.string("update_pattern"));
  SP_ASSIGN_OR_RETURN(s.resume_mismatch, strings(f, "resume_mismatch"));
  SP_RETURN_IF_ERROR(probe_from(f, where, s.probe));
  return s;
}

}  // namespace sp::judge
