// LlamaStage (llama_stage.h): construction, activation slots, the entry points that pick the fp32
// (llama_stage_f32.cc) or mixed-precision (llama_stage16.cc) body (the head's: llama_stage_head.cc), and the
// forward and backward of a micro-batch, which call the hooks (stage_hooks.h) in the same order in every
// precision.
#include "model/llama_stage.h"

#include <fmt/format.h>

#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention16.h"
#include "kernels/embedding.h"
#include "kernels/pointwise16.h"
#include "kernels/rope.h"
#include "model/block_offsets.h"
#include "tensor/float16.h"

namespace sp::model {
namespace k = sp::kernels;

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
  SP_CHECK(!spec.sequence_parallel || (tp > 1 && T_ % tp == 0), "sequence parallelism with tp = {}, seq_len = {}", tp,
           T_);
  Ns_ = spec.sequence_parallel ? N_ / tp : N_;
  SP_CHECK(!spec.split_backward || !spec.first,
           "a split backward on a first stage: its W would directly follow its B, the full backward "
           "(plan::splits_backward)");

  unit_ids_ = chunk_units(config, spec.layer_begin, spec.layer_end, spec.first, spec.last);
  for (int id : unit_ids_) layouts_.push_back(unit_layout(config, id, spec.tp_rank, tp));

  MemoryLedger& m = ledger;
  const auto W = Category::kWorkspace;
  rope_cos_ = Tensor(m, "rope.cos", W, {T_, D_ / 2});
  rope_sin_ = Tensor(m, "rope.sin", W, {T_, D_ / 2});
  k::rope_tables(rope_cos_.f32(), rope_sin_.f32(), T_, D_, config.rope_theta);
  tmp_ = Tensor(m, "scratch.tmp", W, {N_, C_});
  dres_ = Tensor(m, "scratch.dres", W, {Ns_, C_});
  if (n_local_ > 0 || spec.last) dxn_ = Tensor(m, "scratch.dxn", W, {N_, C_});
  if (n_local_ > 0) {
    dqkv_ = Tensor(m, "scratch.dqkv", W, {N_, Wqkv_});
    dattn_ = Tensor(m, "scratch.dattn", W, {N_, Hl_ * D_});
    dgu_ = Tensor(m, "scratch.dgu", W, {N_, 2 * Fl_});
    dh_ = Tensor(m, "scratch.dh", W, {N_, Fl_});
    att_scratch_ = Tensor(m, "scratch.attention", W,
                          {mixed() ? k::attention16_scratch_floats(T_, D_) : k::attention_scratch_floats(T_)});
    if (spec.recompute == Recompute::kFull) recompute_.push_back(make_block_activations("recompute"));
    if (spec.recompute == Recompute::kSelective)
      probs_ = Tensor(m, "recompute.probs", Category::kActivation, {B_, Hl_, T_, T_}, spec.precision);
  }
  if (mixed()) allocate_mixed_workspace();
  if (spec.sequence_parallel && (n_local_ > 0 || spec.last))
    xn_full_ = Tensor(m, "scratch.xn_full", W, {N_, C_}, spec.precision);
  if (spec.split_backward && spec.last) head_ = make_head_activations("act.head", /*with_xf=*/false);
}

