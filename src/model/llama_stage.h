// LlamaStage: forward and backward of one pipeline stage of a LLaMA decoder for one micro-batch.
// A stage owns global layers [layer_begin, layer_end), plus the embedding if it is first and the
// final norm, LM head and loss if it is last; with pp = 1 it is the whole model. It holds no
// parameters: ParamSource hands it each unit's flat buffer (UnitLayout order) and GradSink takes
// the gradients. Accumulation rule (STYLE.md): parameter gradients +=, activation gradients =,
// residual-stream gradients +=. The math is Hugging Face LLaMA's (docs/kernels.md):
//   h = embed(x);  per block: h += o(attn(rope(q,k), v)(rmsnorm₁(h)));  h += down(silu(gate)·up)(rmsnorm₂(h))
//   logits = lm_head(rmsnorm_f(h));  loss = Σ_tokens CE(logits, target) · loss_scale
// Activations of a micro-batch live in an ActivationSlot so that several micro-batches can be in
// flight (pipeline schedules); backward scratch is shared by all slots.
// Precision (model/precision.h): fp32, or bf16/fp16 mixed precision (llama_stage16.cc), where the
// working weights (the 16-bit views ParamSource::acquire returns), the activations saved for backward
// except the residual stream, and every GEMM input are 16-bit; the residual stream, norms, softmax, loss,
// parameter-gradient leaves and the pipeline's inputs/outputs stay fp32. Every cast: docs/kernels.md
// §"Every cast". One entry point per step (embedding, block, head; forward and backward) takes the
// weights as a typed view and runs the fp32 or the mixed-precision body, whose math differs (casts at
// different places); nothing above the stage chooses between them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/gemm16.h"
#include "model/llama_config.h"
#include "model/stage_hooks.h"
#include "model/weights.h"
#include "tensor/tensor.h"

