// RunConfig's names and its JSON form (the contract's "config"); reading one is run_config_read.cc, the TOML
// files and --set run_config_toml.cc.
#include "config/run_config.h"

#include <fmt/format.h>

#include "core/json_io.h"

namespace sp::config {
using nlohmann::json;

std::string schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kGpipe:
      return "gpipe";
    case Schedule::k1F1B:
      return "1f1b";
    case Schedule::kInterleaved:
      return "interleaved";
    case Schedule::kZbH1:
      return "zb-h1";
  }
  return "?";
}
std::string reduction_name(Reduction r) { return r == Reduction::kDeterministic ? "deterministic" : "fast"; }
std::string architecture_name(Architecture a) { return a == Architecture::kAllReduce ? "allreduce" : "ps"; }
std::string staleness_schedule_name(StalenessSchedule s) { return s == StalenessSchedule::kFixed ? "fixed" : "free"; }

optim::LrSchedule TrainConfig::schedule() const {
  optim::LrSchedule s{
      .kind = lr_schedule, .lr = lr, .min_lr = min_lr, .warmup_steps = warmup_steps, .total_steps = steps};
  if (lr_schedule == optim::LrScheduleKind::kCosine) return s;
  s.total_steps = schedule_steps > 0 ? schedule_steps : steps;
  s.warmup_type = warmup_type;
  s.warmup_min_lr = warmup_min_lr;
  s.warmup_min_ratio = warmup_min_ratio;
  s.cos_min_ratio = cos_min_ratio;
  return s;
}

json RunConfig::to_json() const {
  json m = model.to_json();
  json j = {
      {"name", name},
      {"model", m},
      {"train",
       {{"seed", train.seed},
        {"steps", train.steps},
        {"global_batch", train.global_batch},
        {"micro_batch_size", train.micro_batch_size},
        {"seq_len", train.seq_len},
        {"lr", train.lr},
        {"min_lr", train.min_lr},
        {"warmup_steps", train.warmup_steps},
        {"weight_decay", train.weight_decay},
        {"beta1", train.beta1},
        {"beta2", train.beta2},
        {"eps", train.eps},
        {"grad_clip", train.grad_clip},
        {"eval_every", train.eval_every},
        {"eval_batches", train.eval_batches},
        {"recompute", model::recompute_name(train.recompute)}}},
      {"parallel",
       {{"dp", parallel.dp},
        {"tp", parallel.tp},
        {"pp", parallel.pp},
        {"zero", parallel.zero},
        {"schedule", schedule_name(parallel.schedule)},
        {"virtual_stages", parallel.virtual_stages},
        {"reduction", reduction_name(parallel.reduction)},
        {"axis_order", parallel.axis_order},
        {"blas_threads", parallel.blas_threads}}},
      {"data",
       {{"sources", data.sources},
        {"vocab_size", data.vocab_size},
        {"eval_fraction", data.eval_fraction},
        {"seed", data.seed}}},
      {"evidence",
       {{"checksum_every", evidence.checksum_every},
        {"trace", evidence.trace},
        {"activation_digests", evidence.activation_digests},
        {"watchdog_seconds", evidence.watchdog_seconds},
        {"memory_budget_mb", evidence.memory_budget_mb},
        {"checkpoint_every", evidence.checkpoint_every},
        {"keep_last", evidence.keep_last},
        {"stop_on_divergence", evidence.stop_on_divergence}}},
      {"prove",
       {{"fault", prove.fault},
        {"checkpoint_step", prove.checkpoint_step},
        {"eval_margin", prove.eval_margin},
        {"anchor_every", prove.anchor_every}}},
  };
  // The DeepSpeed schedule keys appear only with a DeepSpeed schedule, so a cosine contract is unchanged.
  if (train.lr_schedule != optim::LrScheduleKind::kCosine) {
    j["train"]["lr_schedule"] = optim::lr_schedule_name(train.lr_schedule);
    j["train"]["warmup_type"] = optim::warmup_type_name(train.warmup_type);
    j["train"]["warmup_min_lr"] = train.warmup_min_lr;
    j["train"]["warmup_min_ratio"] = train.warmup_min_ratio;
    j["train"]["cos_min_ratio"] = train.cos_min_ratio;
    j["train"]["schedule_steps"] = train.schedule_steps;
  }
  // The mixed-precision keys appear only in 16-bit precision, so an fp32 contract is unchanged.
  if (train.precision.mixed()) {
    j["train"]["precision"] = model::precision_name(train.precision.compute);
    j["train"]["grad_dtype"] = model::precision_name(train.precision.grad);
    j["train"]["gemm16"] = kernels::gemm16_kind_name(train.gemm16);
  }
  // train.gemm32 where it names a backend: a pinned one, or the one a run resolved "auto" to (its contract).
  if (train.gemm32 != kernels::Gemm32Kind::kAuto) j["train"]["gemm32"] = kernels::gemm32_kind_name(train.gemm32);
  if (fp16)
    j["fp16"] = {{"initial_scale_power", fp16->initial_scale_power},
                 {"loss_scale_window", fp16->window},
                 {"hysteresis", fp16->hysteresis},
                 {"consecutive_hysteresis", fp16->consecutive_hysteresis},
                 {"min_loss_scale", fp16->min_scale}};
  if (!deepspeed.is_null()) j["deepspeed"] = deepspeed;
  // Sequence parallelism appears only when it is on, so a contract without it is unchanged.
  if (parallel.sequence_parallel) j["parallel"]["sequence_parallel"] = true;
  // The overlap appears only when it is not the default, so a contract that leaves it alone is unchanged.
  if (parallel.overlap_buckets != ParallelConfig::kDefaultOverlapBuckets)
    j["parallel"]["overlap_buckets"] = parallel.overlap_buckets;
  // The parameter-server keys appear only when they are on, so an all-reduce contract is unchanged.
  if (parallel.parameter_server()) {
    j["parallel"]["architecture"] = architecture_name(parallel.architecture);
    j["parallel"]["servers"] = parallel.servers;
    j["parallel"]["staleness"] = parallel.staleness;
    j["parallel"]["staleness_schedule"] = staleness_schedule_name(parallel.staleness_schedule);
  }
  if (parallel.replay_workers > 0) {
    j["parallel"]["replay_workers"] = parallel.replay_workers;
    j["parallel"]["staleness"] = parallel.staleness;
  }
  if (!model_config.is_null()) j["model_config"] = model_config;         // absent without --model-config
  if (!data.tokenizer.empty()) j["data"]["tokenizer"] = data.tokenizer;  // absent for the engine's own BPE
  return j;
}

}  // namespace sp::config
