#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace sp::optim {

std::string lr_schedule_name(LrScheduleKind k) {
  switch (k) {
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kWarmupLr:
      return "warmup_lr";
    case LrScheduleKind::kWarmupDecayLr:
      return "warmup_decay_lr";
    case LrScheduleKind::kWarmupCosineLr:
      return "warmup_cosine_lr";
  }
  return "?";
}

Result<LrScheduleKind> lr_schedule_from_name(const std::string& name) {
  for (LrScheduleKind k : {LrScheduleKind::kCosine, LrScheduleKind::kWarmupLr, LrScheduleKind::kWarmupDecayLr,
                           LrScheduleKind::kWarmupCosineLr})
    if (lr_schedule_name(k) == name) return k;
  return invalid_argument("train.lr_schedule = \"{}\" is not a schedule", name)
      .with_hint("use \"cosine\", \"warmup_lr\", \"warmup_decay_lr\" or \"warmup_cosine_lr\" (docs/config.md)");
}

std::string warmup_type_name(WarmupType t) { return t == WarmupType::kLog ? "log" : "linear"; }

double LrSchedule::at(int64_t step) const {
  if (kind == LrScheduleKind::kCosine) {
    if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(span));
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
  }
  if (step >= 1) return ds_lr(step - 1);
  // The constructor's lr: WarmupLR's get_lr() before the first step returns its min_lrs; WarmupCosineLR's
  // returns [0.0], which update_lr writes into every parameter group.
  return kind == LrScheduleKind::kWarmupCosineLr ? 0.0 : warmup_min_lr;
}

double LrSchedule::ds_lr(int64_t iteration) const {
  const int64_t n = std::max<int64_t>(2, warmup_steps);
  const double i = static_cast<double>(iteration);
  const auto gamma = [&] {
    return warmup_type == WarmupType::kLog ? std::log(i + 1.0) / std::log(static_cast<double>(n))
                                           : i / static_cast<double>(n);
  };
  switch (kind) {
    case LrScheduleKind::kWarmupLr:
      return warmup_min_lr + (lr - warmup_min_lr) * (iteration < n ? gamma() : 1.0);
    case LrScheduleKind::kWarmupDecayLr: {
      const double decay = std::max(
          0.0, static_cast<double>(total_steps - iteration) / std::max(1.0, static_cast<double>(total_steps - n)));
      return warmup_min_lr + (lr - warmup_min_lr) * (iteration < n ? gamma() : decay);
    }
    case LrScheduleKind::kWarmupCosineLr: {
      if (iteration < n) return lr * (warmup_min_ratio + gamma() * (1.0 - warmup_min_ratio));
      const double real_step = static_cast<double>(iteration - n + 1);
      const double real_total = static_cast<double>(total_steps - n);
      const double c = (1.0 + std::cos(std::numbers::pi * real_step / real_total)) / 2.0;
      return lr * std::max(0.0, cos_min_ratio + (1.0 - cos_min_ratio) * c);
    }
    case LrScheduleKind::kCosine:
      break;
  }
  return at(iteration);
}

}  // namespace sp::optim