namespace sp::model {

// Activation recomputation (docs/memory.md §"Recomputation"): none keeps every BlockActivations of every
// micro-batch in flight; selective keeps them all but the attention probabilities (B, Hl, T, T), which the
// backward rebuilds from the saved qkv into one buffer per stage (Korthikanti et al. 2022 §4.2: the score
// and softmax activations, the largest and cheapest to recompute); full keeps only each block's input and
// replays the whole block's forward in backward. The recomputed values are the forward's bits, so every
// mode trains the same bits.
enum class Recompute { kNone, kSelective, kFull };
const char* recompute_name(Recompute r);  // "none", "selective", "full"

struct StageSpec {
  int layer_begin = 0;  // global layer ids [layer_begin, layer_end)
  int layer_end = 0;
  bool first = true;  // embedding lives here
  bool last = true;   // final norm, lm_head and loss live here
  int tp_rank = 0;
  int tp_size = 1;
  int64_t micro_batch_size = 0;  // B
  int64_t seq_len = 0;           // T
  Recompute recompute = Recompute::kNone;
  // Sequence parallelism (tp > 1, T % tp == 0): the residual stream, the norms' inputs and statistics and
  // the pipeline boundary hold this rank's sequence shard, positions [tp_rank·T/tp, (tp_rank+1)·T/tp) of
  // each sequence: (B, T/tp, C), Ns = N/tp rows; the norm outputs are gathered to (N, C) for the
  // column-parallel GEMMs (stage_hooks.h, docs/memory.md).
  bool sequence_parallel = false;
  // The split backward of ZB-H1 (plan/schedule.h): backward_input() and backward_weight() instead of
  // backward(); each slot gets the blocks' norms' weight gradients (ActivationSlot::wnorm), and a last stage
  // holds one HeadActivations for all slots, without xf (B recomputes it: head_xf). Set where the schedule
  // splits the backward (plan::splits_backward: ZB-H1's pipeline ranks ≥ 1). Not with recompute = full or sequence
  // parallelism (the plan refuses both).
  bool split_backward = false;
  DType precision = DType::kF32;      // kF32, kBF16 or kF16 (model/precision.h: Precision::compute)
  kernels::Gemm16* gemm16 = nullptr;  // the 16-bit GEMM backend, of dtype `precision`; required when 16-bit
};

// Saved activations of one block for one micro-batch. Shapes use local (tensor-parallel) sizes:
// Hl = H/tp, KVl = KV/tp, Fl = F/tp, Wqkv = (Hl + 2·KVl)·D, N = B·T, Ns = N/tp under sequence
// parallelism, else N. Dtype: fp32, or in mixed precision
// the 16-bit compute dtype for those marked "16" (rstd and the residual stream stay fp32).
struct BlockActivations {
  Tensor xn1;    // (Ns, C)        input_layernorm output                  16
  Tensor rstd1;  // (Ns)
  Tensor qkv;    // (N, Wqkv)      q and k after RoPE, v                   16
  Tensor probs;  // (B, Hl, T, T)  causal softmax                          16  (undefined under selective)
  Tensor attn;   // (N, Hl·D)      attention output (o_proj input)         16
  Tensor mid;    // (Ns, C)        residual stream after attention
  Tensor xn2;    // (Ns, C)        post_attention_layernorm output         16
  Tensor rstd2;  // (Ns)
  Tensor gu;     // (N, 2·Fl)      [gate | up]                             16
  Tensor h;      // (N, Fl)        silu(gate)·up (down_proj input)         16
};

// The final norm's, the LM head's and the loss's activations of one micro-batch (last stage). Each slot has
// its own set, except under a split backward, where the stage holds ONE set (LlamaStage::head_of): the last
// stage runs every micro-batch's F and B back to back (plan/schedule.h), and B forms the head's weight
// gradients itself, so nothing here is read after B.
struct HeadActivations {
  Tensor xf;      // (Ns, C) final norm output (16-bit in mixed precision)
  Tensor rstdf;   // (Ns)
  Tensor logits;  // (N, Vl) local vocabulary shard; overwritten in place by dlogits in backward
  Tensor rowmax;  // (N)
  Tensor sumexp;  // (N)
  Tensor tlogit;  // (N)
  Tensor losses;  // (N)
};

struct ActivationSlot {
  int index = 0;
  int64_t micro_batch = -1;  // the micro-batch that occupies the slot
  Tensor inputs;             // (N) int32 token ids (first stage)
  Tensor targets;            // (N) int32 next-token ids, < 0 = ignored (last stage)
  std::vector<Tensor> res;   // n_local + 1 of (Ns, C): res[i] enters local layer i; res.back() leaves the stage
  std::vector<BlockActivations> blocks;  // one per local layer; empty under recompute = full, without probs
                                         // under recompute = selective
  HeadActivations head;                  // last stage; empty under a split backward (the stage's one set)
  // Split backward only: the blocks' norms' weight gradients, formed by B (rmsnorm's backward gives them with
  // dx), added into the leaves by W: (2·n_local, C) fp32, rows 2i / 2i + 1 = layer i's ln1 / ln2 (undefined
  // without layers). Between B and W the slot's dead buffers hold the linears' output gradients
  // (llama_stage_wgrad.cc).
  Tensor wnorm;
  // Split backward only: the stage's pooled set (LlamaStage::ForwardSet) this slot holds from its F to its B,
  // -1 when none; its tensors sit in the slot's fields (rstd1, rstd2, probs, and res[0] of a non-first stage
  // with layers) while attached, undefined otherwise.
  int forward_set = -1;
  float* input() { return res.front().f32(); }  // (Ns, C) receive buffer of a non-first stage
  float* output() { return res.back().f32(); }  // (Ns, C) send buffer of a non-last stage
};

// Mixed precision's own workspace of one chunk (docs/memory.md §"Mixed precision"): the widened norm
// weight (C floats), the 16-bit copy of the gradient that feeds the next GEMM (elements of the compute
// dtype) and the GEMM backend's workspace (floats; 0 with oneDNN). A pure function of the shapes and the
// resolved backend kind: what LlamaStage allocates and what the ledger model predicts.
struct Stage16Workspace {
  int64_t norm_weight = 0;
  int64_t grad16 = 0;
  int64_t gemm16 = 0;
  // Last stage: the LM head's fp32 product is staged in grad16's bytes, logit_rows rows at a time, and
  // rounded into the 16-bit logits (head_forward_mixed); its rows are also the CE kernels' row scratch.
  int64_t logit_rows = 0;
};
Stage16Workspace stage16_workspace(const LlamaConfig& config, int n_local, bool last, int tp, int64_t B, int64_t T,
                                   kernels::Gemm16Kind resolved);

class LlamaStage {
 public:
  LlamaStage(const LlamaConfig& config, const StageSpec& spec, MemoryLedger& ledger);

  const LlamaConfig& config() const { return config_; }
  bool mixed() const { return spec_.precision != DType::kF32; }
  const StageSpec& spec() const { return spec_; }
  int64_t tokens() const { return N_; }  // N = B·T
  // Elements of the residual stream that cross a pipeline boundary (input, output, grad_input/output):
  // Ns·C, the token shard under sequence parallelism.
  int64_t boundary_floats() const { return Ns_ * C_; }
  // Global unit ids held by this stage, in forward order.
  const std::vector<int>& unit_ids() const { return unit_ids_; }
  const UnitLayout& layout(int unit) const;

