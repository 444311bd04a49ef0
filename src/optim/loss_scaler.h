// Dynamic loss scaling for fp16 mixed precision with DeepSpeed's semantics (DynamicLossScaler in
// deepspeed/runtime/fp16/loss_scaler.py, configured by the "fp16" section: initial_scale_power,
// loss_scale_window, hysteresis, consecutive_hysteresis, min_loss_scale; docs/loss_scaling.md).
// The loss (in practice the per-token loss gradient) is multiplied by `scale` so that small fp16
// gradients do not underflow; a step whose gradients hold inf/NaN is skipped and, once the hysteresis
// is used up, the scale is halved; after `window` consecutive clean steps it is doubled.
// Not the overflow check or the skip itself (the engine: all ranks must agree on `overflow`), and not
// bf16 (whose fp32-sized exponent needs no scaling). State is a few numbers, serialized for checkpoints.
// Invariant: update() is DeepSpeed's update_scale step for step (tests/unit/loss_scaler_test.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"

namespace sp::optim {

struct LossScalerConfig {
  int initial_scale_power = 16;         // the scale starts at 2^initial_scale_power (DeepSpeed default 16)
  int64_t window = 1000;                // loss_scale_window: clean steps between doublings
  int hysteresis = 2;                   // overflows tolerated before the scale is halved (delayed_shift)
  bool consecutive_hysteresis = false;  // refill the hysteresis on every clean step (else only on growth)
  double min_scale = 1.0;               // min_loss_scale
  bool raise_at_min_scale = true;       // an overflow that would go below min_scale is an error, as DeepSpeed's
  // Every violated rule, naming `<section>.<key>` and the allowed range.
  Status validate(std::string_view section) const;
};

struct LossScalerState {
  double scale = 65536.0;           // cur_scale
  int64_t iter = 0;                 // cur_iter: updates so far
  int64_t last_overflow_iter = -1;  // iter of the last overflow, −1 before any
  int hysteresis = 2;               // cur_hysteresis
  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config);

  const LossScalerConfig& config() const { return config_; }
  const LossScalerState& state() const { return state_; }
  double scale() const { return state_.scale; }

  // One step's outcome: `overflow` = some gradient was inf or NaN (identical on every rank). Returns
  // whether the optimizer step must be skipped (= overflow), after updating the scale; an error (and no
  // change) if the scale is already at min_scale and raise_at_min_scale is set.
  Result<bool> update(bool overflow);

  // Checkpoint state: {"scale", "iter", "last_overflow_iter", "hysteresis"} (docs/formats/loss_scaler.md).
  nlohmann::json state_json() const;
  // Strict: every key present with the right type and a value the config allows; errors name the key.
  static Result<LossScalerState> state_from_json(const nlohmann::json& j, const LossScalerConfig& config);
  void restore(const LossScalerState& s) { state_ = s; }

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace sp::optim
