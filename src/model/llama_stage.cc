#include "model/llama_stage.h"

#include <fmt/format.h>

#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention16.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/pointwise16.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/block_offsets.h"
#include "tensor/float16.h"

namespace sp::model {
namespace k = sp::kernels;

using stage_detail::add;
using stage_detail::BlockOffsets;

LlamaStage::LlamaStage(const LlamaConfig& config, const StageSpec& spec, MemoryLedger& ledger)
    : config_(config), spec_(spec), ledger_(&ledger) {
  SP_CHECK(spec.layer_begin >= 0 && spec.layer_begin <= spec.layer_end && spec.layer_end <= config.n_layers,
           "stage layers [{}, {}) outside [0, {})", spec.layer_begin, spec.layer_end, config.n_layers);
  B_ = spec.micro_batch_size;
  T_ = spec.seq_len;
  N_ = B_ * T_;
  C_ = config.dim;
  D_ = config.head_dim();
  const int tp = spec.tp_size;
  Hl_ = config.n_heads / tp;
  KVl_ = config.n_kv_heads / tp;
  Fl_ = config.ffn_dim / tp;
  Vl_ = config.vocab_size / tp;
  v_begin_ = Vl_ * spec.tp_rank;
  Wqkv_ = (Hl_ + 2 * KVl_) * D_;
  n_local_ = spec.layer_end - spec.layer_begin;
  SP_CHECK(T_ >= 1 && T_ <= config.max_seq, "seq_len {} outside [1, max_seq = {}]", T_, config.max_seq);

  unit_ids_ = chunk_units(config, spec.layer_begin, spec.layer_end, spec.first, spec.last);
  for (int id : unit_ids_) layouts_.push_back(unit_layout(config, id, spec.tp_rank, tp));

  MemoryLedger& m = ledger;
  const auto W = Category::kWorkspace;
  rope_cos_ = Tensor(m, "rope.cos", W, {T_, D_ / 2});
  rope_sin_ = Tensor(m, "rope.sin", W, {T_, D_ / 2});
  k::rope_tables(rope_cos_.f32(), rope_sin_.f32(), T_, D_, config.rope_theta);
  tmp_ = Tensor(m, "scratch.tmp", W, {N_, C_});
  dres_ = Tensor(m, "scratch.dres", W, {N_, C_});
  if (n_local_ > 0 || spec.last) dxn_ = Tensor(m, "scratch.dxn", W, {N_, C_});
  if (n_local_ > 0) {
    dqkv_ = Tensor(m, "scratch.dqkv", W, {N_, Wqkv_});
    dattn_ = Tensor(m, "scratch.dattn", W, {N_, Hl_ * D_});
    dgu_ = Tensor(m, "scratch.dgu", W, {N_, 2 * Fl_});
    dh_ = Tensor(m, "scratch.dh", W, {N_, Fl_});
    att_scratch_ = Tensor(m, "scratch.attention", W,
                          {mixed() ? k::attention16_scratch_floats(T_, D_) : k::attention_scratch_floats(T_)});
    if (spec.recompute == Recompute::kFull) recompute_.push_back(make_block_activations("recompute"));
  }
  if (mixed()) allocate_scratch16();
}

const UnitLayout& LlamaStage::layout(int unit) const {
  for (size_t i = 0; i < unit_ids_.size(); ++i)
    if (unit_ids_[i] == unit) return layouts_[i];
  SP_CHECK(false, "unit {} is not on this stage", unit);
  __builtin_unreachable();
}

BlockActivations LlamaStage::make_block_activations(const std::string& p) const {
  MemoryLedger& m = *ledger_;
  const auto A = Category::kActivation;
  const DType h = spec_.precision;  // the stored dtype of GEMM inputs and probabilities (F32 in fp32 mode)
  BlockActivations a;
  a.xn1 = Tensor(m, p + ".xn1", A, {N_, C_}, h);
  a.rstd1 = Tensor(m, p + ".rstd1", A, {N_});
  a.qkv = Tensor(m, p + ".qkv", A, {N_, Wqkv_}, h);
  a.probs = Tensor(m, p + ".probs", A, {B_, Hl_, T_, T_}, h);
  a.attn = Tensor(m, p + ".attn", A, {N_, Hl_ * D_}, h);
  a.mid = Tensor(m, p + ".mid", A, {N_, C_});
  a.xn2 = Tensor(m, p + ".xn2", A, {N_, C_}, h);
  a.rstd2 = Tensor(m, p + ".rstd2", A, {N_});
  a.gu = Tensor(m, p + ".gu", A, {N_, 2 * Fl_}, h);
  a.h = Tensor(m, p + ".h", A, {N_, Fl_}, h);
  return a;
}

std::unique_ptr<ActivationSlot> LlamaStage::make_slot(int index) const {
  MemoryLedger& m = *ledger_;
  const auto A = Category::kActivation;
  const std::string p = fmt::format("act.s{}", index);
  auto s = std::make_unique<ActivationSlot>();
  s->index = index;
  if (spec_.first) s->inputs = Tensor(m, p + ".inputs", Category::kIo, {N_}, DType::kI32);
  if (spec_.last) s->targets = Tensor(m, p + ".targets", Category::kIo, {N_}, DType::kI32);
  for (int i = 0; i <= n_local_; ++i) s->res.emplace_back(m, fmt::format("{}.res{}", p, i), A, Shape{N_, C_});
  if (spec_.recompute == Recompute::kNone)
    for (int i = 0; i < n_local_; ++i)
      s->blocks.push_back(make_block_activations(fmt::format("{}.layers.{}", p, spec_.layer_begin + i)));
  if (spec_.last) {
    s->xf = Tensor(m, p + ".xf", A, {N_, C_}, spec_.precision);
    s->rstdf = Tensor(m, p + ".rstdf", A, {N_});
    s->logits = Tensor(m, p + ".logits", A, {N_, Vl_});
    s->rowmax = Tensor(m, p + ".rowmax", A, {N_});
    s->sumexp = Tensor(m, p + ".sumexp", A, {N_});
    s->tlogit = Tensor(m, p + ".tlogit", A, {N_});
    s->losses = Tensor(m, p + ".losses", A, {N_});
  }
  return s;
}

void LlamaStage::load_tokens(ActivationSlot& slot, const int32_t* tokens) const {
  for (int64_t b = 0; b < B_; ++b) {
    const int32_t* row = tokens + b * (T_ + 1);
    if (spec_.first) std::memcpy(static_cast<int32_t*>(slot.inputs.raw()) + b * T_, row, sizeof(int32_t) * T_);
    if (spec_.last) std::memcpy(static_cast<int32_t*>(slot.targets.raw()) + b * T_, row + 1, sizeof(int32_t) * T_);
  }
}

// ---------------------------------------------------------------------------------------------
// Forward

void LlamaStage::block_forward(int i, ActivationSlot& slot, BlockActivations& a, const float* w, TensorParallelOps& tp,
                               bool write_output) {
  const BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const float* x = slot.res[static_cast<size_t>(i)].f32();  // (N, C)
  k::rmsnorm_forward(a.xn1.f32(), a.rstd1.f32(), x, w + o.ln1, N_, C_, config_.norm_eps);
  k::linear_forward(a.qkv.f32(), a.xn1.f32(), w + o.qkv, N_, C_, Wqkv_);
  // RoPE on the q and k heads, which are adjacent at the start of every qkv row.
  k::rope_forward(a.qkv.f32(), a.qkv.f32(), rope_cos_.f32(), rope_sin_.f32(), B_, T_, Hl_ + KVl_, D_, Wqkv_);
  k::attention_forward(a.attn.f32(), a.probs.f32(), a.qkv.f32(), B_, T_, Hl_, KVl_, D_);
  k::linear_forward(tmp_.f32(), a.attn.f32(), w + o.o, N_, Hl_ * D_, C_);
  tp.reduce_from_tp(tmp_.f32(), N_ * C_);  // o_proj is row-parallel: sum the partial products
  add(a.mid.f32(), x, tmp_.f32(), N_ * C_);
  k::rmsnorm_forward(a.xn2.f32(), a.rstd2.f32(), a.mid.f32(), w + o.ln2, N_, C_, config_.norm_eps);
  k::linear_forward(a.gu.f32(), a.xn2.f32(), w + o.gu, N_, C_, 2 * Fl_);
  k::swiglu_forward(a.h.f32(), a.gu.f32(), N_, Fl_);
  k::linear_forward(tmp_.f32(), a.h.f32(), w + o.down, N_, Fl_, C_);
  tp.reduce_from_tp(tmp_.f32(), N_ * C_);  // down_proj is row-parallel
  if (write_output) add(slot.res[static_cast<size_t>(i + 1)].f32(), a.mid.f32(), tmp_.f32(), N_ * C_);
}

void LlamaStage::head_forward(ActivationSlot& s, const float* w, const float* w_lm, TensorParallelOps& tp) {
  const float* x = s.res.back().f32();
  k::rmsnorm_forward(s.xf.f32(), s.rstdf.f32(), x, w, N_, C_, config_.norm_eps);
  k::linear_forward(s.logits.f32(), s.xf.f32(), w_lm, N_, C_, Vl_);  // vocab-parallel: (N, Vl)
  head_loss(s, tp);
}

void LlamaStage::head_loss(ActivationSlot& s, TensorParallelOps& tp) {
  // Vocabulary-parallel cross-entropy (Megatron): global max, global Σexp and the target logit from
  // whichever rank holds it, each one all-reduce over the tp group; no rank ever holds (N, V).
  const auto* targets = static_cast<const int32_t*>(s.targets.raw());
  k::cross_entropy_row_max(s.rowmax.f32(), s.logits.f32(), N_, Vl_);
  tp.all_reduce_max(s.rowmax.f32(), N_);
  k::cross_entropy_row_sumexp(s.sumexp.f32(), s.logits.f32(), s.rowmax.f32(), N_, Vl_);
  tp.all_reduce_sum(s.sumexp.f32(), N_);
  k::cross_entropy_target_logit(s.tlogit.f32(), s.logits.f32(), targets, N_, Vl_, v_begin_);
  tp.all_reduce_sum(s.tlogit.f32(), N_);
  k::cross_entropy_losses(s.losses.f32(), s.rowmax.f32(), s.sumexp.f32(), s.tlogit.f32(), targets, N_);
}

double LlamaStage::forward(ActivationSlot& slot, ParamSource& params, TensorParallelOps& tp,
                           ActivationObserver* observer) {
  if (spec_.first) {
    const auto* inputs = static_cast<const int32_t*>(slot.inputs.raw());
    if (mixed())
      k::embedding16_forward(slot.res[0].f32(), inputs, params.acquire16(embed_unit()), N_, C_, v_begin_, Vl_,
                             spec_.precision);
    else
      k::embedding_forward(slot.res[0].f32(), inputs, params.acquire(embed_unit()), N_, C_, v_begin_, Vl_);
    tp.reduce_from_tp(slot.res[0].f32(), N_ * C_);  // vocab-parallel lookup: each row is nonzero on one rank
    params.release(embed_unit());
    if (observer) observer->observe("embed", slot.micro_batch, slot.res[0].f32(), N_ * C_);
  }
  for (int i = 0; i < n_local_; ++i) {
    const int layer = spec_.layer_begin + i, unit = block_unit(layer);
    BlockActivations& a = spec_.recompute == Recompute::kNone ? slot.blocks[static_cast<size_t>(i)] : recompute_[0];
    if (mixed())
      block_forward16(i, slot, a, params.acquire16(unit), tp, /*write_output=*/true);
    else
      block_forward(i, slot, a, params.acquire(unit), tp, /*write_output=*/true);
    params.release(unit);
    if (observer)
      observer->observe(fmt::format("block.{}", layer).c_str(), slot.micro_batch,
                        slot.res[static_cast<size_t>(i + 1)].f32(), N_ * C_);
  }
  if (!spec_.last) return 0.0;
  const int64_t lm_offset = config_.tie_embeddings ? 0 : layout(head_unit(config_)).tensor("lm_head.weight").offset;
  if (mixed()) {
    const uint16_t* hw = params.acquire16(head_unit(config_));
    head_forward16(slot, hw, config_.tie_embeddings ? params.acquire16(embed_unit()) : hw + lm_offset, tp);
  } else {
    const float* hw = params.acquire(head_unit(config_));
    head_forward(slot, hw, config_.tie_embeddings ? params.acquire(embed_unit()) : hw + lm_offset, tp);
  }
  if (observer) {
    const float* xf = slot.xf.dtype() == DType::kF32 ? slot.xf.f32() : nullptr;
    if (xf == nullptr) {  // mixed precision: the observer sees the stored 16-bit values, widened (dxn_ is free here)
      f32_from_float16(dxn_.f32(), slot.xf.float16(), N_ * C_, slot.xf.dtype());
      xf = dxn_.f32();
    }
    observer->observe("final_norm", slot.micro_batch, xf, N_ * C_);
    observer->observe("logits", slot.micro_batch, slot.logits.f32(), N_ * Vl_);
  }
  params.release(head_unit(config_));
  if (config_.tie_embeddings) params.release(embed_unit());
  double sum = 0.0;
  const float* losses = slot.losses.f32();
  for (int64_t n = 0; n < N_; ++n) sum += losses[n];
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Backward

void LlamaStage::head_backward(ActivationSlot& s, const float* w, const float* w_lm, float* dw, float* dw_lm,
                               TensorParallelOps& tp, float loss_scale) {
  const auto* targets = static_cast<const int32_t*>(s.targets.raw());
  float* dlogits = s.logits.f32();  // in place: logits are not needed after this
  k::cross_entropy_backward(dlogits, s.logits.f32(), s.rowmax.f32(), s.sumexp.f32(), targets, N_, Vl_, v_begin_,
                            loss_scale);
  k::linear_backward(dxn_.f32(), dw_lm, dlogits, s.xf.f32(), w_lm, N_, C_, Vl_, /*accumulate_dx=*/false);
  tp.copy_to_tp_backward(dxn_.f32(), N_ * C_);  // xf entered the vocab-parallel head replicated
  std::memset(dres_.f32(), 0, sizeof(float) * static_cast<size_t>(N_ * C_));
  k::rmsnorm_backward(dres_.f32(), dw, dxn_.f32(), s.res.back().f32(), w, s.rstdf.f32(), N_, C_);
}

void LlamaStage::block_backward(int i, ActivationSlot& slot, BlockActivations& a, const float* w, float* dw,
                                TensorParallelOps& tp) {
  const BlockOffsets o(layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))]);
  const float* x = slot.res[static_cast<size_t>(i)].f32();
  float* dres = dres_.f32();  // in: dL/d(block output); out: dL/d(block input)
  // MLP: out = mid + down(h). The residual passes dres through unchanged to mid.
  k::linear_backward(dh_.f32(), dw + o.down, dres, a.h.f32(), w + o.down, N_, Fl_, C_, false);
  k::swiglu_backward(dgu_.f32(), dh_.f32(), a.gu.f32(), N_, Fl_);
  k::linear_backward(dxn_.f32(), dw + o.gu, dgu_.f32(), a.xn2.f32(), w + o.gu, N_, C_, 2 * Fl_, false);
  tp.copy_to_tp_backward(dxn_.f32(), N_ * C_);  // gate/up are column-parallel
  k::rmsnorm_backward(dres, dw + o.ln2, dxn_.f32(), a.mid.f32(), w + o.ln2, a.rstd2.f32(), N_, C_);
  // Attention: mid = x + o(attn).
  k::linear_backward(dattn_.f32(), dw + o.o, dres, a.attn.f32(), w + o.o, N_, Hl_ * D_, C_, false);
  k::attention_backward(dqkv_.f32(), att_scratch_.f32(), dattn_.f32(), a.qkv.f32(), a.probs.f32(), B_, T_, Hl_, KVl_,
                        D_);
  k::rope_backward(dqkv_.f32(), dqkv_.f32(), rope_cos_.f32(), rope_sin_.f32(), B_, T_, Hl_ + KVl_, D_, Wqkv_);
  k::linear_backward(dxn_.f32(), dw + o.qkv, dqkv_.f32(), a.xn1.f32(), w + o.qkv, N_, C_, Wqkv_, false);
  tp.copy_to_tp_backward(dxn_.f32(), N_ * C_);  // q/k/v are column-parallel
  k::rmsnorm_backward(dres, dw + o.ln1, dxn_.f32(), x, w + o.ln1, a.rstd1.f32(), N_, C_);
}