  // Allocates one slot's activations through the ledger (names "act.s<index>.*").
  std::unique_ptr<ActivationSlot> make_slot(int index) const;
  // Splits a (B, T+1) token window batch into the slot's inputs and targets.
  void load_tokens(ActivationSlot& slot, const int32_t* tokens) const;

  // Forward of one micro-batch. A non-first stage expects slot.input() filled by the caller. Returns the
  // sum of this micro-batch's per-token losses (last stage; summed in token order in double), else 0.
  // `observer` (optional) sees the activations at fixed points (stage_hooks.h); backward never calls it.
  double forward(ActivationSlot& slot, ParamSource& params, TensorParallelOps& tp,
                 ActivationObserver* observer = nullptr);
  // Backward of one micro-batch. A non-last stage expects grad_output() filled with dL/d(slot.output()).
  // Afterwards a non-first stage's grad_input() holds dL/d(slot.input()). loss_scale multiplies the
  // per-token loss gradients (1 / global target-token count: the loss is the mean over the global batch).
  void backward(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp, float loss_scale);
  // The two halves of backward() under a split backward (StageSpec::split_backward), which together leave
  // the same gradients, bit for bit, and the same grad_input(): backward_input() (B) forms every input
  // gradient (same inputs, communication and grad_input() as backward()), and on the last stage also the
  // head unit's weight gradients exactly as backward() does (its leaf()/done() first, as there), so the
  // stage's one HeadActivations is free after B; it keeps in the slot what the blocks' weight gradients
  // need (a first stage never splits: its W would directly follow its B). backward_weight() (W), later and with no
  // communication, forms those into the GradSink's leaves, with backward()'s leaf()/done() calls in backward()'s order.
  // The slot is busy until its W. Per unit, leaves still arrive in micro-batch order.
  void backward_input(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp,
                      float loss_scale);
  void backward_weight(ActivationSlot& slot, GradSink& grads);
  // Split backward only (docs/memory.md §"ZB-H1"): what only F → B reads (each block's rstd1, rstd2, probs,
  // and res[0] of a non-first stage with layers) is not in the slot but in a pool of sets ("act.fb<j>.*"),
  // one taken at each F (allocated when none is free) and returned after its B, so the pool holds as many
  // sets as micro-batches are between F and B (1F1B's slot count), not between F and W. The runner attaches
  // one before the slot's receive and forward (slot.micro_batch set) and releases it after B, or after the
  // forward of an evaluation; B checks (SP_CHECK) the set still holds its slot's micro-batch.
  void attach_forward_set(ActivationSlot& slot);
  void release_forward_set(ActivationSlot& slot);
  // The last stage's (N, Vl) logits of `slot` as stored: after forward() the logits, after the head's backward
  // its dlogits (rounded in place in mixed precision). The PyTorch oracle reads both (stage16_driver).
  ConstBufView logits(ActivationSlot& slot) { return head_of(slot).logits.cview(); }
  float* grad_output() { return dres_.f32(); }  // (Ns, C)
  float* grad_input() { return dres_.f32(); }   // (Ns, C)