const UnitLayout& LlamaStage::layout(int unit) const {
  for (size_t i = 0; i < unit_ids_.size(); ++i)
    if (unit_ids_[i] == unit) return layouts_[i];
  SP_CHECK(false, "unit {} is not on this stage", unit);
  __builtin_unreachable();
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

BlockActivations LlamaStage::make_block_activations(const std::string& p, bool with_probs, bool with_rstd) const {
  MemoryLedger& m = *ledger_;
  const auto A = Category::kActivation;
  const DType h = spec_.precision;  // the stored dtype of GEMM inputs and probabilities (F32 in fp32 mode)
  BlockActivations a;
  a.xn1 = Tensor(m, p + ".xn1", A, {Ns_, C_}, h);
  if (with_rstd) a.rstd1 = Tensor(m, p + ".rstd1", A, {Ns_});
  a.qkv = Tensor(m, p + ".qkv", A, {N_, Wqkv_}, h);
  if (with_probs) a.probs = Tensor(m, p + ".probs", A, {B_, Hl_, T_, T_}, h);
  a.attn = Tensor(m, p + ".attn", A, {N_, Hl_ * D_}, h);
  a.mid = Tensor(m, p + ".mid", A, {Ns_, C_});
  a.xn2 = Tensor(m, p + ".xn2", A, {Ns_, C_}, h);
  if (with_rstd) a.rstd2 = Tensor(m, p + ".rstd2", A, {Ns_});
  a.gu = Tensor(m, p + ".gu", A, {N_, 2 * Fl_}, h);
  a.h = Tensor(m, p + ".h", A, {N_, Fl_}, h);
  return a;
}

HeadActivations LlamaStage::make_head_activations(const std::string& p, bool with_xf) const {
  MemoryLedger& m = *ledger_;
  const auto A = Category::kActivation;
  HeadActivations h;
  if (with_xf) h.xf = Tensor(m, p + ".xf", A, {Ns_, C_}, spec_.precision);
  h.rstdf = Tensor(m, p + ".rstdf", A, {Ns_});
  h.logits = Tensor(m, p + ".logits", A, {N_, Vl_}, spec_.precision);  // 16-bit in mixed precision
  h.rowmax = Tensor(m, p + ".rowmax", A, {N_});
  h.sumexp = Tensor(m, p + ".sumexp", A, {N_});
  h.tlogit = Tensor(m, p + ".tlogit", A, {N_});
  h.losses = Tensor(m, p + ".losses", A, {N_});
  return h;
}

std::unique_ptr<ActivationSlot> LlamaStage::make_slot(int index) const {
  MemoryLedger& m = *ledger_;
  const auto A = Category::kActivation;
  const std::string p = fmt::format("act.s{}", index);
  auto s = std::make_unique<ActivationSlot>();
  s->index = index;
  if (spec_.first) s->inputs = Tensor(m, p + ".inputs", Category::kIo, {N_}, DType::kI32);
  if (spec_.last) s->targets = Tensor(m, p + ".targets", Category::kIo, {N_}, DType::kI32);
  // Under a split backward what only F → B reads is in the stage's pool (attach_forward_set).
  const bool split = spec_.split_backward;
  s->res.resize(static_cast<size_t>(n_local_ + 1));
  for (int i = pools_res0() ? 1 : 0; i <= n_local_; ++i)
    s->res[static_cast<size_t>(i)] = Tensor(m, fmt::format("{}.res{}", p, i), A, Shape{Ns_, C_});
  if (spec_.recompute != Recompute::kFull)
    for (int i = 0; i < n_local_; ++i)
      s->blocks.push_back(make_block_activations(fmt::format("{}.layers.{}", p, spec_.layer_begin + i),
                                                 /*with_probs=*/!split && spec_.recompute == Recompute::kNone,
                                                 /*with_rstd=*/!split));
  if (spec_.last && !spec_.split_backward) s->head = make_head_activations(p);
  if (spec_.split_backward && n_local_ > 0) s->wnorm = Tensor(m, p + ".wnorm", A, {2 * n_local_, C_});
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
// The entry points: one per step, the fp32 or the mixed-precision body chosen by the weights' dtype.

int64_t LlamaStage::lm_head_offset() const {
  return config_.tie_embeddings ? 0 : layout(head_unit(config_)).tensor("lm_head.weight").offset;
}

void LlamaStage::check_weights(const ConstBufView& w, int64_t count, const char* what) const {
  SP_CHECK(w.dtype == spec_.precision, "{} weights are {}, the stage computes in {}", what, dtype_name(w.dtype),
           dtype_name(spec_.precision));
  SP_CHECK_EQ(w.count, count, "{} weights: element count", what);
}

void LlamaStage::embed_forward(ActivationSlot& slot, ConstBufView table) {
  check_weights(table, layout(embed_unit()).numel, "embedding");
  const auto* inputs = static_cast<const int32_t*>(slot.inputs.raw());
  float* out = sp() ? tmp_.f32() : slot.res[0].f32();  // (N, C): under SP reduce-scattered into res[0]
  if (mixed())
    k::embedding16_forward(out, inputs, table.float16(), N_, C_, v_begin_, Vl_, table.dtype);
  else
    k::embedding_forward(out, inputs, table.f32(), N_, C_, v_begin_, Vl_);
}

// ---------------------------------------------------------------------------------------------
// Sequence parallelism's steps (Korthikanti et al. 2022, §4.2.2): the all-reduce of a row-parallel output
// becomes a reduce-scatter to the token shard, the replicated input of a column-parallel GEMM an
// all-gather of the shards, and their backward the conjugates; the norms run on the shard.

ConstBufView LlamaStage::gathered_norm(TensorParallelOps& tp, const Tensor& xn) {
  if (!sp()) return xn.view();
  tp.gather_from_sp(xn.view(), xn_full_.view());
  return xn_full_.view();
}

void LlamaStage::row_parallel_residual(TensorParallelOps& tp, float* out, const float* x) {
  if (!sp()) {
    tp.reduce_from_tp(tmp_.view());
    if (out != nullptr) stage_detail::add(out, x, tmp_.f32(), N_ * C_);
    return;
  }
  float* dst = out != nullptr ? out : dxn_.f32();  // dxn_ is free during a recompute replay
  tp.reduce_scatter_to_sp(tmp_.view(), BufView{dst, Ns_ * C_, DType::kF32});
  if (out != nullptr) stage_detail::add(out, x, out, Ns_ * C_);  // x + Σ, as without SP
}

void LlamaStage::column_parallel_dgrad(TensorParallelOps& tp) {
  if (sp())
    tp.gather_from_sp_backward(dxn_.view(), dxn_.view().slice(0, Ns_ * C_));
  else
    tp.copy_to_tp_backward(dxn_.view());
}

void LlamaStage::norm_weight_grad(TensorParallelOps& tp, float* dw) {
  if (sp()) tp.reduce_replicated_grad(BufView{dw, C_, DType::kF32});
}

const float* LlamaStage::gathered_dres(TensorParallelOps& tp) {
  if (!sp()) return dres_.f32();
  tp.reduce_scatter_to_sp_backward(dres_.view(), tmp_.view());
  return tmp_.f32();
}

const uint16_t* LlamaStage::gathered_dres16(TensorParallelOps& tp) {
  const BufView g16{grad16_.raw(), N_ * C_, spec_.precision};
  if (!sp()) {
    float16_from_f32(g16.float16(), dres_.f32(), N_ * C_, spec_.precision);
    return g16.float16();
  }
  const BufView shard{dxn_.raw(), Ns_ * C_, spec_.precision};  // dxn_ is free before each row-parallel backward
  float16_from_f32(shard.float16(), dres_.f32(), Ns_ * C_, spec_.precision);
  tp.reduce_scatter_to_sp_backward(shard, g16);
  return g16.float16();
}

void LlamaStage::block_forward(int i, ActivationSlot& slot, BlockActivations& a, ConstBufView w, TensorParallelOps& tp,
                               bool write_output) {
  check_weights(w, layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))].numel, "block");
  if (mixed())
    block_forward_mixed(i, slot, a, w.float16(), tp, write_output);
  else
    block_forward_f32(i, slot, a, w.f32(), tp, write_output);
}

