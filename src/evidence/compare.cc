#include "evidence/compare.h"

#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "core/file_io.h"

namespace sp::evidence {

const char* equivalence_name(Equivalence e) {
  switch (e) {
    case Equivalence::kBitwise: return "bitwise-equal";
    case Equivalence::kWithinTolerance: return "within-tolerance";
    case Equivalence::kDivergent: return "divergent";
  }
  return "?";
}

nlohmann::json Divergence::to_json() const {
  return {{"step", step},          {"phase", phase},         {"tensor", tensor},     {"got_digest", got_digest},
          {"want_digest", want_digest}, {"got", got_l2},     {"want", want_l2},      {"abs_diff", abs_l2},
          {"rel_diff", rel_l2},    {"abs_sum_diff", abs_sum}, {"abs_absmax_diff", abs_absmax},
          {"tolerance", tolerance}};
}

std::string Divergence::to_string() const {
  if (phase == "loss")
    return fmt::format("step {} loss: {:.17g} vs {:.17g} (abs {:.3g}, rel {:.3g}, tolerance {:.3g})", step, got_l2,
                       want_l2, abs_l2, rel_l2, tolerance);
  return fmt::format("step {} {} {}: L2 {:.9g} vs {:.9g} (abs {:.3g}, rel {:.3g}, tolerance {:.3g}); |Δsum| {:.3g}, "
                     "|Δabsmax| {:.3g}; digest {} vs {}",
                     step, phase, tensor, got_l2, want_l2, abs_l2, rel_l2, tolerance, abs_sum, abs_absmax, got_digest,
                     want_digest);
}

nlohmann::json Comparison::to_json() const {
  nlohmann::json j = {{"verdict", equivalence_name(verdict)},
                      {"records", records},
                      {"bitwise_records", bitwise_records},
                      {"max_rel_diff", {{"loss", max_rel_loss}, {"param", max_rel_param},
                                        {"grad_first_step", max_rel_grad_first}, {"grad_later", max_rel_grad_later}}}};
  j["first_mismatch"] = first_mismatch.empty() ? nlohmann::json() : first_mismatch[0].to_json();
  j["first_divergence"] = divergence.empty() ? nlohmann::json() : divergence[0].to_json();
  j["divergent_tensors_per_step"] = nlohmann::json::array();
  for (const auto& [s, n] : divergent_per_step) j["divergent_tensors_per_step"].push_back({{"step", s}, {"tensors", n}});
  return j;
}

Result<std::vector<nlohmann::json>> read_jsonl(const std::string& path) {
  SP_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return corrupt("{}:{}: not a JSON object", path, n);
    out.push_back(std::move(j));
  }
  return out;
}

namespace {
using Key = std::tuple<int64_t, std::string, std::string>;
Status key_of(const nlohmann::json& r, const std::string& path, Key& k) {
  if (!r.contains("step") || !r.contains("phase") || !r.contains("tensor"))
    return corrupt("{}: record without step/phase/tensor: {}", path, r.dump());
  k = {r.at("step").get<int64_t>(), r.at("phase").get<std::string>(), r.at("tensor").get<std::string>()};
  return Status();
}
double num(const nlohmann::json& r, const char* k) {
  return r.contains(k) && r.at(k).is_number() ? r.at(k).get<double>() : std::nan("");
}
}  // namespace

Result<std::vector<RecordDifference>> checksum_differences(const std::string& run, const std::string& reference,
                                                           const Tolerances& tol) {
  SP_ASSIGN_OR_RETURN(auto got, read_jsonl(run));
  SP_ASSIGN_OR_RETURN(auto want, read_jsonl(reference));
  std::map<Key, const nlohmann::json*> ref;
  for (const auto& r : want) {
    Key k;
    SP_RETURN_IF_ERROR(key_of(r, reference, k));
    ref[k] = &r;
  }
  std::vector<RecordDifference> out;
  int64_t first_step = -1;
  for (const auto& r : got) {
    Key k;
    SP_RETURN_IF_ERROR(key_of(r, run, k));
    auto it = ref.find(k);
    if (it == ref.end()) continue;  // records only one side has (e.g. replica) are not compared
    const nlohmann::json& w = *it->second;
    const auto& [step, phase, tensor] = k;
    if (first_step < 0) first_step = step;
    Divergence d;
    d.step = step;
    d.phase = phase;
    d.tensor = tensor;
    bool bitwise;
    if (phase == "loss") {
      bitwise = r.value("bits", "") == w.value("bits", "x");
      d.got_l2 = num(r, "value");
      d.want_l2 = num(w, "value");
      d.tolerance = tol.loss;
    } else {
      bitwise = r.value("digest", "") == w.value("digest", "x");
      d.got_digest = r.value("digest", "");
      d.want_digest = w.value("digest", "");
      d.got_l2 = num(r, "l2");
      d.want_l2 = num(w, "l2");
      d.abs_sum = std::abs(num(r, "sum") - num(w, "sum"));
      d.abs_absmax = std::abs(num(r, "absmax") - num(w, "absmax"));
      d.tolerance = phase == "param" ? tol.param : (step == first_step ? tol.grad_first : tol.grad_later);
    }
    d.abs_l2 = std::abs(d.got_l2 - d.want_l2);
    d.rel_l2 = d.abs_l2 / std::max(std::abs(d.want_l2), 1e-30);
    const bool finite_ok = r.value("finite", true) == w.value("finite", true) && std::isfinite(d.rel_l2);
    const bool within = bitwise || (finite_ok && d.rel_l2 <= d.tolerance);
    out.push_back({.diff = std::move(d), .bitwise = bitwise, .within = within});
  }
  return out;
}

Result<Comparison> compare_checksums(const std::string& run, const std::string& reference, const Tolerances& tol) {
  SP_ASSIGN_OR_RETURN(const std::vector<RecordDifference> records, checksum_differences(run, reference, tol));
  Comparison c;
  const int64_t first_step = records.empty() ? -1 : records.front().diff.step;
  std::map<int64_t, int64_t> per_step;
  for (const RecordDifference& rd : records) {
    const Divergence& d = rd.diff;
    ++c.records;
    if (rd.bitwise) {
      ++c.bitwise_records;
      continue;
    }
    if (c.first_mismatch.empty()) c.first_mismatch.push_back(d);
    double& mx = d.phase == "loss" ? c.max_rel_loss
                 : d.phase == "param" ? c.max_rel_param
                 : d.step == first_step ? c.max_rel_grad_first : c.max_rel_grad_later;
    mx = std::max(mx, std::isfinite(d.rel_l2) ? d.rel_l2 : INFINITY);
    if (!rd.within) {
      ++per_step[d.step];
      if (c.divergence.empty()) c.divergence.push_back(d);
    }
  }
  if (c.records == 0)
    return failed_precondition("'{}' and '{}' have no (step, phase, tensor) records in common", run, reference);
  for (const auto& [s, n] : per_step) c.divergent_per_step.push_back({s, n});
  c.verdict = !c.divergence.empty()          ? Equivalence::kDivergent
              : c.bitwise_records == c.records ? Equivalence::kBitwise
                                               : Equivalence::kWithinTolerance;
  return c;
}

}  // namespace sp::evidence
