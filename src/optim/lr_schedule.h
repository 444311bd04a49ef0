// Learning-rate schedule: linear warmup, then cosine decay to min_lr (as in LLaMA, Touvron et al.
// 2023 §2.2). A pure function of the step, so a resumed run needs only the step number.
#pragma once

#include <cstdint>

namespace sp::optim {

struct LrSchedule {
  double lr = 3e-4;      // peak
  double min_lr = 3e-5;  // floor of the cosine
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;  // the cosine reaches min_lr at this step
  // lr for 0-based step s: (s + 1)/warmup · lr during warmup, then
  // min_lr + ½(lr − min_lr)(1 + cos(π · (s − warmup)/(total − warmup))), clamped at min_lr after total.
  double at(int64_t step) const;
};

}  // namespace sp::optim
