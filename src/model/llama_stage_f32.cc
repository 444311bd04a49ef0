// LlamaStage in fp32 (llama_stage.h): the bodies of the block and head steps, every tensor fp32. The
// reference precision: the mixed-precision bodies (llama_stage16.cc) are these steps with casts added.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// A null dw in a block's backward body is the B pass of a split backward (llama_stage.h): every
// weight-gradient product is left out, the norms' weight gradients go to slot.wnorm and each linear's output
// gradient is kept for W (llama_stage_wgrad.cc) in a buffer of the slot that nothing reads after this point.
// The head's backward always forms its weight gradients (in B too: llama_stage.h, backward_input).
#include <cstring>

#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/block_offsets.h"
#include "model/llama_stage.h"

namespace sp::model {
namespace k = sp::kernels;

using stage_detail::add;
using stage_detail::BlockOffsets;

void LlamaStage::block_forward_f32(int i, ActivationSlot& slot, BlockActivations& a, const float* w,
                                   TensorParallelOps& tp, bool write_output) {
  const BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const float* x = slot.res[static_cast<size_t>(i)].f32();  // (Ns, C)
  k::rmsnorm_forward(a.xn1.f32(), a.rstd1.f32(), x, w + o.ln1, Ns_, C_, config_.norm_eps);
  k::linear_forward(a.qkv.f32(), gathered_norm(tp, a.xn1).f32(), w + o.qkv, N_, C_, Wqkv_);
  // RoPE on the q and k heads, which are adjacent at the start of every qkv row.
  k::rope_forward(a.qkv.f32(), a.qkv.f32(), rope_cos_.f32(), rope_sin_.f32(), B_, T_, Hl_ + KVl_, D_, Wqkv_);
  k::attention_forward(a.attn.f32(), probs_of(a).f32(), a.qkv.f32(), B_, T_, Hl_, KVl_, D_);
  k::linear_forward(tmp_.f32(), a.attn.f32(), w + o.o, N_, Hl_ * D_, C_);
  row_parallel_residual(tp, a.mid.f32(), x);  // o_proj is row-parallel: sum the partial products
  k::rmsnorm_forward(a.xn2.f32(), a.rstd2.f32(), a.mid.f32(), w + o.ln2, Ns_, C_, config_.norm_eps);
  k::linear_forward(a.gu.f32(), gathered_norm(tp, a.xn2).f32(), w + o.gu, N_, C_, 2 * Fl_);
  k::swiglu_forward(a.h.f32(), a.gu.f32(), N_, Fl_);
  k::linear_forward(tmp_.f32(), a.h.f32(), w + o.down, N_, Fl_, C_);
  // down_proj is row-parallel
  row_parallel_residual(tp, write_output ? slot.res[static_cast<size_t>(i + 1)].f32() : nullptr, a.mid.f32());
}

void LlamaStage::head_forward_f32(ActivationSlot& s, const float* w, const float* w_lm, TensorParallelOps& tp) {
  HeadActivations& h = head_of(s);
  const float* x = s.res.back().f32();
  k::rmsnorm_forward(head_xf(h).f32(), h.rstdf.f32(), x, w, Ns_, C_, config_.norm_eps);
  k::linear_forward(h.logits.f32(), head_input(tp, h).f32(), w_lm, N_, C_, Vl_);  // vocab-parallel: (N, Vl)
  head_loss(h, static_cast<const int32_t*>(s.targets.raw()), tp);
}

void LlamaStage::head_backward_f32(ActivationSlot& s, const float* w, const float* w_lm, float* dw, float* dw_lm,
                                   TensorParallelOps& tp, float loss_scale) {
  HeadActivations& h = head_of(s);
  const auto* targets = static_cast<const int32_t*>(s.targets.raw());
  float* dlogits = h.logits.f32();  // in place: logits are not needed after this
  k::cross_entropy_backward(dlogits, h.logits.f32(), h.rowmax.f32(), h.sumexp.f32(), targets, N_, Vl_, v_begin_,
                            loss_scale);
  if (!h.xf.defined()) k::rmsnorm_apply(head_xf(h).f32(), h.rstdf.f32(), s.res.back().f32(), w, Ns_, C_);
  k::linear_backward(dxn_.f32(), dw_lm, dlogits, head_input(tp, h).f32(), w_lm, N_, C_, Vl_,
                     /*accumulate_dx=*/false);
  column_parallel_dgrad(tp);  // xf entered the vocab-parallel head replicated
  std::memset(dres_.f32(), 0, sizeof(float) * static_cast<size_t>(Ns_ * C_));
  k::rmsnorm_backward(dres_.f32(), dw, dxn_.f32(), s.res.back().f32(), w, h.rstdf.f32(), Ns_, C_);
  norm_weight_grad(tp, dw);
}

void LlamaStage::block_backward_f32(int i, ActivationSlot& slot, BlockActivations& a, const float* w, float* dw,
                                    TensorParallelOps& tp) {
  const BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const float* x = slot.res[static_cast<size_t>(i)].f32();
  float* dres = dres_.f32();  // (Ns, C) in: dL/d(block output); out: dL/d(block input)
  const bool b_only = dw == nullptr;
  auto dW = [&](int64_t off) { return b_only ? nullptr : dw + off; };
  float* dln1 = b_only ? wnorm_row(slot, 2 * i) : dw + o.ln1;
  float* dln2 = b_only ? wnorm_row(slot, 2 * i + 1) : dw + o.ln2;
  // MLP: out = mid + down(h). The residual passes dres through unchanged to mid.
  if (b_only) keep_for_weight_pass(slot.res[static_cast<size_t>(i + 1)], dres);  // down's dy (block output read)
  k::linear_backward(dh_.f32(), dW(o.down), gathered_dres(tp), a.h.f32(), w + o.down, N_, Fl_, C_, false);
  k::swiglu_backward(dgu_.f32(), dh_.f32(), a.gu.f32(), N_, Fl_);
  if (b_only) keep_for_weight_pass(a.gu, dgu_.raw());  // gate/up's dy (gu read)
  k::linear_backward(dxn_.f32(), dW(o.gu), dgu_.f32(), gathered_norm(tp, a.xn2).f32(), w + o.gu, N_, C_, 2 * Fl_,
                     false);
  column_parallel_dgrad(tp);  // gate/up are column-parallel
  k::rmsnorm_backward(dres, dln2, dxn_.f32(), a.mid.f32(), w + o.ln2, a.rstd2.f32(), Ns_, C_);
  norm_weight_grad(tp, dln2);
  // Attention: mid = x + o(attn).
  if (b_only) keep_for_weight_pass(a.mid, dres);  // o's dy (mid read)
  k::linear_backward(dattn_.f32(), dW(o.o), gathered_dres(tp), a.attn.f32(), w + o.o, N_, Hl_ * D_, C_, false);
  k::attention_backward(dqkv_.f32(), att_scratch_.f32(), dattn_.f32(), a.qkv.f32(), probs_of(a).f32(), B_, T_, Hl_,
                        KVl_, D_);
  k::rope_backward(dqkv_.f32(), dqkv_.f32(), rope_cos_.f32(), rope_sin_.f32(), B_, T_, Hl_ + KVl_, D_, Wqkv_);
  if (b_only) keep_for_weight_pass(a.qkv, dqkv_.raw());  // q/k/v's dy (qkv read)
  k::linear_backward(dxn_.f32(), dW(o.qkv), dqkv_.f32(), gathered_norm(tp, a.xn1).f32(), w + o.qkv, N_, C_, Wqkv_,
                     false);
  column_parallel_dgrad(tp);  // q/k/v are column-parallel
  k::rmsnorm_backward(dres, dln1, dxn_.f32(), x, w + o.ln1, a.rstd1.f32(), Ns_, C_);
  norm_weight_grad(tp, dln1);
}

}  // namespace sp::model
