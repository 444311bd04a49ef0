#include "evidence/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>

#include "core/json_io.h"
#include "evidence/checksums.h"

namespace sp::evidence {
namespace {

constexpr size_t kListed = 5;         // problems named in full; the rest are counted
constexpr double kSlack = 1 + 1e-12;  // rounding of the recorded doubles themselves

bool is_hex(const std::string& s, size_t digits) {
  return s.size() == digits &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A number, or NaN for null (how non-finite statistics are written).
Result<double> number_or_null(const JsonFields& f, const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return f.error(key, "is missing");
  if (it->is_null()) return std::nan("");
  if (!it->is_number()) return f.error(key, fmt::format("must be a number or null, got {}", it->type_name()));
  return it->get<double>();
}

Result<ChecksumRecord> checksum_record_from(const nlohmann::json& j, const std::string& where) {
  const JsonFields f(j, where, "record");
  ChecksumRecord r;
  SP_ASSIGN_OR_RETURN(r.key.step, f.integer("step", 0, int64_t{1} << 50));
  SP_ASSIGN_OR_RETURN(r.key.phase, f.string("phase"));
  SP_ASSIGN_OR_RETURN(r.key.tensor, f.string("tensor"));
  if (r.key.phase == "loss") {
    SP_RETURN_IF_ERROR(f.expect_keys({"step", "phase", "tensor", "value", "bits"}));
    SP_ASSIGN_OR_RETURN(r.value, number_or_null(f, j, "value"));
    SP_ASSIGN_OR_RETURN(r.bits, f.string("bits"));
    if (!is_hex(r.bits, 16)) return f.error("bits", "must be 16 lowercase hex digits");
    // The bits are the float64 pattern of the value (NaN is written as null and keeps only its bits).
    if (!std::isnan(r.value) && fmt::format("{:016x}", std::bit_cast<uint64_t>(r.value)) != r.bits)
      return f.error("bits", fmt::format("= {} is not the bit pattern of value {:.17g}", r.bits, r.value));
    return r;
  }
  if (r.key.phase == kScalerPhase) {
    SP_RETURN_IF_ERROR(f.expect_keys({"step", "phase", "tensor", "scale", "skipped"}));
    if (r.key.tensor != kScalerTensor) return f.error("tensor", fmt::format("must be \"{}\"", kScalerTensor));
    const auto scale = j.find("scale");
    if (!scale->is_number() || !(scale->get<double>() > 0) || !std::isfinite(scale->get<double>()))
      return f.error("scale", "must be a finite positive number (the loss scale)");
    r.scale = scale->get<double>();
    if (!j.at("skipped").is_boolean()) return f.error("skipped", "must be true or false");
    r.skipped = j.at("skipped").get<bool>();
    return r;
  }
  if (r.key.phase != "grad" && r.key.phase != "param")
    return f.error("phase", fmt::format("= '{}' is not loss, scaler, grad or param", r.key.phase));
  SP_RETURN_IF_ERROR(f.expect_keys(
      {"step", "phase", "tensor", "numel", "digest", "l2", "sum", "absmax", "finite", "nonfinite", "count"}));
  SP_ASSIGN_OR_RETURN(r.numel, f.integer("numel", 1, int64_t{1} << 50));
  SP_ASSIGN_OR_RETURN(r.count, f.integer("count", 0, int64_t{1} << 50));
  SP_ASSIGN_OR_RETURN(r.nonfinite, f.integer("nonfinite", 0, int64_t{1} << 50));
  SP_ASSIGN_OR_RETURN(r.digest, f.string("digest"));
  SP_ASSIGN_OR_RETURN(r.l2, number_or_null(f, j, "l2"));
  SP_ASSIGN_OR_RETURN(r.sum, number_or_null(f, j, "sum"));
  SP_ASSIGN_OR_RETURN(r.absmax, number_or_null(f, j, "absmax"));
  if (!j.at("finite").is_boolean()) return f.error("finite", "must be true or false");
  r.finite = j.at("finite").get<bool>();
  // Internal consistency: what any honest writer produces (docs/formats/checksums.md).
  if (!is_hex(r.digest, 32)) return f.error("digest", "must be 32 lowercase hex digits");
  if (r.count != r.numel)
    return f.error("count", fmt::format("= {} ≠ numel = {}: not every element was counted once", r.count, r.numel));
  if (r.finite != (r.nonfinite == 0))
    return f.error("finite", fmt::format("= {} contradicts nonfinite = {}", r.finite, r.nonfinite));
  if (r.finite) {
    const double rn = std::sqrt(static_cast<double>(r.numel));
    if (!(r.l2 >= 0) || !(r.absmax >= 0) || !std::isfinite(r.sum))
      return f.error("l2", "finite data needs a non-negative l2 and absmax and a finite sum");
    if (r.absmax > r.l2 * kSlack) return f.error("absmax", fmt::format("= {:.9g} exceeds l2 = {:.9g}", r.absmax, r.l2));
    if (r.l2 > rn * r.absmax * kSlack)
      return f.error("l2", fmt::format("= {:.9g} exceeds √numel·absmax = {:.9g}", r.l2, rn * r.absmax));
    if (std::fabs(r.sum) > rn * r.l2 * kSlack)
      return f.error("sum", fmt::format("= {:.9g} exceeds √numel·l2 = {:.9g} in magnitude", r.sum, rn * r.l2));
  }
  return r;
}

bool bits_equal(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// Two records with the same digest (or loss bits) must agree on every statistic.
std::string same_digest_contradiction(const ChecksumRecord& a, const ChecksumRecord& b) {
  if (a.key.phase == "loss")
    return bits_equal(a.value, b.value) || (std::isnan(a.value) && std::isnan(b.value)) ? "" : "value";
  if (a.numel != b.numel) return "numel";
  if (a.count != b.count) return "count";
  if (a.nonfinite != b.nonfinite || a.finite != b.finite) return "nonfinite";
  const std::initializer_list<std::tuple<const char*, double, double>> stats = {
      {"l2", a.l2, b.l2}, {"sum", a.sum, b.sum}, {"absmax", a.absmax, b.absmax}};
  for (const auto& [name, x, y] : stats)
    if (!bits_equal(x, y) && !(std::isnan(x) && std::isnan(y))) return name;
  return "";
}

void note(Comparison& c, std::string problem) {
  if (c.problems.size() < kListed) c.problems.push_back(std::move(problem));
  ++c.problem_count;
}

// Every expected key exactly once in `records` (or, without an expected list, the keys of `other`).
void check_coverage(const std::vector<ChecksumRecord>& records, const std::string& path,
                    const std::set<RecordKey>& expected, bool require_complete, Comparison& c) {
  std::set<RecordKey> seen;
  for (const ChecksumRecord& r : records) {
    if (!seen.insert(r.key).second)
      note(c, fmt::format("{}: {} appears twice", path, r.key.to_string()));
    else if (!expected.count(r.key))
      note(c, fmt::format("{}: {} is not expected by the contract", path, r.key.to_string()));
  }
  if (!require_complete) return;
  int64_t missing = 0;
  const RecordKey* first = nullptr;
  for (const RecordKey& k : expected)
    if (!seen.count(k) && missing++ == 0) first = &k;
  if (missing > 0)
    note(c, fmt::format("{}: {} of {} expected records missing, the first {}", path, missing, expected.size(),
                        first->to_string()));
}

// A loss scaler record (fp16): exact in every class and topology. Every rank's scaler saw the same
// overflow verdict, so a different scale or skip is out of class whatever the promise; its relative
// difference (of the scales) adds to the drift.
void judge_scaler(const ChecksumRecord& r, const ChecksumRecord& w, bool judged, Divergence& d, Comparison& c,
                  std::map<int64_t, int64_t>& per_step, std::map<int64_t, double>& drift, bool keep_records) {
  d.got_l2 = r.scale;
  d.want_l2 = w.scale;
  d.abs_l2 = std::abs(r.scale - w.scale);
  d.rel_l2 = d.abs_l2 / w.scale;
  const bool equal = bits_equal(r.scale, w.scale) && r.skipped == w.skipped;
  double& dr = drift[d.step];
  dr = std::max(dr, d.rel_l2);
  if (equal) {
    if (judged) ++c.bitwise_records;
    if (keep_records) c.record_differences.push_back({.diff = d, .bitwise = true, .judged = judged});
    return;
  }
  if (judged) {
    d.reason = r.skipped != w.skipped
                   ? fmt::format("the loss scaler {} this step and the reference's {}",
                                 r.skipped ? "skipped" : "applied", w.skipped ? "skipped it" : "applied it")
                   : fmt::format("loss scale {:.17g} ≠ {:.17g} (exact in every topology)", r.scale, w.scale);
    if (c.first_mismatch.empty()) c.first_mismatch.push_back(d);
    ++per_step[d.step];
    if (c.divergence.empty()) c.divergence.push_back(d);
  }
  if (keep_records) c.record_differences.push_back({.diff = d, .bitwise = false, .judged = judged});
}

}  // namespace

const char* equivalence_name(Equivalence e) {
  switch (e) {
    case Equivalence::kBitwise:
      return "bitwise-equal";
    case Equivalence::kWithinTolerance:
      return "within-tolerance";
    case Equivalence::kDivergent:
      return "divergent";
    case Equivalence::kIncomplete:
      return "incomplete";
    case Equivalence::kDivergentByDesign:
      return "divergent-by-design";
  }
  return "?";
}

std::string RecordKey::to_string() const {
  if (phase == "loss") return fmt::format("step {} loss", step);
  if (phase == kScalerPhase) return fmt::format("step {} loss scaler", step);
  return fmt::format("step {} {} {}", step, phase, tensor);
}

Result<std::vector<ChecksumRecord>> read_checksums(const std::string& path) {
  SP_ASSIGN_OR_RETURN(const JsonlDocument doc, read_jsonl_file(path));
  std::vector<ChecksumRecord> out;
  out.reserve(doc.records.size());
  for (size_t i = 0; i < doc.records.size(); ++i) {
    SP_ASSIGN_OR_RETURN(ChecksumRecord r,
                        checksum_record_from(doc.records[i], fmt::format("{}:{}", path, doc.line_numbers[i])));
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json Divergence::to_json() const {
  return {{"step", step},
          {"phase", phase},
          {"tensor", tensor},
          {"got_digest", got_digest},
          {"want_digest", want_digest},
          {"got", got_l2},
          {"want", want_l2},
          {"abs_diff", abs_l2},
          {"rel_diff", rel_l2},
          {"abs_sum_diff", abs_sum},
          {"abs_absmax_diff", abs_absmax},
          {"tolerance", tolerance},
          {"reason", reason}};
}

std::string Divergence::to_string() const {
  if (phase == kScalerPhase)
    return fmt::format("step {} loss scaler: scale {:.17g} vs {:.17g}{}", step, got_l2, want_l2,
                       reason.empty() ? "" : "; " + reason);
  if (phase == "loss")
    return fmt::format("step {} loss: {:.17g} vs {:.17g} (abs {:.3g}, rel {:.3g}, tolerance {:.3g}){}", step, got_l2,
                       want_l2, abs_l2, rel_l2, tolerance, reason.empty() ? "" : "; " + reason);
  return fmt::format(
      "step {} {} {}: L2 {:.9g} vs {:.9g} (abs {:.3g}, rel {:.3g}, tolerance {:.3g}); |Δsum| {:.3g}, "
      "|Δabsmax| {:.3g}; digest {} vs {}{}",
      step, phase, tensor, got_l2, want_l2, abs_l2, rel_l2, tolerance, abs_sum, abs_absmax, got_digest, want_digest,
      reason.empty() ? "" : "; " + reason);
}

std::string Comparison::describe() const {
  if (verdict == Equivalence::kIncomplete)
    return fmt::format("incomplete ({} problem(s) in {} expected records: {})", problem_count, expected,
                       problems.empty() ? "" : problems.front());
  std::string s = fmt::format("{} ({} of {} records bitwise; max rel. loss {:.2g}, params {:.2g}, grads {:.2g}/{:.2g})",
                              equivalence_name(verdict), bitwise_records, records, max_rel_loss, max_rel_param,
                              max_rel_grad_first, max_rel_grad_later);
  if (verdict == Equivalence::kDivergent && promised == Equivalence::kBitwise && !divergence.empty() &&
      divergence.front().reason.starts_with("promised"))
    s += "; the contract promises bitwise";
  return s;
}

nlohmann::json Comparison::to_json() const {
  nlohmann::json j = {{"verdict", equivalence_name(verdict)},
                      {"promised", equivalence_name(promised)},
                      {"expected", expected},
                      {"records", records},
                      {"bitwise_records", bitwise_records},
                      {"problems", problems},
                      {"problem_count", problem_count},
                      {"max_rel_diff",
                       {{"loss", max_rel_loss},
                        {"param", max_rel_param},
                        {"grad_first_step", max_rel_grad_first},
                        {"grad_later", max_rel_grad_later}}}};
  j["first_mismatch"] = first_mismatch.empty() ? nlohmann::json() : first_mismatch[0].to_json();
  j["first_divergence"] = divergence.empty() ? nlohmann::json() : divergence[0].to_json();
  j["divergent_records_per_step"] = nlohmann::json::array();
  for (const auto& [s, n] : divergent_per_step)
    j["divergent_records_per_step"].push_back({{"step", s}, {"records", n}});
  j["drift_per_step"] = nlohmann::json::array();
  for (const auto& [s, d] : drift_per_step)
    j["drift_per_step"].push_back(
        {{"step", s}, {"max_rel_diff", std::isfinite(d) ? nlohmann::json(d) : nlohmann::json()}});
  return j;
}

namespace {

// A record that is not bitwise: its L2 (the loss itself for "loss") against the reference's, the tolerance of its
// kind (a gradient of the first compared step, or of an anchored replay, has the first-step tolerance), and the
// sum and absmax differences.
void measure_difference(const ChecksumRecord& r, const ChecksumRecord& w, const Tolerances& tol, bool first_grad,
                        Divergence& d) {
  const bool loss = d.phase == "loss";
  d.got_digest = r.digest;
  d.want_digest = w.digest;
  d.got_l2 = loss ? r.value : r.l2;
  d.want_l2 = loss ? w.value : w.l2;
  d.abs_l2 = std::abs(d.got_l2 - d.want_l2);
  d.rel_l2 = d.abs_l2 / std::max(std::abs(d.want_l2), 1e-30);
  d.tolerance = loss ? tol.loss : d.phase == "param" ? tol.param : first_grad ? tol.grad_first : tol.grad_later;
  if (!loss) {
    d.abs_sum = std::abs(r.sum - w.sum);
    d.abs_absmax = std::abs(r.absmax - w.absmax);
  }
}

// Which statistic leaves the class (‖Δx‖₂ ≤ tol·‖x‖₂ bounds each; see the header); "" when none does.
std::string out_of_class_reason(const ChecksumRecord& r, const ChecksumRecord& w, const Divergence& d) {
  const double bound = d.tolerance * std::abs(d.want_l2);
  if (d.phase == "loss")
    return std::isnan(r.value) != std::isnan(w.value) || !(d.abs_l2 <= bound) ? "loss outside tolerance" : "";
  if (r.numel != w.numel || r.count != w.count) return "numel or count differs";
  if (r.nonfinite != w.nonfinite) return fmt::format("{} non-finite values vs {}", r.nonfinite, w.nonfinite);
  if (!(d.abs_l2 <= bound)) return "L2 outside tolerance";
  if (!(d.abs_absmax <= bound)) return "absmax outside tolerance";
  if (!(d.abs_sum <= bound * std::sqrt(static_cast<double>(r.numel)))) return "sum outside tolerance";
  return "";
}

// Incomplete (a problem, or nothing in common), divergent, bitwise or within tolerance.
void set_verdict(const std::string& run, const std::string& reference, Comparison& c) {
  if (c.problem_count > 0) {
    c.verdict = Equivalence::kIncomplete;
  } else if (c.records == 0) {
    note(c, fmt::format("'{}' and '{}' have no (step, phase, tensor) records in common", run, reference));
    c.verdict = Equivalence::kIncomplete;
  } else {
    c.verdict = !c.divergence.empty()            ? Equivalence::kDivergent
                : c.bitwise_records == c.records ? Equivalence::kBitwise
                                                 : Equivalence::kWithinTolerance;
  }
}

}  // namespace

Result<Comparison> compare_checksums(const std::string& run, const std::string& reference, const CompareSpec& spec) {
  SP_ASSIGN_OR_RETURN(const std::vector<ChecksumRecord> got, read_checksums(run));
  SP_ASSIGN_OR_RETURN(const std::vector<ChecksumRecord> want, read_checksums(reference));
  Comparison c;
  c.promised = spec.promised;
  std::set<RecordKey> expected(spec.expected.begin(), spec.expected.end());
  if (expected.empty())
    for (const ChecksumRecord& r : want) expected.insert(r.key);
  std::set<RecordKey> reference_expected(spec.reference_expected.begin(), spec.reference_expected.end());
  if (reference_expected.empty()) reference_expected = expected;
  c.expected = static_cast<int64_t>(expected.size());
  check_coverage(got, run, expected, spec.require_complete, c);
  check_coverage(want, reference, reference_expected, true, c);
  std::map<RecordKey, const ChecksumRecord*> ref;
  for (const ChecksumRecord& r : want) ref.emplace(r.key, &r);

  const Tolerances& tol = spec.tol;
  int64_t first_step = -1;
  std::map<int64_t, int64_t> per_step;
  std::map<int64_t, double> drift;
  const std::set<int64_t> judged_steps(spec.judged_steps.begin(), spec.judged_steps.end());
  for (const ChecksumRecord& r : got) {
    auto it = ref.find(r.key);
    if (it == ref.end()) continue;  // reported by check_coverage
    const ChecksumRecord& w = *it->second;
    const auto& [step, phase, tensor] = r.key;
    if (first_step < 0) first_step = step;
    const bool judged = judged_steps.empty() || judged_steps.count(step) > 0;
    if (judged) ++c.records;
    Divergence d;
    d.step = step;
    d.phase = phase;
    d.tensor = tensor;
    if (phase == kScalerPhase) {  // exact in every class: the same overflow verdicts, the same scales
      judge_scaler(r, w, judged, d, c, per_step, drift, spec.keep_records);
      continue;
    }
    const bool loss = phase == "loss";
    const bool bitwise = loss ? r.bits == w.bits : r.digest == w.digest;
    if (bitwise) {
      if (const std::string field = same_digest_contradiction(r, w); !field.empty()) {
        note(c, fmt::format("{}: equal {} but different {}: a record was edited", r.key.to_string(),
                            loss ? "bits" : "digests", field));
        continue;
      }
      if (judged) ++c.bitwise_records;
      drift.emplace(step, 0.0);
      if (spec.keep_records) c.record_differences.push_back({.diff = d, .bitwise = true, .judged = judged});
      continue;
    }
    measure_difference(r, w, tol, spec.anchored || step == first_step, d);
    double& dr = drift[step];
    dr = std::max(dr, std::isfinite(d.rel_l2) ? d.rel_l2 : INFINITY);
    if (!std::isfinite(d.rel_l2) || d.rel_l2 > c.max_drift.rel_l2) c.max_drift = d;
    if (loss) c.max_loss_drift = std::max(c.max_loss_drift, std::isfinite(d.rel_l2) ? d.rel_l2 : INFINITY);
    if (!judged) {
      if (spec.keep_records) c.record_differences.push_back({.diff = d, .bitwise = false, .judged = false});
      continue;
    }
    double& mx = loss                                    ? c.max_rel_loss
                 : phase == "param"                      ? c.max_rel_param
                 : (spec.anchored || step == first_step) ? c.max_rel_grad_first
                                                         : c.max_rel_grad_later;
    mx = std::max(mx, std::isfinite(d.rel_l2) ? d.rel_l2 : INFINITY);
    d.reason = out_of_class_reason(r, w, d);
    if (c.first_mismatch.empty()) c.first_mismatch.push_back(d);
    if (spec.promised == Equivalence::kBitwise && d.reason.empty())
      d.reason = fmt::format("promised bitwise: {} differs", loss ? "the loss bit pattern" : "the digest");
    if (!d.reason.empty()) {
      ++per_step[step];
      if (c.divergence.empty()) c.divergence.push_back(d);
    }
    if (spec.keep_records) c.record_differences.push_back({.diff = d, .bitwise = false, .judged = true});
  }
  for (const auto& [s, n] : per_step) c.divergent_per_step.push_back({s, n});
  for (const auto& [s, v] : drift) c.drift_per_step.push_back({s, v});
  set_verdict(run, reference, c);
  return c;
}

}  // namespace sp::evidence