void LlamaStage::block_backward(int i, ActivationSlot& slot, BlockActivations& a, ConstBufView w, BufView dw,
                                bool dw_zero, TensorParallelOps& tp) {
  check_weights(w, layouts_[static_cast<size_t>(i + (spec_.first ? 1 : 0))].numel, "block");
  float* d = dw.data == nullptr ? nullptr : dw.f32();  // null: B of a split backward
  if (mixed())
    block_backward_mixed(i, slot, a, w.float16(), d, dw_zero, tp);
  else
    block_backward_f32(i, slot, a, w.f32(), d, tp);
}

void LlamaStage::recompute_probs(BlockActivations& a) {
  if (mixed())
    k::attention16_probs_forward(probs_.float16(), a.qkv.float16(), B_, T_, Hl_, KVl_, D_, *spec_.gemm16,
                                 att_scratch_.f32(), gemm_ws_.defined() ? gemm_ws_.f32() : nullptr);
  else
    k::attention_probs_forward(probs_.f32(), a.qkv.f32(), B_, T_, Hl_, KVl_, D_);
}

// ---------------------------------------------------------------------------------------------
// Forward and backward of a micro-batch: the same calls of the hooks, in the same order, in every precision.

double LlamaStage::forward(ActivationSlot& slot, ParamSource& params, TensorParallelOps& tp,
                           ActivationObserver* observer) {
  if (spec_.first) {
    embed_forward(slot, params.acquire(embed_unit()));
    // vocab-parallel lookup: each row is nonzero on one rank
    if (sp())
      tp.reduce_scatter_to_sp(tmp_.view(), slot.res[0].view());
    else
      tp.reduce_from_tp(slot.res[0].view());
    params.release(embed_unit());
    if (observer && !sp()) observer->observe("embed", slot.micro_batch, slot.res[0].cview());
  }
  for (int i = 0; i < n_local_; ++i) {
    const int layer = spec_.layer_begin + i, unit = block_unit(layer);
    BlockActivations& a = spec_.recompute != Recompute::kFull ? slot.blocks[static_cast<size_t>(i)] : recompute_[0];
    block_forward(i, slot, a, params.acquire(unit), tp, /*write_output=*/true);
    params.release(unit);
    if (observer && !sp())
      observer->observe(fmt::format("block.{}", layer).c_str(), slot.micro_batch,
                        slot.res[static_cast<size_t>(i + 1)].cview());
  }
  if (!spec_.last) return 0.0;
  HeadActivations& h = head_of(slot);
  head_owner_ = slot.micro_batch;
  const ConstBufView hw = params.acquire(head_unit(config_));
  const int64_t lm = Vl_ * C_;  // the LM head's local (Vl, C) weights
  head_forward(slot, hw, config_.tie_embeddings ? params.acquire(embed_unit()) : hw.slice(lm_head_offset(), lm), tp);
  if (observer) {
    // Under SP xf was gathered by head_forward. Mixed precision: xf and the logits are the stored 16-bit
    // values, which the observer widens.
    observer->observe("final_norm", slot.micro_batch, sp() ? xn_full_.cview() : ConstBufView(head_xf(h)));
    observer->observe("logits", slot.micro_batch, h.logits.cview());
  }
  params.release(head_unit(config_));
  if (config_.tie_embeddings) params.release(embed_unit());
  double sum = 0.0;
  const float* losses = h.losses.f32();
  for (int64_t n = 0; n < N_; ++n) sum += losses[n];
  return sum;
}

