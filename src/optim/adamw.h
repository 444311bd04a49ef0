// AdamW optimizer state over the parameter elements this rank owns, and the step that updates them.
// What it owns is a list of ranges of unit flat buffers: the whole local unit without ZeRO, one
// dp-shard of it under ZeRO-1/2/3 (Rajbhandari et al. SC'20 §5). The update is elementwise
// (kernels/adamw.h, torch.optim.AdamW semantics), so any split of the elements gives the same bits.
// Weight decay applies per tensor (matrices yes, norm weights no): a range is cut at tensor bounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"
#include "tensor/tensor.h"

namespace sp::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// Elements [begin, end) of a unit's flat buffer.
struct OwnedRange {
  const model::UnitLayout* unit = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class AdamW {
 public:
  AdamW(AdamWConfig config, std::vector<OwnedRange> ranges, MemoryLedger& ledger);

  // One update of every owned range. params[i] points at element `begin` of range i; grads[i] views the
  // range's gradient (range size elements, fp32 or the 16-bit gradient dtype: kernels/adamw.h widens it
  // exactly). grad_scale is the clipping coefficient. Increments the step count first (t is 1-based).
  void step(const std::vector<float*>& params, const std::vector<ConstBufView>& grads, double lr, float grad_scale);

  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }
  const std::vector<OwnedRange>& ranges() const { return ranges_; }
  Tensor& exp_avg(size_t i) { return m_[i]; }     // first moment of range i
  Tensor& exp_avg_sq(size_t i) { return v_[i]; }  // second moment of range i

 private:
  AdamWConfig config_;
  std::vector<OwnedRange> ranges_;
  std::vector<Tensor> m_, v_;  // category optim, "optim.exp_avg.<unit>", "optim.exp_avg_sq.<unit>"
  int64_t t_ = 0;
};

}  // namespace sp::optim