 private:
  // The entry points: w is the unit's flat weights (ParamSource::acquire), w_lm the LM head's (a slice of
  // the head unit, or the tied embedding), dw / dw_lm the fp32 gradient leaves. Each checks the weights'
  // dtype against the stage's precision and runs the fp32 or the mixed-precision body.
  // The weights a hook handed over: the stage's precision and `count` elements (SP_CHECK naming `what`).
  void check_weights(const ConstBufView& w, int64_t count, const char* what) const;
  void embed_forward(ActivationSlot& slot, ConstBufView table);
  void block_forward(int local, ActivationSlot& slot, BlockActivations& a, ConstBufView w, TensorParallelOps& tp,
                     bool write_output);
  // dw_zero: dw is a fresh leaf (GradSink::leaf_is_zero), so the 16-bit products may overwrite their ranges.
  void block_backward(int local, ActivationSlot& slot, BlockActivations& a, ConstBufView w, BufView dw, bool dw_zero,
                      TensorParallelOps& tp);
  void head_forward(ActivationSlot& slot, ConstBufView w, ConstBufView w_lm, TensorParallelOps& tp);
  void head_backward(ActivationSlot& slot, ConstBufView w, ConstBufView w_lm, BufView dw, BufView dw_lm,
                     TensorParallelOps& tp, float loss_scale);
  // backward() (full) or backward_input() (not full: the blocks' dw below are null; the head's are its
  // leaves, as in backward()).
  void backward_pass(ActivationSlot& slot, ParamSource& params, GradSink& grads, TensorParallelOps& tp,
                     float loss_scale, bool full);
  // The W body (llama_stage_wgrad.cc): the weight gradients of block i from what B kept.
  void block_weight_grad(int local, ActivationSlot& slot, BlockActivations& a, float* dw, bool dw_zero);
  // B's destination of a norm's weight gradient: row `row` of slot.wnorm; and B's copy of an output
  // gradient into a buffer of the slot that B no longer reads (bytes of `dst`).
  float* wnorm_row(ActivationSlot& slot, int row) const { return slot.wnorm.f32() + row * C_; }
  static void keep_for_weight_pass(Tensor& dst, const void* src);
  // The LM head's weights inside the head unit's (or the tied embedding's, acquired by the caller).
  int64_t lm_head_offset() const;
  // The head activations of a slot: its own, or under a split backward the stage's one set, which holds
  // the micro-batch of the last forward (head_owner_) until its B.
  HeadActivations& head_of(ActivationSlot& s) { return s.head.logits.defined() ? s.head : head_; }
  // with_xf false: the split backward's set, which keeps no xf (head_xf).
  HeadActivations make_head_activations(const std::string& prefix, bool with_xf = true) const;
  // The final norm's output xf (Ns, C) of the compute dtype: the set's own, or, in the split backward's set,
  // tmp_, where the head's forward writes it and B recomputes it bit for bit from res.back() and rstdf
  // (rmsnorm_apply) just before the LM head's weight gradient reads it: tmp_ is free at both points (the
  // blocks' row-parallel sums are done; no sequence parallelism under a split backward). docs/memory.md §"ZB-H1".
  BufView head_xf(HeadActivations& h) {
    return h.xf.defined() ? h.xf.view() : BufView{tmp_.raw(), Ns_ * C_, spec_.precision};
  }
  // xf as the LM head's (N, C) input: head_xf, gathered under sequence parallelism.
  ConstBufView head_input(TensorParallelOps& tp, HeadActivations& h) {
    return h.xf.defined() ? gathered_norm(tp, h.xf) : ConstBufView(head_xf(h));
  }
  // Cross-entropy of h.logits (fp32 in every precision), vocabulary-parallel; targets (N) int32.
  void head_loss(HeadActivations& h, const int32_t* targets, TensorParallelOps& tp);
  BlockActivations make_block_activations(const std::string& prefix, bool with_probs = true,
                                          bool with_rstd = true) const;
  // The probabilities block i reads and writes: its own, or under recompute = selective the stage's shared
  // buffer, which recompute_probs() refills from the saved qkv before the block's backward.
  Tensor& probs_of(BlockActivations& a) { return a.probs.defined() ? a.probs : probs_; }
  void recompute_probs(BlockActivations& a);
  // The fp32 bodies (llama_stage.cc).
  void block_forward_f32(int local, ActivationSlot& slot, BlockActivations& a, const float* w, TensorParallelOps& tp,
                         bool write_output);
  void block_backward_f32(int local, ActivationSlot& slot, BlockActivations& a, const float* w, float* dw,
                          TensorParallelOps& tp);
  void head_forward_f32(ActivationSlot& slot, const float* w, const float* w_lm, TensorParallelOps& tp);
  void head_backward_f32(ActivationSlot& slot, const float* w, const float* w_lm, float* dw, float* dw_lm,
                         TensorParallelOps& tp, float loss_scale);
  // The mixed-precision bodies (llama_stage16.cc): the same steps with 16-bit weights w16, fp32 gradient leaves.
  void block_forward_mixed(int local, ActivationSlot& slot, BlockActivations& a, const uint16_t* w16,
                           TensorParallelOps& tp, bool write_output);
  void block_backward_mixed(int local, ActivationSlot& slot, BlockActivations& a, const uint16_t* w16, float* dw,
                            bool dw_zero, TensorParallelOps& tp);
  void head_forward_mixed(ActivationSlot& slot, const uint16_t* w16, const uint16_t* w_lm16, TensorParallelOps& tp);
  void head_backward_mixed(ActivationSlot& slot, const uint16_t* w16, const uint16_t* w_lm16, float* dw, float* dw_lm,
                           TensorParallelOps& tp, float loss_scale);
  void allocate_mixed_workspace();
  // Sequence parallelism's steps, shared by both bodies (llama_stage.cc); each is the plain TP step when off.
  bool sp() const { return spec_.sequence_parallel; }
  // A saved norm output as the (N, C) input of a column-parallel GEMM: the tensor itself, or under SP its
  // (Ns, C) shard all-gathered into xn_full_ — in forward, and again in backward for the weight gradient
  // (Korthikanti et al. 2022 §4.2.2: only the shard is kept).
  ConstBufView gathered_norm(TensorParallelOps& tp, const Tensor& xn);
  // tmp_ holds a row-parallel layer's (N, C) partial products: out (Ns, C) := x + their sum (this rank's
  // rows). out null: the recompute replay's discarded block output, reduced all the same.
  void row_parallel_residual(TensorParallelOps& tp, float* out, const float* x);
  // dxn_ holds a column-parallel layer's (N, C) partial input gradients: summed over the group into its
  // first Ns rows, the rows the norm's backward reads.
  void column_parallel_dgrad(TensorParallelOps& tp);
  // dw (C): a replicated norm weight's gradient, computed on this rank's tokens, summed over the group.
  void norm_weight_grad(TensorParallelOps& tp, float* dw);
  // dres_ (Ns, C) as the (N, C) gradient a row-parallel layer's backward reads: dres_ itself, or gathered
  // into tmp_; the mixed-precision variant rounds it into grad16_ first (the same bits either way).
  const float* gathered_dres(TensorParallelOps& tp);
  const uint16_t* gathered_dres16(TensorParallelOps& tp);
  const float* widen_norm_weight(const uint16_t* w16);  // (C) into norm_w_

