#include "proof/bundle.h"

#include <algorithm>

#include "core/json_io.h"

namespace sp::proof {

using nlohmann::json;

Result<ProofBundle> ProofBundle::open(const std::string& dir) {
  ProofBundle b(dir);
  SP_ASSIGN_OR_RETURN(b.prove_, read_json_file(b.paths_.prove()));
  SP_ASSIGN_OR_RETURN(b.contract_, read_json_file(b.paths_.contract()));
  if (!b.prove_.is_object()) return corrupt("'{}': not a JSON object", b.paths_.prove());
  SP_ASSIGN_OR_RETURN(b.fault_, evidence::parse_fault(b.prove_.value("fault", std::string())));
  b.checkpoint_step_ = b.prove_.value("checkpoint_step", int64_t{0});
  b.world_size_ = b.prove_.value("world_size", 1);
  const auto steps = [&](const char* key, std::vector<int64_t>& out) -> Status {
    if (!b.prove_.contains(key)) return Status();
    const json& v = b.prove_[key];
    if (!v.is_array()) return corrupt("'{}': \"{}\" must be an array of steps", b.paths_.prove(), key);
    for (const json& s : v) {
      if (!s.is_number_integer()) return corrupt("'{}': \"{}\" must be an array of steps", b.paths_.prove(), key);
      out.push_back(s.get<int64_t>());
    }
    return Status();
  };
  SP_RETURN_IF_ERROR(steps("anchors", b.anchors_));
  SP_RETURN_IF_ERROR(steps("fault_anchors", b.fault_anchors_));
  SP_RETURN_IF_ERROR(steps("anchored_evals", b.anchored_evals_));
  return b;
}

const json* ProofBundle::stage(std::string_view name) const {
  if (!prove_.contains("stages") || !prove_["stages"].is_array()) return nullptr;
  for (const json& s : prove_["stages"])
    if (s.is_object() && s.value("name", "") == name) return &s;
  return nullptr;
}

std::vector<json> metrics_records(const evidence::RunPaths& run) {
  auto doc = read_jsonl_file(run.metrics());
  return doc.ok() ? std::move(doc->records) : std::vector<json>{};
}

std::map<int64_t, double> eval_losses(const evidence::RunPaths& run) {
  std::map<int64_t, double> out;
  for (const json& m : metrics_records(run))
    if (m.contains("eval_loss") && m["eval_loss"].is_number() && m.contains("step") && m["step"].is_number_integer())
      out[m["step"].get<int64_t>()] = m["eval_loss"].get<double>();
  return out;
}

std::optional<double> initial_eval(const evidence::RunPaths& run) {
  const auto e = eval_losses(run);
  if (auto it = e.find(-1); it != e.end()) return it->second;
  return std::nullopt;
}

std::optional<double> final_eval(const evidence::RunPaths& run) {
  const auto e = eval_losses(run);
  if (e.empty() || e.rbegin()->first < 0) return std::nullopt;
  return e.rbegin()->second;
}

double median_tokens_per_s(const evidence::RunPaths& run) {
  std::vector<double> v;
  for (const json& m : metrics_records(run))
    if (m.value("step", int64_t{-1}) >= 1 && m.contains("tokens_per_s") && m["tokens_per_s"].is_number())
      v.push_back(m["tokens_per_s"].get<double>());
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace sp::proof
