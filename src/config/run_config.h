// RunConfig: everything that defines a run, read from a TOML preset plus `--set key=value`
// overrides (run_config_toml.cc), strictly (run_config_read.cc, through core/json_io's JsonFields):
// unknown keys, wrong types and out-of-range values are errors that name the key, its value and the
// rule. Validation against a world size (the full dp·tp·pp equation, batch divisibility, TP/PP
// divisibility, unsupported combinations) is plan/run_plan.h and runs on every rank before any
// communication. Schema and defaults: docs/config.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/matmul.h"
#include "model/llama_config.h"
#include "model/llama_stage.h"
#include "model/precision.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"

namespace sp::config {

// kZbH1: zero-bubble ZB-H1 (Qi et al. 2023), the backward split into input- and weight-gradient passes.
enum class Schedule { kGpipe, k1F1B, kInterleaved, kZbH1 };
enum class Reduction { kDeterministic, kFast };
// How a step's gradients become the next parameters: peers all-reducing them (DP/ZeRO), or worker
// ranks pushing them to server ranks that own the parameters (docs/ps.md).
enum class Architecture { kAllReduce, kParameterServer };
// Which stale version a parameter-server worker computes on (docs/ps.md §"Not yet", SSP): a fixed, documented
// schedule (reproducible bit for bit) or whatever has arrived within the bound (free-running).
enum class StalenessSchedule { kFixed, kFree };

struct TrainConfig {
  uint64_t seed = 1234;
  int64_t steps = 20;
  int64_t global_batch = 8;      // sequences per step
  int64_t micro_batch_size = 2;  // B; micro-batches per step M = global_batch / B
  int64_t seq_len = 128;         // T
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup_steps = 2;
  // The schedule (optim/lr_schedule.h): "cosine" (the default: warmup_steps, lr, min_lr, steps) or one of
  // DeepSpeed's, with their parameters; the DeepSpeed keys appear in the JSON only with a DeepSpeed schedule.
  optim::LrScheduleKind lr_schedule = optim::LrScheduleKind::kCosine;
  optim::WarmupType warmup_type = optim::WarmupType::kLog;
  double warmup_min_lr = 0.0;     // WarmupLR / WarmupDecayLR start
  double warmup_min_ratio = 0.0;  // WarmupCosineLR start, × lr
  double cos_min_ratio = 1e-4;    // WarmupCosineLR floor, × lr
  int64_t schedule_steps = 0;     // DeepSpeed's total_num_steps; 0 = steps
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;   // max global L2 norm; 0 = off
  int64_t eval_every = 10;  // 0 = only at the end
  int64_t eval_batches = 4;
  model::Recompute recompute = model::Recompute::kNone;
  // Mixed precision (docs/config.md, model/precision.h): the compute dtype, the gradient dtype and
  // the 16-bit GEMM backend (kernels/gemm16.h; "auto" resolves at run time, RunPlan::gemm16).
  model::Precision precision;  // train.precision = "fp32" | "bf16" | "fp16", train.grad_dtype = "fp32" | 16-bit
  kernels::Gemm16Kind gemm16 = kernels::Gemm16Kind::kAuto;  // train.gemm16 = "auto" | "onednn" | "fallback"
  // The fp32 GEMM backend (kernels/matmul.h): train.gemm32 = "auto" (default: the faster on this host,
  // kernels/gemm32_auto.h) | "openblas" | "onednn". A run resolves "auto" before its contract, which records the
  // backend that ran (parallel/trainer.cc), so a contract never says "auto".
  kernels::Gemm32Kind gemm32 = kernels::Gemm32Kind::kAuto;
  int64_t micro_batches() const { return global_batch / micro_batch_size; }
  // The schedule these keys describe, as the engine runs it.
  optim::LrSchedule schedule() const;
};

struct ParallelConfig {
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;  // 0 (plain DP), 1, 2, 3
  Schedule schedule = Schedule::k1F1B;
  int virtual_stages = 1;  // v, interleaved schedule only
  // Megatron sequence parallelism (tp > 1, train.seq_len % tp == 0; docs/config.md): the norms, residual adds
  // and the head's input hold 1/tp of the tokens; the TP all-reduces become reduce-scatter + all-gather.
  bool sequence_parallel = false;
  Reduction reduction = Reduction::kDeterministic;
  // DP gradient syncs in flight at once while the backward goes on (GradStore; docs/performance.md §"DP sync
  // overlapped with the backward"); 0: each unit's sync blocks at its last micro-batch. Timing only: the bits
  // are the same. Each in-flight deterministic sync has its own staging buffer.
  int overlap_buckets = kDefaultOverlapBuckets;
  static constexpr int kDefaultOverlapBuckets = 1;
  std::string axis_order = "tp-dp-pp";  // fastest-varying axis first
  int blas_threads = 1;                 // OpenBLAS threads per rank; results depend on it, so it is pinned
  // Parameter server (docs/ps.md): dp is then the number of worker ranks W, `servers` the server ranks S.
  Architecture architecture = Architecture::kAllReduce;
  int servers = 0;    // S; world = W + S
  int staleness = 0;  // s: a worker may compute step t on parameters of version ≥ t − s (0: BSP)
  StalenessSchedule staleness_schedule = StalenessSchedule::kFixed;
  // W ≥ 1: one process replays a W-worker parameter-server run under the fixed staleness schedule
  // (comm/staleness.h): the test oracle of SSP; 0: off.
  int replay_workers = 0;
  bool parameter_server() const { return architecture == Architecture::kParameterServer; }
  int workers() const { return dp * tp * pp; }  // the ranks of the (dp, tp, pp) grid
  int world() const { return workers() + servers; }
};

struct DataConfig {
  std::string sources = "data/sources.json";  // relative paths resolve against the repository/config root
  // A user's tokenizer: a SentencePiece tokenizer.model or a Hugging Face tokenizer.json (docs/data.md),
  // resolved like `sources`; empty: the engine's byte-level BPE trained on the train split. vocab_size must
  // be the tokenizer's.
  std::string tokenizer;
  int64_t vocab_size = 2048;
  double eval_fraction = 0.05;
  uint64_t seed = 1234;
};

struct EvidenceConfig {
  int64_t checksum_every = 1;  // steps; 0 = off
  bool trace = true;
  bool activation_digests = false;
  double watchdog_seconds = 120;  // 0 = off
  double memory_budget_mb = 0;    // per rank, 0 = none
  int64_t checkpoint_every = 0;   // steps; 0 = none
  int64_t keep_last = 2;
  bool stop_on_divergence = true;  // replica mismatch or non-finite gradient stops the run
};

// The proof protocol's parameters (`shardproof prove`, docs/prove.md); training ignores them.
struct ProveConfig {
  std::string fault;            // catalogue fault NAME[@step][:rank]; "" = choose from the topology
  int64_t checkpoint_step = 0;  // k: steps before the recovery checkpoint; 0 = train.steps / 2
  double eval_margin = 0.5;     // nats the final eval loss must beat the initial one by
  // Anchored replay of a configuration that is not bitwise (docs/equivalence.md §anchored): every
  // anchor_every-th step (plus the fault step); 0 = every step up to 8 steps, else ⌈steps/8⌉.
  int64_t anchor_every = 0;
};

struct RunConfig {
  std::string name = "custom";  // preset name
  model::LlamaConfig model;
  TrainConfig train;
  ParallelConfig parallel;
  DataConfig data;
  EvidenceConfig evidence;
  ProveConfig prove;
  // [fp16]: dynamic loss scaling (DeepSpeed's "fp16" section, docs/loss_scaling.md); required by and only
  // allowed with train.precision = "fp16".
  std::optional<optim::LossScalerConfig> fp16;
  // --model-config: the Hugging Face config.json the [model] section came from, {"file", "sha256",
  // "mapping"} (config/hf_config.h, docs/huggingface.md); null when the model is the TOML's own.
  nlohmann::json model_config;
  // Provenance of `--deepspeed FILE` (docs/deepspeed.md, docs/formats/contract.md): {"file", "sha256",
  // "mapping": DsMapping::to_json()}; null without one. A record, not a setting: the mapped values are in
  // the sections above.
  nlohmann::json deepspeed;

  nlohmann::json to_json() const;
  static Result<RunConfig> from_json(const nlohmann::json& j);
};

// Reads a TOML file into JSON (tables → objects), errors name the file, line and column.
Result<nlohmann::json> read_toml(const std::string& path);
// Applies "section.key=value" (value parsed as TOML: 3, 1e-3, true, "x" or a bare word string).
Status apply_override(nlohmann::json& config, const std::string& assignment);
// configs/<name>.toml under `configs_dir`; errors list the presets that exist.
Result<nlohmann::json> read_preset(const std::string& configs_dir, const std::string& name);

std::string schedule_name(Schedule s);
std::string reduction_name(Reduction r);
std::string architecture_name(Architecture a);             // "allreduce", "ps"
std::string staleness_schedule_name(StalenessSchedule s);  // "fixed", "free"

}  // namespace sp::config
