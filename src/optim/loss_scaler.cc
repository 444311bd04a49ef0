// Dynamic loss scaling (loss_scaler.h). update() follows DeepSpeed's DynamicLossScaler.update_scale
// (scale_factor 2) as it has stood since 2020 (microsoft/DeepSpeed deepspeed/runtime/fp16/loss_scaler.py):
//   overflow:  if hysteresis == 1 (or configured as 1): scale ← max(scale / 2, min_scale), or an error
//              when scale == min_scale and raise_at_min_scale; else hysteresis ← hysteresis − 1.
//              last_overflow_iter ← iter.
//   clean:     consecutive_hysteresis: hysteresis ← configured value. If (iter − last_overflow_iter) is a
//              multiple of window: hysteresis ← configured value (if not already refilled) and scale ← 2·scale.
//   then iter ← iter + 1.
// Consequence worth knowing: without consecutive_hysteresis a clean step does not refill the hysteresis,
// so after the first halving every further overflow halves again until the next growth.
// (DeepSpeed's current main branch grows one clean step later: "stable_interval = iter − last − 1 > 0 and
// a multiple of window"; docs/loss_scaling.md says where the two differ.)
#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"

namespace sp::optim {

Status LossScalerConfig::validate(std::string_view section) const {
  std::string errors;
  auto rule = [&](bool ok, const std::string& msg) {
    if (!ok) errors += (errors.empty() ? "" : "\n") + msg;
  };
  rule(initial_scale_power >= 0 && initial_scale_power <= 64,
       fmt::format("{}.initial_scale_power = {} must be in [0, 64] (the scale starts at 2^power)", section,
                   initial_scale_power));
  rule(window >= 1, fmt::format("{}.loss_scale_window = {} must be ≥ 1", section, window));
  rule(hysteresis >= 1,
       fmt::format("{}.hysteresis = {} must be ≥ 1 (1 = halve on every overflow)", section, hysteresis));
  rule(std::isfinite(min_scale) && min_scale > 0,
       fmt::format("{}.min_loss_scale = {} must be a positive finite number", section, min_scale));
  rule(!(min_scale > std::ldexp(1.0, initial_scale_power)),
       fmt::format("{}.min_loss_scale = {} exceeds the initial scale 2^{}", section, min_scale, initial_scale_power));
  if (errors.empty()) return Status();
  return invalid_argument("{}", errors)
      .with_hint(
          "DeepSpeed's defaults: initial_scale_power 16, loss_scale_window 1000, hysteresis 2, min_loss_scale 1");
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  SP_CHECK(config.validate("loss_scaler").ok(), "LossScaler built from an invalid config: {}",
           config.validate("loss_scaler").to_string());
  state_.scale = std::ldexp(1.0, config.initial_scale_power);
  state_.hysteresis = config.hysteresis;
}

Result<bool> LossScaler::update(bool overflow) {
  LossScalerState& s = state_;
  if (overflow) {
    if (config_.hysteresis == 1 || s.hysteresis == 1) {
      if (s.scale == config_.min_scale && config_.raise_at_min_scale)
        return failed_precondition(
                   "step {}: the gradients overflowed with the loss scale already at its minimum {}: the run diverges",
                   s.iter, config_.min_scale)
            .with_hint(
                "look for a real divergence (learning rate, data, a NaN in the weights); lower min_loss_scale "
                "only if the gradients are finite at a smaller scale");
      s.scale = std::max(s.scale / 2.0, config_.min_scale);
    } else {
      s.hysteresis -= 1;
    }
    s.last_overflow_iter = s.iter;
  } else {
    if (config_.consecutive_hysteresis) s.hysteresis = config_.hysteresis;
    if ((s.iter - s.last_overflow_iter) % config_.window == 0) {
      if (!config_.consecutive_hysteresis) s.hysteresis = config_.hysteresis;
      s.scale *= 2.0;
    }
  }
  s.iter += 1;
  return overflow;
}

nlohmann::json LossScaler::state_json() const {
  return {{"scale", state_.scale},
          {"iter", state_.iter},
          {"last_overflow_iter", state_.last_overflow_iter},
          {"hysteresis", state_.hysteresis}};
}

Result<LossScalerState> LossScaler::state_from_json(const nlohmann::json& j, const LossScalerConfig& config) {
  if (!j.is_object()) return corrupt("loss scaler state is not a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "scale" && key != "iter" && key != "last_overflow_iter" && key != "hysteresis")
      return corrupt("loss scaler state: unknown key '{}'", key);
  auto number = [&](const char* key) -> Result<const nlohmann::json*> {
    auto it = j.find(key);
    if (it == j.end()) return corrupt("loss scaler state: missing key '{}'", key);
    if (!it->is_number()) return corrupt("loss scaler state: '{}' is not a number", key);
    return &*it;
  };
  SP_ASSIGN_OR_RETURN(const nlohmann::json* scale, number("scale"));
  SP_ASSIGN_OR_RETURN(const nlohmann::json* iter, number("iter"));
  SP_ASSIGN_OR_RETURN(const nlohmann::json* last, number("last_overflow_iter"));
  SP_ASSIGN_OR_RETURN(const nlohmann::json* hyst, number("hysteresis"));
  if (!iter->is_number_integer() || !last->is_number_integer() || !hyst->is_number_integer())
    return corrupt("loss scaler state: 'iter', 'last_overflow_iter' and 'hysteresis' must be integers");
  LossScalerState s{scale->get<double>(), iter->get<int64_t>(), last->get<int64_t>(), hyst->get<int>()};
  if (!std::isfinite(s.scale) || s.scale < config.min_scale)
    return corrupt("loss scaler state: scale {} is not finite or below min_loss_scale {}", s.scale, config.min_scale);
  if (s.iter < 0 || s.last_overflow_iter < -1 || s.last_overflow_iter >= s.iter)
    return corrupt("loss scaler state: last_overflow_iter {} must be in [-1, iter = {})", s.last_overflow_iter, s.iter);
  if (s.hysteresis < 1 || s.hysteresis > config.hysteresis)
    return corrupt("loss scaler state: hysteresis {} outside [1, {}] (the configured hysteresis)", s.hysteresis,
                   config.hysteresis);
  return s;
}

}  // namespace sp::optim
