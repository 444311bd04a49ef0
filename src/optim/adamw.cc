#include "optim/adamw.h"

#include <algorithm>

#include "kernels/adamw.h"
#include "tensor/float16.h"

namespace sp::optim {

AdamW::AdamW(AdamWConfig config, std::vector<OwnedRange> ranges, MemoryLedger& ledger)
    : config_(config), ranges_(std::move(ranges)) {
  for (const OwnedRange& r : ranges_) {
    m_.emplace_back(ledger, "optim.exp_avg." + r.unit->name, Category::kOptim, Shape{r.size()});
    v_.emplace_back(ledger, "optim.exp_avg_sq." + r.unit->name, Category::kOptim, Shape{r.size()});
  }
}

void AdamW::step(const std::vector<float*>& params, const std::vector<const float*>& grads, double lr,
                 float grad_scale) {
  SP_CHECK_EQ(params.size(), ranges_.size(), "AdamW::step parameter pointers");
  SP_CHECK_EQ(grads.size(), ranges_.size(), "AdamW::step gradient pointers");
  ++t_;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const OwnedRange& r = ranges_[i];
    // Loop check: the pieces [lo, hi) are the intersections of the owned range with each tensor of
    // the unit, in order; together they cover [begin, end) exactly once.
    for (const model::TensorSlot& t : r.unit->tensors) {
      const int64_t lo = std::max(r.begin, t.offset);
      const int64_t hi = std::min(r.end, t.offset + t.numel);
      if (lo >= hi) continue;
      const int64_t k = lo - r.begin;
      kernels::adamw_update(params[i] + k, m_[i].f32() + k, v_[i].f32() + k, grads[i] + k, hi - lo,
                            static_cast<float>(lr), static_cast<float>(config_.beta1),
                            static_cast<float>(config_.beta2), static_cast<float>(config_.eps),
                            t.spec.decay ? static_cast<float>(config_.weight_decay) : 0.0f, t_, grad_scale);
    }
  }
}

void AdamW::step16(const std::vector<float*>& params, const std::vector<const uint16_t*>& grads, DType t, double lr,
                   float grad_scale) {
  SP_CHECK_EQ(params.size(), ranges_.size(), "AdamW::step16 parameter pointers");
  SP_CHECK_EQ(grads.size(), ranges_.size(), "AdamW::step16 gradient pointers");
  ++t_;
  float g32[kWidenBlock];
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const OwnedRange& r = ranges_[i];
    for (const model::TensorSlot& ts : r.unit->tensors) {
      const int64_t lo = std::max(r.begin, ts.offset);
      const int64_t hi = std::min(r.end, ts.offset + ts.numel);
      for (int64_t b = lo; b < hi; b += kWidenBlock) {
        const int64_t n = std::min(kWidenBlock, hi - b), k = b - r.begin;
        f32_from_float16(g32, grads[i] + k, n, t);
        kernels::adamw_update(params[i] + k, m_[i].f32() + k, v_[i].f32() + k, g32, n, static_cast<float>(lr),
                              static_cast<float>(config_.beta1), static_cast<float>(config_.beta2),
                              static_cast<float>(config_.eps),
                              ts.spec.decay ? static_cast<float>(config_.weight_decay) : 0.0f, t_, grad_scale);
      }
    }
  }
}

}  // namespace sp::optim
