// Learning-rate schedules, each a pure function of the 0-based optimizer step, so a resumed run needs
// only the step number. kCosine (the default, train.lr_schedule = "cosine"): linear warmup, then cosine
// decay to min_lr (as in LLaMA, Touvron et al. 2023 §2.2). The three DeepSpeed schedules (ds_config
// "scheduler": WarmupLR, WarmupDecayLR, WarmupCosineLR; deepspeed/runtime/lr_schedules.py) with their
// exact formulas and DeepSpeed's stepping: the engine calls scheduler.step() after every optimizer step
// and the scheduler sets the first step's lr in its constructor (docs/deepspeed.md §"Schedules").
// Not the optimizer, not the ds_config mapping (config/ds_config.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace sp::optim {

enum class LrScheduleKind { kCosine, kWarmupLr, kWarmupDecayLr, kWarmupCosineLr };
enum class WarmupType { kLog, kLinear };  // DeepSpeed's warmup_type "log" (its default) and "linear"

// "cosine", "warmup_lr", "warmup_decay_lr", "warmup_cosine_lr"; and back (errors list the names).
std::string lr_schedule_name(LrScheduleKind k);
Result<LrScheduleKind> lr_schedule_from_name(const std::string& name);
std::string warmup_type_name(WarmupType t);  // "log", "linear"

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double lr = 3e-4;  // peak: the cosine's top; WarmupLR/WarmupDecayLR's warmup_max_lr; WarmupCosineLR's optimizer lr
  double min_lr = 3e-5;      // floor of the cosine (kCosine only)
  int64_t warmup_steps = 0;  // kCosine: warmup; DeepSpeed: warmup_num_steps (used as max(2, n), as DeepSpeed does)
  int64_t total_steps = 1;   // kCosine: reaches min_lr here; DeepSpeed: total_num_steps
  // DeepSpeed's parameters (kWarmupLr, kWarmupDecayLr, kWarmupCosineLr).
  WarmupType warmup_type = WarmupType::kLog;
  double warmup_min_lr = 0.0;     // WarmupLR, WarmupDecayLR
  double warmup_min_ratio = 0.0;  // WarmupCosineLR
  double cos_min_ratio = 1e-4;    // WarmupCosineLR

  // The lr of 0-based optimizer step s.
  // kCosine: (s + 1)/warmup · lr during warmup, then min_lr + ½(lr − min_lr)(1 + cos(π · (s − warmup)/(total −
  // warmup))), clamped at min_lr after total.
  // DeepSpeed: step 0 uses the lr the scheduler's constructor sets (WarmupLR/WarmupDecayLR: warmup_min_lr;
  // WarmupCosineLR: 0, its get_lr() before the first step), step s ≥ 1 uses ds_lr(s − 1), the lr after s
  // calls to scheduler.step().
  double at(int64_t step) const;
  // DeepSpeed's get_lr() at last_batch_iteration = i ≥ 0, with n = max(2, warmup_num_steps), N = total_num_steps:
  //   warmup gamma g(i) = ln(i + 1)/ln(n) ("log") or i/n ("linear"), for i < n
  //   WarmupLR:       warmup_min_lr + (lr − warmup_min_lr) · (i < n ? g(i) : 1)
  //   WarmupDecayLR:  warmup_min_lr + (lr − warmup_min_lr) · (i < n ? g(i) : max(0, (N − i)/max(1, N − n)))
  //   WarmupCosineLR: lr · (i < n ? r_w + (1 − r_w) g(i)
  //                                : max(0, r_c + (1 − r_c) · ½(1 + cos(π (i − n + 1)/(N − n)))))
  double ds_lr(int64_t iteration) const;
};

}  // namespace sp::optim
