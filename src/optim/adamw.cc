#include "optim/adamw.h"

#include <algorithm>

#include "kernels/adamw.h"

namespace sp::optim {

AdamW::AdamW(AdamWConfig config, std::vector<OwnedRange> ranges, MemoryLedger& ledger)
    : config_(config), ranges_(std::move(ranges)) {
  for (const OwnedRange& r : ranges_) {
    m_.emplace_back(ledger, "optim.exp_avg." + r.unit->name, Category::kOptim, Shape{r.size()});
    v_.emplace_back(ledger, "optim.exp_avg_sq." + r.unit->name, Category::kOptim, Shape{r.size()});
  }
}

void AdamW::step(const std::vector<float*>& params, const std::vector<ConstBufView>& grads, double lr,
                 float grad_scale) {
  SP_CHECK_EQ(params.size(), ranges_.size(), "AdamW::step parameter pointers");
  SP_CHECK_EQ(grads.size(), ranges_.size(), "AdamW::step gradient views");
  ++t_;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const OwnedRange& r = ranges_[i];
    SP_CHECK_EQ(grads[i].count, r.size(), "AdamW::step gradient of unit {}", r.unit->name);
    // Loop check: the pieces [lo, hi) are the intersections of the owned range with each tensor of
    // the unit, in order; together they cover [begin, end) exactly once.
    for (const model::TensorSlot& t : r.unit->tensors) {
      const int64_t lo = std::max(r.begin, t.offset);
      const int64_t hi = std::min(r.end, t.offset + t.numel);
      if (lo >= hi) continue;
      const int64_t k = lo - r.begin;
      kernels::adamw_update(params[i] + k, m_[i].f32() + k, v_[i].f32() + k, grads[i].slice(k, hi - lo),
                            static_cast<float>(lr), static_cast<float>(config_.beta1),
                            static_cast<float>(config_.beta2), static_cast<float>(config_.eps),
                            t.spec.decay ? static_cast<float>(config_.weight_decay) : 0.0f, t_, grad_scale);
    }
  }
}

}  // namespace sp::optim
