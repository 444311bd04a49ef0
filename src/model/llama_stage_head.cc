// LlamaStage's LM head (llama_stage.h): the entry points that pick the fp32 (llama_stage_f32.cc) or
// mixed-precision (llama_stage16.cc) body, and the vocabulary-parallel cross-entropy both share, over fp32
// logits or, in mixed precision, 16-bit ones (kernels/cross_entropy16.h).
#include "kernels/cross_entropy.h"
#include "kernels/cross_entropy16.h"
#include "model/llama_stage.h"

namespace sp::model {
namespace k = sp::kernels;

void LlamaStage::head_forward(ActivationSlot& slot, ConstBufView w, ConstBufView w_lm, TensorParallelOps& tp) {
  check_weights(w, layout(head_unit(config_)).numel, "head");
  check_weights(w_lm, Vl_ * C_, "lm_head");
  if (mixed())
    head_forward_mixed(slot, w.float16(), w_lm.float16(), tp);
  else
    head_forward_f32(slot, w.f32(), w_lm.f32(), tp);
}

void LlamaStage::head_backward(ActivationSlot& slot, ConstBufView w, ConstBufView w_lm, BufView dw, BufView dw_lm,
                               TensorParallelOps& tp, float loss_scale) {
  check_weights(w, layout(head_unit(config_)).numel, "head");
  check_weights(w_lm, Vl_ * C_, "lm_head");
  float* d = dw.data == nullptr ? nullptr : dw.f32();  // null: B of a split backward
  float* d_lm = dw_lm.data == nullptr ? nullptr : dw_lm.f32();
  if (mixed())
    head_backward_mixed(slot, w.float16(), w_lm.float16(), d, d_lm, tp, loss_scale);
  else
    head_backward_f32(slot, w.f32(), w_lm.f32(), d, d_lm, tp, loss_scale);
}

void LlamaStage::head_loss(HeadActivations& s, const int32_t* targets, TensorParallelOps& tp) {
  // Vocabulary-parallel cross-entropy (Megatron): global max, global Σexp and the target logit from
  // whichever rank holds it, each one all-reduce over the tp group; no rank ever holds (N, V).
  // Mixed precision: the 16-bit logits widened row by row into logit_staging() (cross_entropy16.h).
  const DType t = spec_.precision;
  if (mixed())
    k::cross_entropy16_row_max(s.rowmax.f32(), s.logits.float16(), N_, Vl_, t, logit_staging());
  else
    k::cross_entropy_row_max(s.rowmax.f32(), s.logits.f32(), N_, Vl_);
  tp.all_reduce_max(s.rowmax.view());
  if (mixed())
    k::cross_entropy16_row_sumexp(s.sumexp.f32(), s.logits.float16(), s.rowmax.f32(), N_, Vl_, t, logit_staging());
  else
    k::cross_entropy_row_sumexp(s.sumexp.f32(), s.logits.f32(), s.rowmax.f32(), N_, Vl_);
  tp.all_reduce_sum(s.sumexp.view());
  if (mixed())
    k::cross_entropy16_target_logit(s.tlogit.f32(), s.logits.float16(), targets, N_, Vl_, v_begin_, t);
  else
    k::cross_entropy_target_logit(s.tlogit.f32(), s.logits.f32(), targets, N_, Vl_, v_begin_);
  tp.all_reduce_sum(s.tlogit.view());
  k::cross_entropy_losses(s.losses.f32(), s.rowmax.f32(), s.sumexp.f32(), s.tlogit.f32(), targets, N_);
}

}  // namespace sp::model
