// A PyTorch run's recording (python/shardproof_torch, docs/formats/torch_recording.md), read back strictly for
// `shardproof judge`: the contract, the topology, every rank's seal, records, token batches, and the gradient
// and state files of every step (format 2) or the anchor files (format 1). open() refuses a recording that is
// incomplete (a rank without its seal or records, a step without its records, a micro-batch nobody recorded),
// from another model (a tensor the config.json does not have, a shape that is not its own), edited (a file that
// does not match its rank's seal, a file no seal lists, a link, a trace cut mid-line), malformed, or not a
// recording at all (a proof bundle, a training run) — naming the file, its line or record, the field and the fix —
// so nothing is ever judged on what is left. Files a judge following the run discarded (judge/consumed.jsonl)
// count as present when their recorded SHA-256 is the seal's.
// Not the judgement (judge/criteria.h) and not the assembly of partial checksums (judge/assemble.h).
// Invariant: a Recording exists only for a directory that passed every rule above.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/process_grid.h"
#include "config/hf_config.h"
#include "config/run_config.h"
#include "core/status.h"
#include "judge/shard.h"
#include "kernels/adamw.h"
#include "model/weights.h"
#include "plan/strategy.h"
#include "tensor/dtype.h"

namespace sp::judge {

inline constexpr std::string_view kRecordingFormat = "shardproof-torch";
inline constexpr int kRecordingFormatVersion = 2;   // every step: gradients per step, the state per segment
inline constexpr int kRecordingAnchorsVersion = 1;  // the earlier form: the full state at anchor steps only
inline constexpr std::string_view kRecordsDir = "records", kTokensDir = "tokens", kAnchorsDir = "anchors",
                                  kGradsDir = "grads", kStateDir = "state", kSqrtDir = "sqrt", kProbeDir = "probe",
                                  kRecordingSealDir = "seal";
// The recorder's folders: a file in one of them (or contract.json, topology.json) that no seal lists was added after
// the run; any other file of the directory is the user's own, never read and never overwritten.
// flight_recorder/: a run traced by PyTorch's Flight Recorder (contract `trace`), its dumps and step windows.
inline constexpr std::array<std::string_view, 10> kRecorderDirs = {
    "trace", "records", "tokens", "anchors", "grads", "state", "sqrt", "seal", "flight_recorder", "probe"};
// Everything `judge` writes goes under this folder of the recording (never sealed, never a recorder's name).
inline constexpr std::string_view kJudgeDir = "judge";
// What a judge of format 1 wrote beside the recorder's files: still skipped by the seal check of such a recording.
inline constexpr std::array<std::string_view, 5> kLegacyJudgeFiles = {"checksums.jsonl", "gate.json", "summary.md",
                                                                      "first_divergence.json", "report.html"};

// A fully_shard unit of an FSDP2 run as the recorder found it (contract.json strategy.units): the HF names of the
// tensors it shards together, and whether it reshards them after forward (ZeRO-3) or keeps them (ZeRO-2).
struct ShardingUnit {
  std::vector<std::string> tensors = {};
  bool reshard_after_forward = true;
};

// DeepSpeed's ZeRO config values its collectives depend on, as the recorder read them from the engine (contract
// strategy.deepspeed, python/shardproof_torch/deepspeed_engine.py). groups: ZeRO-1/2's parameter groups, each one
// flat buffer, as HF names; the last four are ZeRO-3's (its prefetch and persistence thresholds).
struct DeepSpeedZero {
  int64_t gradient_accumulation_steps = 1, reduce_bucket_size = 0, allgather_bucket_size = 0;
  bool overlap_comm = false, contiguous_gradients = true, reduce_scatter = true, use_multi_rank_bucket_allreduce = true,
       allgather_partitions = true, parameter_alignment = false;
  std::vector<std::vector<std::string>> groups = {};
  int64_t prefetch_bucket_size = 0, max_live_parameters = 0, max_reuse_distance = 0, param_persistence_threshold = 0;
};

// A learning-rate schedule declared as data (python/shardproof_torch/schedule.py; Hugging Face's formulas).
struct LrSchedule {
  std::string kind = {};  // constant, linear, cosine
  double lr = 0, min_ratio = 0;
  int64_t warmup_steps = 0, total_steps = 1, warmup_start = 0;
  double at(int64_t step) const;  // lr · factor(step)
  std::string to_string() const;  // "cosine, lr 0.003, warmup 4 (from 1), 20 steps, min 0.1"
};
inline constexpr double kScheduleRtol = 9.094947017729282e-13;  // 2^-40: the same formula, another order

// contract `precision.grad_scaler` (with autocast "float16"): torch's GradScaler as the run built it. Its rule (the
// scale × 2 after growth_interval clean steps in a row, × 1/2 and the step skipped on a non-finite gradient) is
// DeepSpeed's dynamic loss scaler at hysteresis 1 (optim::LossScaler), the one the judge checks the decisions with;
// growth_factor 2 and backoff_factor 1/2 only (the recorder refuses others), init_scale a power of two.
struct GradScalerSpec {
  double init_scale = 65536.0;
  int64_t growth_interval = 2000;
};
// One step's GradScaler as one rank recorded it (records "scaler"): the scale and growth tracker the step's backward
// ran with, whether unscale_ found a non-finite gradient (the step is then skipped), both after scaler.update().
struct ScalerRecord {
  double scale = 0, next_scale = 0;
  int64_t tracker = 0, next_tracker = 0;
  bool found_inf = false;
};

struct RecordingContract {
  nlohmann::json doc;  // contract.json as read
  int format_version = kRecordingFormatVersion;
  config::HfModelConfig model;
  std::string strategy_name = {};  // the user's name for it ("ddp", "zero1", ...)
  // The declared grid (dp, tp, pp, ZeRO) with the batch's micro-batch size, as the engine's strategy.
  plan::Strategy strategy = {};
  std::vector<ShardingUnit> units = {};         // FSDP2's fully_shard units (empty: not FSDP2)
  std::optional<DeepSpeedZero> deepspeed = {};  // DeepSpeed's ZeRO config (absent: not DeepSpeed, or recorded before)
  // DTensor's tensor parallelism as the recorder found it (contract strategy.tp_plan): "dtensor" (ColwiseParallel /
  // RowwiseParallel), "dtensor-sequence-parallel" (a norm weight on the tp dim too), "" (not declared).
  std::string tp_plan = {};
  int world = 1;
  int64_t micro_batches = 1, seq_len = 1, steps = 1, checksum_every = 1;
  std::vector<int64_t> anchors = {};  // increasing steps with anchor files
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, max_grad_norm = 0;
  std::vector<std::string> no_decay = {};  // HF names the run declares without weight decay
  std::string implementation = {};         // of the optimizer, as declared
  kernels::AdamWArithmetic arithmetic = kernels::AdamWArithmetic::kMulAdd;  // format 2: torch's element order
  bool sqrt_recorded = false;  // format 2: torch's sqrt is not correctly rounded; its deviations are in sqrt/
  // contract `trace` = "flight-recorder": trace/ was converted from PyTorch's Flight Recorder dumps, whose records
  // have no phase, micro-batch or payload digest (docs/formats/torch_recording.md §Flight Recorder).
  bool flight_recorder_trace = false;
  // contract `precision.norm_lanes`: the independent fp32 accumulators of the run's norm kernel (ATen's
  // Vectorized<float>: 8 on x86-64, 4 on aarch64's NEON); absent (earlier recordings): 4, the fewest.
  int64_t norm_lanes = 4;
  // contract `precision.autocast` = "bfloat16": the forward ran under torch.autocast to bf16 (parameters, gradients
  // and the optimizer fp32): the reference runs the engine in bf16 and the gradients and loss are judged within the
  // 16-bit envelope of the rounding points of both (docs/equivalence.md §8).
  bool autocast_bf16 = false;
  // contract `precision.param_dtype` = "bfloat16": FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
  // (the forward and backward in bf16 parameters, gathered in bf16; gradients reduced and kept fp32): the reference
  // and the traffic model are the engine's bf16 (docs/equivalence.md §8).
  bool param_bf16 = false;
  bool bf16() const { return autocast_bf16 || param_bf16; }
  // contract `precision.autocast` = "float16" with its `grad_scaler`: the forward under torch.autocast to fp16, the
  // loss scaled by a GradScaler (gradients recorded after unscale_): the reference runs the engine in fp16 at the
  // run's scale, within the fp16 envelope; the scaler's decisions are a row of their own (docs/judge.md §"fp16").
  bool autocast_fp16 = false;
  std::optional<GradScalerSpec> grad_scaler = {};
  bool sixteen_bit() const { return bf16() || autocast_fp16; }  // judged within the 16-bit envelope
  // contract `precision.probe` (bf16 autocast, tp 1): the module whose bf16 rounding the recorder probed at every step
  // (probe/, judge/probe.h); empty: not probed.
  std::string probe = {};
  DType sixteen_dtype() const { return autocast_fp16 ? DType::kF16 : DType::kBF16; }
  std::optional<LrSchedule> schedule = {};  // the lr schedule as data; absent: declared as text only
  std::string schedule_text = {};           // the declaration as text (format 1, or a text schedule)
  std::string loss_reduction = {};          // declared: "token_mean" or "micro_batch_mean"
  int64_t gradient_divisor = 1;             // what the framework divides gradients by in its sync (DDP: dp)
  bool every_step() const { return format_version >= 2; }
  bool checksums_at(int64_t step) const { return checksum_every > 0 && step % checksum_every == 0; }
  bool decays(const std::string& tensor) const;  // weight decay applies: not in the declared no-decay set
  // The engine's run configuration of this model and batch shape at dp = tp = pp = 1, no evaluation: the
  // reference's (judge/reference.h), and with the declared grid the traffic model's.
  config::RunConfig single_device_config() const;
};

// One rank's partial summary of one tensor at one step and phase (records/rank-N.jsonl, kind "tensor").
struct TensorRecord {
  int rank = 0;
  int64_t line = 0;
  int64_t step = 0;
  std::string phase = {}, tensor = {};
  std::optional<Shard> shard = {};
  int64_t numel = 0, local = 0, k0 = 0, k1 = 0;  // covered local elements [k0, k1) of the local piece
  uint64_t lane0 = 0, lane1 = 0;
  std::vector<uint64_t> exact_words = {};  // ExactSum::to_words layout (count, NaN, Inf, absmax included)
  std::string sha256 =
      {};  // the local piece's identity (replica comparison): its SHA-256, or its digest lanes (`bits`)
};

struct LossRecord {
  int64_t index = 0, targets = 0;
  double loss_sum = 0, objective = 0;
};

struct StepRecord {
  int rank = 0;
  int64_t line = 0;
  int64_t step = 0;
  double lr = 0;                         // may be NaN or ±Inf (a diverged run: evidence, not a malformed file)
  std::optional<double> grad_norm = {};  // the norm this rank's clipping used
  bool has_group_lr = false;             // format 2, when the optimizer stepped:
  std::vector<double> group_lr = {};     // the lrs its groups held at its step
  std::vector<int64_t> tokens = {};      // global micro-batch indices in this rank's token file, in order
  std::vector<LossRecord> losses = {};
  std::optional<ScalerRecord> scaler = {};  // fp16 with a GradScaler (contract precision.grad_scaler): every step
};

// A digest of one piece of training state, saved with a checkpoint or loaded on resume.
struct StateDigest {
  std::string tensor = {}, state = {};  // state: param, exp_avg, exp_avg_sq
  std::optional<Shard> shard = {};
  std::optional<std::string> sha256 = {};  // absent: the state did not exist (an optimizer not yet stepped)
  int64_t optimizer_step = 0;
};
struct StateRecord {
  int rank = 0;
  int64_t line = 0;
  int64_t step = 0;  // the step training resumes at
  std::vector<StateDigest> states = {};
};

struct RankRecords {
  std::vector<StepRecord> steps = {};  // by step, one each
  std::vector<TensorRecord> tensors = {};
  std::vector<StateRecord> saves = {}, resumes = {};
};

class Recording {
 public:
  // Every rule of the header; errors are kInvalidArgument (exit 2) naming the file and record.
  static Result<Recording> open(const std::string& dir);
  // A recording still being written (`judge --follow`): its contract and topology only; refresh() reads the
  // ranks' records as far as they are complete. Nothing is judged final on it: the last judgement opens the
  // sealed recording with open().
  static Result<Recording> follow(const std::string& dir);
  // Re-reads every rank's records (a half-written last line ignored); returns how many steps, from 0, every rank
  // has recorded in full.
  Result<int64_t> refresh();
  bool sealed() const;  // every rank's seal is there: the run finished recording

