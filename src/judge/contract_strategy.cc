#include "judge/contract_strategy.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace sp::judge {
using json = nlohmann::json;

// strategy.units: [{"tensors": [HF names], "reshard_after_forward": bool}] (FSDP2's fully_shard units, ZeRO 2 or 3);
// the names are checked against the model's where the traffic model reads them (judge/context.cc).
Result<std::vector<ShardingUnit>> units_of(const JsonFields& sf, const json& v, int zero) {
  if (!v.is_array() || v.empty())
    return sf.error("units", "must be a non-empty array of {\"tensors\": [names], \"reshard_after_forward\": bool}");
  if (zero < 2)
    return sf.error("units", fmt::format("are FSDP2's (ZeRO 2 or 3), but the strategy declares zero = {}", zero));
  std::vector<ShardingUnit> out;
  for (const json& u : v) {
    const JsonFields uf(u, "", "strategy.units[]");
    SP_RETURN_IF_ERROR(uf.expect_keys({"tensors", "reshard_after_forward"}));
    ShardingUnit unit;
    if (!u.at("reshard_after_forward").is_boolean()) return uf.error("reshard_after_forward", "must be true or false");
    unit.reshard_after_forward = u.at("reshard_after_forward").get<bool>();
    SP_ASSIGN_OR_RETURN(const json* names, uf.array("tensors"));
    for (const json& n : *names) {
      if (!n.is_string()) return uf.error("tensors", "must list HF tensor names");
      unit.tensors.push_back(n.get<std::string>());
    }
    out.push_back(std::move(unit));
  }
  return out;
}

// strategy.deepspeed: DeepSpeed's ZeRO config values (judge/recording.h DeepSpeedZero), ZeRO 1 to 3; the group names
// are checked against the model's where the traffic model reads them (judge/context.cc).
Result<DeepSpeedZero> deepspeed_of(const JsonFields& sf, const json& v, int zero) {
  if (!v.is_object()) return sf.error("deepspeed", "must be an object of DeepSpeed's ZeRO config values");
  if (zero < 1) return sf.error("deepspeed", "is DeepSpeed's ZeRO config, but the strategy declares zero = 0");
  const JsonFields df(v, "", "strategy.deepspeed");
  const auto common = {
      "gradient_accumulation_steps", "reduce_bucket_size", "allgather_bucket_size",           "overlap_comm",
      "contiguous_gradients",        "reduce_scatter",     "use_multi_rank_bucket_allreduce", "allgather_partitions",
      "parameter_alignment"};
  std::vector<std::string_view> keys(common.begin(), common.end());
  if (zero < 3)
    keys.push_back("groups");
  else
    for (const char* k :
         {"prefetch_bucket_size", "max_live_parameters", "max_reuse_distance", "param_persistence_threshold"})
      keys.push_back(k);
  for (const auto& [k, _] : v.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) return df.error(k, "is not a key of this ZeRO stage");
  for (std::string_view k : keys)
    if (!v.contains(std::string(k))) return df.error(k, "is missing");
  DeepSpeedZero d;
  constexpr int64_t kBig = int64_t{1} << 62;
  SP_ASSIGN_OR_RETURN(d.gradient_accumulation_steps, df.integer("gradient_accumulation_steps", 1, 1 << 20));
  SP_ASSIGN_OR_RETURN(d.reduce_bucket_size, df.integer("reduce_bucket_size", 1, kBig));
  SP_ASSIGN_OR_RETURN(d.allgather_bucket_size, df.integer("allgather_bucket_size", 1, kBig));
  for (auto [key, field] : {std::pair{"overlap_comm", &d.overlap_comm},
                            {"contiguous_gradients", &d.contiguous_gradients},
                            {"reduce_scatter", &d.reduce_scatter},
                            {"use_multi_rank_bucket_allreduce", &d.use_multi_rank_bucket_allreduce},
                            {"allgather_partitions", &d.allgather_partitions},
                            {"parameter_alignment", &d.parameter_alignment}}) {
    if (!v.at(key).is_boolean()) return df.error(key, "must be true or false");
    *field = v.at(key).get<bool>();
  }
  if (zero == 3) {
    SP_ASSIGN_OR_RETURN(d.prefetch_bucket_size, df.integer("prefetch_bucket_size", 0, kBig));
    SP_ASSIGN_OR_RETURN(d.max_live_parameters, df.integer("max_live_parameters", 0, kBig));
    SP_ASSIGN_OR_RETURN(d.max_reuse_distance, df.integer("max_reuse_distance", 0, kBig));
    SP_ASSIGN_OR_RETURN(d.param_persistence_threshold, df.integer("param_persistence_threshold", 0, kBig));
    return d;
  }
  SP_ASSIGN_OR_RETURN(const json* groups, df.array("groups"));
  for (const json& g : *groups) {
    if (!g.is_array() || g.empty()) return df.error("groups", "must be non-empty arrays of HF tensor names");
    d.groups.emplace_back();
    for (const json& n : g) {
      if (!n.is_string()) return df.error("groups", "must list HF tensor names");
      d.groups.back().push_back(n.get<std::string>());
    }
  }
  if (d.groups.empty()) return df.error("groups", "must hold DeepSpeed's parameter groups (none recorded)");
  return d;
}

}  // namespace sp::judge