  LlamaConfig config_;
  StageSpec spec_;
  MemoryLedger* ledger_;
  int64_t B_, T_, N_, C_, D_, Hl_, KVl_, Fl_, Vl_, v_begin_, Wqkv_;
  int64_t Ns_;  // this rank's token rows: N/tp under sequence parallelism, else N
  int n_local_;
  std::vector<int> unit_ids_;
  std::vector<UnitLayout> layouts_;  // indexed like unit_ids_
  Tensor rope_cos_, rope_sin_;       // (T, D/2)
  // Backward scratch shared by all slots (category workspace).
  Tensor tmp_;    // (N, C) row-parallel partial output
  Tensor dres_;   // (Ns, C) gradient of the residual stream
  Tensor dxn_;    // (N, C)
  Tensor dqkv_;   // (N, Wqkv)
  Tensor dattn_;  // (N, Hl·D)
  Tensor dgu_;    // (N, 2·Fl)
  Tensor dh_;     // (N, Fl)
  Tensor att_scratch_;
  std::vector<BlockActivations> recompute_;  // one shared set under recompute = full
  Tensor probs_;  // (B, Hl, T, T) the shared probabilities under recompute = selective ("recompute.probs")
  // Split backward, last stage only: the one set of head activations ("head.*", category activation), and
  // the micro-batch whose forward last wrote it (B checks it is its own: F and B back to back).
  HeadActivations head_;
  int64_t head_owner_ = -1;
  // Split backward: the pool of F → B sets (attach_forward_set); per set the micro-batch it holds (-1: free).
  struct ForwardSet {
    int64_t micro_batch = -1;
    std::vector<Tensor> rstd1, rstd2, probs;  // per local layer; probs empty under recompute = selective
    Tensor res0;                              // non-first stage with layers: the received input
  };
  bool pools_res0() const { return spec_.split_backward && !spec_.first && n_local_ > 0; }
  void swap_forward_set(ActivationSlot& slot, ForwardSet& set);
  std::vector<std::unique_ptr<ForwardSet>> forward_sets_;
  std::vector<int> free_forward_sets_;
  // Mixed precision only (workspace): the widened norm weight (C), the 16-bit copy of whichever
  // gradient feeds the next GEMM (max over dres, dgu, dattn, dqkv of this stage; on the last stage also the
  // head's fp32 product, logit_rows_ rows at a time), and the Gemm16 backend's workspace (the fallback's
  // widened operands; none for oneDNN).
  Tensor norm_w_;
  Tensor grad16_;
  int64_t logit_rows_ = 0;
  float* logit_staging() { return static_cast<float*>(grad16_.raw()); }  // (logit_rows_, Vl) fp32
  // Sequence parallelism only (workspace): the gathered (N, C) norm output, of the compute dtype.
  Tensor xn_full_;
  Tensor gemm_ws_;
};

}  // namespace sp::model
