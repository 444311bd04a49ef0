// The parts of contract.json's strategy a framework's layout adds (judge/contract.cc reads the rest): FSDP2's
// fully_shard units and DeepSpeed's ZeRO config, each read strictly, naming the field and the fix.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_io.h"
#include "judge/recording.h"

namespace sp::judge {

// strategy.units: [{"tensors": [HF names], "reshard_after_forward": bool}] (FSDP2's fully_shard units, ZeRO 2 or 3).
Result<std::vector<ShardingUnit>> units_of(const JsonFields& sf, const nlohmann::json& v, int zero);
// strategy.deepspeed: DeepSpeed's ZeRO config values (DeepSpeedZero), ZeRO 1 to 3.
Result<DeepSpeedZero> deepspeed_of(const JsonFields& sf, const nlohmann::json& v, int zero);

}  // namespace sp::judge
