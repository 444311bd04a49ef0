// LlamaStage's split backward (llama_stage.h, ZB-H1 in plan/schedule.h): the W pass, which forms a
// micro-batch's block weight gradients after its B pass (backward_input) has formed every
// input gradient and, on the last stage, the head unit's weight gradients (final norm, LM head), as backward()
// does, so that nothing of the head outlives B (one HeadActivations per stage).
// Bitwise contract: every weight gradient is the same product of the same operands as in backward(),
// added (+=) into the same zeroed leaf, with leaf()/done() in backward()'s order, so the gradients are
// backward()'s bits. What B keeps for W, in slot buffers that B no longer reads once it has written them:
//   res[i + 1] (N, C) fp32   dL/d(block i's output): down_proj's dy   (rounded again here in 16-bit)
//   mid        (N, C) fp32   dL/d(mid):              o_proj's dy      (rounded again here in 16-bit)
//   gu         (N, 2·Fl)     gate/up's dy, as B fed it to its GEMM (fp32, or rounded to 16 bits)
//   qkv        (N, Wqkv)     q/k/v's dy after RoPE's backward, likewise
//   wnorm      (2·n_local, C): the blocks' norms' weight gradients, which rmsnorm's backward forms with dx
// A first stage never splits (its W would directly follow its B: the full backward, plan::splits_backward), so
// the embedding's weight gradient is always backward()'s. What only B reads (rstd1, rstd2, probs, res[0])
// is not kept for W: it lives in the
// stage's pool of F → B sets (attach_forward_set below), returned after B.
// W runs no communication: the stage refuses sequence parallelism (norm weight gradients reduced over tp)
// and full recomputation (no per-slot activations).
#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "kernels/linear16.h"
#include "kernels/matmul.h"
#include "model/block_offsets.h"
#include "model/llama_stage.h"
#include "tensor/float16.h"

