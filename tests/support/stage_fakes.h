// Shared test helper: the model stage's hooks (model/stage_hooks.h) for one rank without a parallel
// engine, used by the stage's unit tests and the oracle's stage driver. Not a mock of the math: the stage
// runs for real; these hold its parameters and gradients in host vectors and make tensor parallelism the
// identity (a group of one). Invariant: acquire() hands out `units` (fp32) or `units16` (the same values as
// 16-bit patterns) by `dtype`; a 16-bit `grad` rounds each finished leaf once, as the engine's stores do.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/stage_hooks.h"
#include "tensor/float16.h"

namespace sp::test {

struct HostParams : model::ParamSource {
  std::map<int, std::vector<float>> units;       // fp32 values
  std::map<int, std::vector<uint16_t>> units16;  // 16-bit patterns, for a 16-bit dtype
  DType dtype = DType::kF32;                     // what acquire() hands out
  ConstBufView acquire(int u) override {
    if (dtype == DType::kF32) return f32_view(units.at(u).data(), std::ssize(units.at(u)));
    return {units16.at(u).data(), std::ssize(units16.at(u)), dtype};
  }
  void release(int) override {}
};

struct HostGrads : model::GradSink {
  std::map<int, std::vector<float>> units;
  std::map<int, int> done_count;  // done() calls per unit
  DType grad = DType::kF32;       // a 16-bit gradient dtype rounds the micro-batch's leaf once when handed on
  BufView leaf(int u) override { return f32_view(units.at(u).data(), std::ssize(units.at(u))); }
  void done(int u) override {
    ++done_count[u];
    if (grad != DType::kF32) round_through_float16(units.at(u).data(), static_cast<int64_t>(units.at(u).size()), grad);
  }
};

// Tensor parallelism of degree 1: every collective of the group is the identity.
struct SingleRankTp : model::TensorParallelOps {
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void reduce_from_tp(BufView) override {}
  void copy_to_tp_backward(BufView) override {}
  void all_reduce_max(BufView) override {}
  void all_reduce_sum(BufView) override {}
  void reduce_scatter_to_sp(ConstBufView, BufView) override {}
  void gather_from_sp(ConstBufView, BufView) override {}
  void gather_from_sp_backward(ConstBufView, BufView) override {}
  void reduce_scatter_to_sp_backward(ConstBufView, BufView) override {}
  void reduce_replicated_grad(BufView) override {}
};

}  // namespace sp::test
