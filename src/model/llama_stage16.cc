// LlamaStage in mixed precision (bf16 or fp16; llama_stage.h, model/precision.h): the bodies of
// llama_stage_f32.cc with 16-bit working weights, 16-bit stored activations and Gemm16 products, fp32
// everywhere else. Not a second model: same units, offsets, hooks, accumulation rule and call order
// of acquire/leaf/done/tp ops as the fp32 path (the entry points of llama_stage.cc call both), so
// pipeline and ZeRO see the same events.
// Rounding points (to the 16-bit dtype t, nearest even): the outputs of both rmsnorms and the final
// norm; q/k/v after RoPE; P; the attention output; gate/up; silu(gate)·up; the logits; and the gradient
// that enters each GEMM's backward (dres, dgu, dattn, dS, dqkv, dlogits). Everything listed in
// docs/kernels.md §"Every cast"; the PyTorch oracle (tests/oracle) rounds at exactly these points.
// Scratch reuse: dqkv_ and dgu_ (fp32, backward scratch) hold the qkv and gate/up GEMM outputs during a
// forward, before rounding; grad16_ holds one rounded gradient at a time, or on the last stage the
// head's fp32 product for at least half its rows (logit_staging) and the cross-entropy's widened row.
#include <algorithm>

#include "kernels/attention16.h"
#include "kernels/cross_entropy16.h"
#include "kernels/embedding.h"
#include "kernels/linear16.h"
#include "kernels/pointwise16.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/block_offsets.h"
#include "model/llama_stage.h"
#include "model/precision.h"
#include "tensor/float16.h"