namespace sp::model {
namespace k = sp::kernels;
namespace {

// dst (C) += src (C): a norm's weight gradient into its leaf (zeroed: the sum B formed, bit for bit).
void add_norm_grad(float* dst, const float* src, int64_t C) {
  for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
}

}  // namespace

void LlamaStage::swap_forward_set(ActivationSlot& slot, ForwardSet& set) {
  for (size_t i = 0; i < set.rstd1.size(); ++i) {
    BlockActivations& a = slot.blocks[i];
    std::swap(a.rstd1, set.rstd1[i]);
    std::swap(a.rstd2, set.rstd2[i]);
    if (!set.probs.empty()) std::swap(a.probs, set.probs[i]);
  }
  if (pools_res0()) std::swap(slot.res[0], set.res0);
}

void LlamaStage::attach_forward_set(ActivationSlot& slot) {
  SP_CHECK(spec_.split_backward && slot.forward_set < 0, "attach_forward_set: no split backward, or slot {} holds one",
           slot.index);
  if (free_forward_sets_.empty()) {  // a new set: the pool grows to the most micro-batches between F and B
    const int j = static_cast<int>(forward_sets_.size());
    auto set = std::make_unique<ForwardSet>();
    MemoryLedger& m = *ledger_;
    const auto A = Category::kActivation;
    const std::string p = fmt::format("act.fb{}", j);
    if (pools_res0()) set->res0 = Tensor(m, p + ".res0", A, {Ns_, C_});
    for (int i = 0; i < n_local_ && spec_.recompute != Recompute::kFull; ++i) {
      const std::string l = fmt::format("{}.layers.{}", p, spec_.layer_begin + i);
      set->rstd1.emplace_back(m, l + ".rstd1", A, Shape{Ns_});
      set->rstd2.emplace_back(m, l + ".rstd2", A, Shape{Ns_});
      if (spec_.recompute == Recompute::kNone)
        set->probs.emplace_back(m, l + ".probs", A, Shape{B_, Hl_, T_, T_}, spec_.precision);
    }
    forward_sets_.push_back(std::move(set));
    free_forward_sets_.push_back(j);
  }
  slot.forward_set = free_forward_sets_.back();
  free_forward_sets_.pop_back();
  ForwardSet& set = *forward_sets_[static_cast<size_t>(slot.forward_set)];
  set.micro_batch = slot.micro_batch;
  swap_forward_set(slot, set);
}

void LlamaStage::release_forward_set(ActivationSlot& slot) {
  SP_CHECK(slot.forward_set >= 0, "release_forward_set: slot {} holds no set", slot.index);
  ForwardSet& set = *forward_sets_[static_cast<size_t>(slot.forward_set)];
  swap_forward_set(slot, set);
  set.micro_batch = -1;
  free_forward_sets_.push_back(slot.forward_set);
  slot.forward_set = -1;
}

void LlamaStage::keep_for_weight_pass(Tensor& dst, const void* src) { std::memcpy(dst.raw(), src, dst.nbytes()); }

void LlamaStage::backward_weight(ActivationSlot& slot, GradSink& grads) {
  SP_CHECK(spec_.split_backward, "backward_weight on a stage without a split backward");
  // The head unit (last stage) was done in B, first, as in backward(); the blocks follow in its order.
  for (int i = n_local_ - 1; i >= 0; --i) {
    const int unit = block_unit(spec_.layer_begin + i);
    float* dw = grads.leaf(unit).f32();
    block_weight_grad(i, slot, slot.blocks[static_cast<size_t>(i)], dw, grads.leaf_is_zero(unit));
    grads.done(unit);
  }
}

void LlamaStage::block_weight_grad(int i, ActivationSlot& slot, BlockActivations& a, float* dw, bool dw_zero) {
  const stage_detail::BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const float* dy_down = slot.res[static_cast<size_t>(i + 1)].f32();
  add_norm_grad(dw + o.ln2, wnorm_row(slot, 2 * i + 1), C_);
  add_norm_grad(dw + o.ln1, wnorm_row(slot, 2 * i), C_);
  if (!mixed()) {
    k::linear_backward(nullptr, dw + o.down, dy_down, a.h.f32(), nullptr, N_, Fl_, C_, false);
    k::linear_backward(nullptr, dw + o.gu, a.gu.f32(), a.xn2.f32(), nullptr, N_, C_, 2 * Fl_, false);
    k::linear_backward(nullptr, dw + o.o, a.mid.f32(), a.attn.f32(), nullptr, N_, Hl_ * D_, C_, false);
    k::linear_backward(nullptr, dw + o.qkv, a.qkv.f32(), a.xn1.f32(), nullptr, N_, C_, Wqkv_, false);
    return;
  }
  const DType t = spec_.precision;
  k::Gemm16& g = *spec_.gemm16;
  float* ws = gemm_ws_.defined() ? gemm_ws_.f32() : nullptr;
  uint16_t* g16 = grad16_.float16();
  float16_from_f32(g16, dy_down, N_ * C_, t);  // as B's gathered_dres16 rounded it
  k::linear16_backward(nullptr, dw + o.down, g16, a.h.float16(), nullptr, N_, Fl_, C_, false, g, ws, dw_zero);
  k::linear16_backward(nullptr, dw + o.gu, a.gu.float16(), a.xn2.float16(), nullptr, N_, C_, 2 * Fl_, false, g, ws,
                       dw_zero);
  float16_from_f32(g16, a.mid.f32(), N_ * C_, t);
  k::linear16_backward(nullptr, dw + o.o, g16, a.attn.float16(), nullptr, N_, Hl_ * D_, C_, false, g, ws, dw_zero);
  k::linear16_backward(nullptr, dw + o.qkv, a.qkv.float16(), a.xn1.float16(), nullptr, N_, C_, Wqkv_, false, g, ws,
                       dw_zero);
}

}  // namespace sp::model