  const std::string& dir() const { return dir_; }
  std::string path(std::string_view rel) const;  // dir/rel
  const RecordingContract& contract() const { return contract_; }
  const nlohmann::json& topology() const { return topology_; }
  const comm::ProcessGrid& grid() const { return *grid_; }
  const std::vector<model::WeightSpec>& weights() const { return weights_; }  // canonical order
  const std::vector<RankRecords>& ranks() const { return ranks_; }
  // Where the ids of `step` are: per token file, the global micro-batch indices it holds, in file order
  // (docs/formats/token_batch.md; read by the token batch reader, data/token_batch.h).
  struct TokenPiece {
    int rank = 0;
    std::string file;  // relative to the recording
    std::vector<int64_t> indices;
  };
  std::vector<TokenPiece> token_pieces(int64_t step) const;
  // The losses of `step` by micro-batch index, and the rank that recorded each.
  std::vector<std::pair<LossRecord, int>> losses(int64_t step) const;
  std::string anchor_file(int64_t step, int rank) const;  // "anchors/step-000004/rank-00001.safetensors"
  std::string grads_file(int64_t step, int rank) const;   // "grads/step-000004/rank-00001.safetensors"
  std::string state_file(int64_t step, int rank) const;   // "state/step-000000/rank-00001.safetensors"
  // Format 2: the steps whose state was recorded (each segment's first: 0 and every resume), increasing.
  const std::vector<int64_t>& state_steps() const { return state_steps_; }
  int files_sealed() const { return files_sealed_; }
  // Files a judge following the run judged and discarded (judge/consumed.jsonl), with their SHA-256.
  const std::map<std::string, std::string>& consumed() const { return consumed_; }
  bool present(std::string_view rel) const;  // on disk (not discarded)
  // Files outside the recorder's folders that no seal lists: the user's own (named in the summary, never read).
  const std::vector<std::string>& foreign_files() const { return foreign_; }

 private:
  std::string dir_ = {};
  RecordingContract contract_;
  nlohmann::json topology_;
  std::optional<comm::ProcessGrid> grid_;
  std::vector<model::WeightSpec> weights_ = {};
  std::vector<RankRecords> ranks_ = {};
  std::vector<int64_t> state_steps_ = {};
  std::map<std::string, std::string> consumed_ = {};
  std::vector<std::string> foreign_ = {};
  int files_sealed_ = 0;
  friend struct RecordingReader;
};

// "records/rank-00001.jsonl", "seal/rank-00001.json", "tokens/rank-00001/step-000004.bin".
std::string recording_rank_file(std::string_view dir, int rank, std::string_view ext);
std::string recording_tokens_file(int rank, int64_t step);
// "grads/step-000004/rank-00001.safetensors" (dir: anchors, grads or state).
std::string recording_step_file(std::string_view dir, int64_t step, int rank);
// "judge/gate.json": where `judge` writes its file `name` into a recording.
std::string judge_file(std::string_view name);

}  // namespace sp::judge