namespace sp::model {
namespace k = sp::kernels;

using stage_detail::add;
using stage_detail::BlockOffsets;

Stage16Workspace stage16_workspace(const LlamaConfig& config, int n_local, bool last, int tp, int64_t B, int64_t T,
                                   k::Gemm16Kind g) {
  const int64_t N = B * T, C = config.dim, D = config.head_dim();
  const int64_t Hl = config.n_heads / tp, KVl = config.n_kv_heads / tp, Fl = config.ffn_dim / tp;
  const int64_t Vl = config.vocab_size / tp, Wqkv = (Hl + 2 * KVl) * D;
  Stage16Workspace w;
  if (n_local > 0) {
    w.grad16 = std::max({N * C, N * 2 * Fl, N * Hl * D, N * Wqkv});
    w.gemm16 = std::max({k::linear16_workspace_floats(g, N, C, Wqkv), k::linear16_workspace_floats(g, N, Hl * D, C),
                         k::linear16_workspace_floats(g, N, C, 2 * Fl), k::linear16_workspace_floats(g, N, Fl, C),
                         k::attention16_workspace_floats(g, T, D)});
  }
  // Last stage: as many fp32 rows of the head's product as grad16's bytes hold, which are at least N·Vl 16-bit
  // elements (the dlogits it held when the logits were fp32: no workspace grows), so at least N/2 rows: fewer,
  // smaller GEMMs measured ≈ 1 % slower at the small preset (docs/memory.md §"ZB-H1").
  if (last) {
    const int64_t bytes16 = 2 * std::max({w.grad16, N * C, N * Vl});
    w.logit_rows = std::clamp<int64_t>(bytes16 / (4 * Vl), 1, N);
    w.grad16 = std::max(w.grad16, std::max(N * C, 2 * Vl * w.logit_rows));
    w.gemm16 = std::max(w.gemm16, k::linear16_workspace_floats(g, N, C, Vl));  // the backward's N rows
  }
  if (n_local > 0 || last) w.norm_weight = C;
  return w;
}

void LlamaStage::allocate_mixed_workspace() {
  SP_CHECK(spec_.gemm16 != nullptr, "a {} stage needs a 16-bit GEMM backend (StageSpec::gemm16)",
           precision_name(spec_.precision));
  SP_CHECK(spec_.gemm16->dtype() == spec_.precision, "stage precision {} with a {} GEMM backend",
           dtype_name(spec_.precision), dtype_name(spec_.gemm16->dtype()));
  const Stage16Workspace w =
      stage16_workspace(config_, n_local_, spec_.last, spec_.tp_size, B_, T_, spec_.gemm16->kind());
  MemoryLedger& m = *ledger_;
  const auto W = Category::kWorkspace;
  if (w.norm_weight > 0) norm_w_ = Tensor(m, "scratch.norm_weight", W, {w.norm_weight});
  if (w.grad16 > 0) grad16_ = Tensor(m, "scratch.grad16", W, {w.grad16}, spec_.precision);
  logit_rows_ = w.logit_rows;
  if (w.gemm16 > 0) gemm_ws_ = Tensor(m, "scratch.gemm16", W, {w.gemm16});
}

const float* LlamaStage::widen_norm_weight(const uint16_t* w16) {
  f32_from_float16(norm_w_.f32(), w16, C_, spec_.precision);
  return norm_w_.f32();
}

// ---------------------------------------------------------------------------------------------
// Forward

void LlamaStage::block_forward_mixed(int i, ActivationSlot& slot, BlockActivations& a, const uint16_t* w16,
                                     TensorParallelOps& tp, bool write_output) {
  const BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const DType t = spec_.precision;
  k::Gemm16& g = *spec_.gemm16;
  float* ws = gemm_ws_.defined() ? gemm_ws_.f32() : nullptr;
  const float* x = slot.res[static_cast<size_t>(i)].f32();  // (Ns, C) fp32 residual stream
  k::rmsnorm16_forward(a.xn1.float16(), a.rstd1.f32(), x, widen_norm_weight(w16 + o.ln1), Ns_, C_, config_.norm_eps, t);
  float* qkv32 = dqkv_.f32();  // (N, Wqkv) fp32 product, RoPE in fp32, then rounded once
  k::linear16_forward(qkv32, gathered_norm(tp, a.xn1).float16(), w16 + o.qkv, N_, C_, Wqkv_, g, ws);
  k::rope_forward(qkv32, qkv32, rope_cos_.f32(), rope_sin_.f32(), B_, T_, Hl_ + KVl_, D_, Wqkv_);
  float16_from_f32(a.qkv.float16(), qkv32, N_ * Wqkv_, t);
  k::attention16_forward(a.attn.float16(), probs_of(a).float16(), a.qkv.float16(), B_, T_, Hl_, KVl_, D_, g,
                         att_scratch_.f32(), ws);
  k::linear16_forward(tmp_.f32(), a.attn.float16(), w16 + o.o, N_, Hl_ * D_, C_, g, ws);
  row_parallel_residual(tp, a.mid.f32(), x);  // o_proj is row-parallel: sum the fp32 partial products
  k::rmsnorm16_forward(a.xn2.float16(), a.rstd2.f32(), a.mid.f32(), widen_norm_weight(w16 + o.ln2), Ns_, C_,
                       config_.norm_eps, t);
  float* gu32 = dgu_.f32();  // (N, 2Fl) fp32 product, rounded once
  k::linear16_forward(gu32, gathered_norm(tp, a.xn2).float16(), w16 + o.gu, N_, C_, 2 * Fl_, g, ws);
  float16_from_f32(a.gu.float16(), gu32, N_ * 2 * Fl_, t);
  k::swiglu16_forward(a.h.float16(), a.gu.float16(), N_, Fl_, t);
  k::linear16_forward(tmp_.f32(), a.h.float16(), w16 + o.down, N_, Fl_, C_, g, ws);
  // down_proj is row-parallel
  row_parallel_residual(tp, write_output ? slot.res[static_cast<size_t>(i + 1)].f32() : nullptr, a.mid.f32());
}

void LlamaStage::head_forward_mixed(ActivationSlot& s, const uint16_t* w16, const uint16_t* w_lm16,
                                    TensorParallelOps& tp) {
  HeadActivations& h = head_of(s);
  const float* x = s.res.back().f32();
  k::rmsnorm16_forward(head_xf(h).float16(), h.rstdf.f32(), x, widen_norm_weight(w16), Ns_, C_, config_.norm_eps,
                       spec_.precision);
  float* ws = gemm_ws_.defined() ? gemm_ws_.f32() : nullptr;
  // The (N, Vl) product in fp32, logit_rows_ rows at a time, each rounded once into the 16-bit logits.
  const uint16_t* xf = head_input(tp, h).float16();
  uint16_t* logits = h.logits.float16();
  for (int64_t r0 = 0; r0 < N_; r0 += logit_rows_) {
    const int64_t rows = std::min(logit_rows_, N_ - r0);
    k::linear16_forward(logit_staging(), xf + r0 * C_, w_lm16, rows, C_, Vl_, *spec_.gemm16, ws);
    float16_from_f32(logits + r0 * Vl_, logit_staging(), rows * Vl_, spec_.precision);
  }
  head_loss(h, static_cast<const int32_t*>(s.targets.raw()), tp);
}

// ---------------------------------------------------------------------------------------------
// Backward

void LlamaStage::head_backward_mixed(ActivationSlot& s, const uint16_t* w16, const uint16_t* w_lm16, float* dw,
                                     float* dw_lm, TensorParallelOps& tp, float loss_scale) {
  HeadActivations& h = head_of(s);
  const DType t = spec_.precision;
  float* ws = gemm_ws_.defined() ? gemm_ws_.f32() : nullptr;
  const auto* targets = static_cast<const int32_t*>(s.targets.raw());
  uint16_t* dlogits16 = h.logits.float16();  // rounded, in place
  k::cross_entropy16_backward(dlogits16, dlogits16, h.rowmax.f32(), h.sumexp.f32(), targets, N_, Vl_, v_begin_,
                              loss_scale, t, logit_staging());
  if (!h.xf.defined())
    k::rmsnorm16_apply(head_xf(h).float16(), h.rstdf.f32(), s.res.back().f32(), widen_norm_weight(w16), Ns_, C_, t);
  k::linear16_backward(dxn_.f32(), dw_lm, dlogits16, head_input(tp, h).float16(), w_lm16, N_, C_, Vl_, false,
                       *spec_.gemm16, ws);
  column_parallel_dgrad(tp);  // xf entered the vocab-parallel head replicated
  std::fill_n(dres_.f32(), Ns_ * C_, 0.0f);
  k::rmsnorm_backward(dres_.f32(), dw, dxn_.f32(), s.res.back().f32(), widen_norm_weight(w16), h.rstdf.f32(), Ns_, C_);
  norm_weight_grad(tp, dw);
}

void LlamaStage::block_backward_mixed(int i, ActivationSlot& slot, BlockActivations& a, const uint16_t* w16, float* dw,
                                      bool dw_zero, TensorParallelOps& tp) {
  const BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const DType t = spec_.precision;
  k::Gemm16& g = *spec_.gemm16;
  float* ws = gemm_ws_.defined() ? gemm_ws_.f32() : nullptr;
  const float* x = slot.res[static_cast<size_t>(i)].f32();
  float* dres = dres_.f32();          // (Ns, C) fp32; in: dL/d(block output); out: dL/d(block input)
  uint16_t* g16 = grad16_.float16();  // the rounded gradient entering the next GEMM backward
  // B of a split backward (dw null; llama_stage_f32.cc): the fp32 dres are kept and rounded again by W; the
  // rounded dgu and dqkv are kept as they are.
  const bool b_only = dw == nullptr;
  auto dW = [&](int64_t off) { return b_only ? nullptr : dw + off; };
  float* dln1 = b_only ? wnorm_row(slot, 2 * i) : dw + o.ln1;
  float* dln2 = b_only ? wnorm_row(slot, 2 * i + 1) : dw + o.ln2;
  // MLP: out = mid + down(h). The residual passes dres through unchanged to mid.
  if (b_only) keep_for_weight_pass(slot.res[static_cast<size_t>(i + 1)], dres);
  k::linear16_backward(dh_.f32(), dW(o.down), gathered_dres16(tp), a.h.float16(), w16 + o.down, N_, Fl_, C_, false, g,
                       ws, dw_zero);
  k::swiglu16_backward(g16, dh_.f32(), a.gu.float16(), N_, Fl_, t);  // dgu, rounded
  if (b_only) keep_for_weight_pass(a.gu, g16);
  k::linear16_backward(dxn_.f32(), dW(o.gu), g16, gathered_norm(tp, a.xn2).float16(), w16 + o.gu, N_, C_, 2 * Fl_,
                       false, g, ws, dw_zero);
  column_parallel_dgrad(tp);  // gate/up are column-parallel
  k::rmsnorm_backward(dres, dln2, dxn_.f32(), a.mid.f32(), widen_norm_weight(w16 + o.ln2), a.rstd2.f32(), Ns_, C_);
  norm_weight_grad(tp, dln2);
  // Attention: mid = x + o(attn).
  if (b_only) keep_for_weight_pass(a.mid, dres);
  k::linear16_backward(dattn_.f32(), dW(o.o), gathered_dres16(tp), a.attn.float16(), w16 + o.o, N_, Hl_ * D_, C_, false,
                       g, ws, dw_zero);
  float16_from_f32(g16, dattn_.f32(), N_ * Hl_ * D_, t);
  k::attention16_backward(dqkv_.f32(), g16, a.qkv.float16(), probs_of(a).float16(), B_, T_, Hl_, KVl_, D_, g,
                          att_scratch_.f32(), ws);
  k::rope_backward(dqkv_.f32(), dqkv_.f32(), rope_cos_.f32(), rope_sin_.f32(), B_, T_, Hl_ + KVl_, D_, Wqkv_);
  float16_from_f32(g16, dqkv_.f32(), N_ * Wqkv_, t);
  if (b_only) keep_for_weight_pass(a.qkv, g16);
  k::linear16_backward(dxn_.f32(), dW(o.qkv), g16, gathered_norm(tp, a.xn1).float16(), w16 + o.qkv, N_, C_, Wqkv_,
                       false, g, ws, dw_zero);
  column_parallel_dgrad(tp);  // q/k/v are column-parallel
  k::rmsnorm_backward(dres, dln1, dxn_.f32(), x, widen_norm_weight(w16 + o.ln1), a.rstd1.f32(), Ns_, C_);
  norm_weight_grad(tp, dln1);
}

}  // namespace sp::model