void LlamaStage::backward(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp,
                          float loss_scale) {
  backward_pass(slot, params, grads, tp, loss_scale, /*full=*/true);
}

void LlamaStage::backward_input(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp,
                                float loss_scale) {
  SP_CHECK(spec_.split_backward && !sp() && spec_.recompute != Recompute::kFull,
           "backward_input needs a split-backward stage without sequence parallelism or full recomputation");
  // The stage's one set of head activations holds the last forward's micro-batch: F and B back to back.
  SP_CHECK(!spec_.last || head_owner_ == slot.micro_batch,
           "B of micro-batch {} on the last stage, but its head activations hold micro-batch {}", slot.micro_batch,
           head_owner_);
  SP_CHECK(
      slot.forward_set >= 0 && forward_sets_[static_cast<size_t>(slot.forward_set)]->micro_batch == slot.micro_batch,
      "B of micro-batch {}, but its F → B set {} holds micro-batch {}", slot.micro_batch, slot.forward_set,
      slot.forward_set >= 0 ? forward_sets_[static_cast<size_t>(slot.forward_set)]->micro_batch : -1);
  if (slot.wnorm.defined()) std::memset(slot.wnorm.raw(), 0, slot.wnorm.nbytes());  // rmsnorm's backward adds (+=)
  backward_pass(slot, params, grads, tp, loss_scale, /*full=*/false);
}

void LlamaStage::backward_pass(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp,
                               float loss_scale, bool full) {
  if (spec_.last) {
    // Order of acquire and leaf calls as always: the head's weights, its leaf, then the tied embedding's. The
    // head's weight gradients are formed here in B too (backward_input), the same calls as in backward().
    const int64_t off = lm_head_offset(), lm = Vl_ * C_;
    const ConstBufView hw = params.acquire(head_unit(config_));
    const BufView hdw = grads.leaf(head_unit(config_));
    const ConstBufView w_lm = config_.tie_embeddings ? params.acquire(embed_unit()) : hw.slice(off, lm);
    const BufView dw_lm = config_.tie_embeddings ? grads.leaf(embed_unit()) : hdw.slice(off, lm);
    head_backward(slot, hw, w_lm, hdw, dw_lm, tp, loss_scale);
    params.release(head_unit(config_));
    if (config_.tie_embeddings) params.release(embed_unit());
    grads.done(head_unit(config_));
    head_owner_ = -1;
  }
  for (int i = n_local_ - 1; i >= 0; --i) {
    const int layer = spec_.layer_begin + i, unit = block_unit(layer);
    BlockActivations* a = spec_.recompute != Recompute::kFull ? &slot.blocks[static_cast<size_t>(i)] : &recompute_[0];
    const ConstBufView w = params.acquire(unit);
    // Under recompute = full, replay this block's forward from its saved input (output not rewritten);
    // under selective, only its probabilities from its saved qkv (no weights, no communication).
    if (spec_.recompute == Recompute::kFull) block_forward(i, slot, *a, w, tp, /*write_output=*/false);
    if (spec_.recompute == Recompute::kSelective) recompute_probs(*a);
    const BufView dw = full ? grads.leaf(unit) : BufView{};
    block_backward(i, slot, *a, w, dw, full && grads.leaf_is_zero(unit), tp);
    params.release(unit);
    if (full) grads.done(unit);
  }
  if (spec_.first) {  // a first stage never splits (constructor)
    // The lookup's gradient is a scatter-add of dres rows; reduce_from_tp's backward is the identity
    // (reduce_scatter_to_sp's is an all-gather).
    const float* dres = gathered_dres(tp);
    k::embedding_backward(grads.leaf(embed_unit()).f32(), dres, static_cast<const int32_t*>(slot.inputs.raw()), N_, C_,
                          v_begin_, Vl_);
    grads.done(embed_unit());
  }
}

}  // namespace sp::model