void LlamaStage::backward(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp,
                          float loss_scale) {
  if (spec_.last) {
    // Order of acquire and leaf calls as always: the head's weights, its leaf, then the tied embedding's.
    const int64_t off = config_.tie_embeddings ? 0 : layout(head_unit(config_)).tensor("lm_head.weight").offset;
    if (mixed()) {
      const uint16_t* hw = params.acquire16(head_unit(config_));
      float* hdw = grads.leaf(head_unit(config_));
      const uint16_t* w_lm = config_.tie_embeddings ? params.acquire16(embed_unit()) : hw + off;
      float* dw_lm = config_.tie_embeddings ? grads.leaf(embed_unit()) : hdw + off;
      head_backward16(slot, hw, w_lm, hdw, dw_lm, tp, loss_scale);
    } else {
      const float* hw = params.acquire(head_unit(config_));
      float* hdw = grads.leaf(head_unit(config_));
      const float* w_lm = config_.tie_embeddings ? params.acquire(embed_unit()) : hw + off;
      float* dw_lm = config_.tie_embeddings ? grads.leaf(embed_unit()) : hdw + off;
      head_backward(slot, hw, w_lm, hdw, dw_lm, tp, loss_scale);
    }
    params.release(head_unit(config_));
    if (config_.tie_embeddings) params.release(embed_unit());
    grads.done(head_unit(config_));
  }
  for (int i = n_local_ - 1; i >= 0; --i) {
    const int layer = spec_.layer_begin + i, unit = block_unit(layer);
    BlockActivations* a = spec_.recompute == Recompute::kNone ? &slot.blocks[static_cast<size_t>(i)] : &recompute_[0];
    // Under recompute = full, replay this block's forward from its saved input (output not rewritten).
    if (mixed()) {
      const uint16_t* w16 = params.acquire16(unit);
      if (spec_.recompute == Recompute::kFull) block_forward16(i, slot, *a, w16, tp, /*write_output=*/false);
      block_backward16(i, slot, *a, w16, grads.leaf(unit), tp);
    } else {
      const float* w = params.acquire(unit);
      if (spec_.recompute == Recompute::kFull) block_forward(i, slot, *a, w, tp, /*write_output=*/false);
      block_backward(i, slot, *a, w, grads.leaf(unit), tp);
    }
    params.release(unit);
    grads.done(unit);
  }
  if (spec_.first) {
    // The lookup's gradient is a scatter-add of dres rows; reduce_from_tp's backward is the identity.
    k::embedding_backward(grads.leaf(embed_unit()), dres_.f32(), static_cast<const int32_t*>(slot.inputs.raw()), N_, C_,
                          v_begin_, Vl_);
    grads.done(embed_unit());
  }
}

}  // namespace sp::model
