// RunPlan: the whole-run validation and the static layout every rank derives from the config alone.
// make() checks every rule for a (config, world size) pair and reports all violations at once,
// identically on every rank, before any communication, allocation or file write (STYLE.md habit 9).
// It also fixes which layers each pipeline chunk holds and which micro-batches each dp rank runs.
//
// Pipeline placement (Narayanan et al. SC'21 §2.2): L layers form pp·v chunks of L/(pp·v) layers;
// chunk c = j·pp + r sits on pipeline rank r as its virtual stage j. With v = 1 rank r holds layers
// [r·L/pp, (r+1)·L/pp). Data: dp rank d runs global micro-batches [d·k, (d+1)·k), k = M/dp.
// A parameter-server run (docs/ps.md) is planned the same way for its dp = W workers; the S servers
// are extra ranks (world = W + S) that run no micro-batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/roles.h"
#include "config/run_config.h"
#include "core/status.h"
#include "evidence/faults.h"

namespace sp::plan {

struct ChunkPlacement {
  int chunk = 0;  // global chunk index c
  int pp_rank = 0;
  int virtual_stage = 0;
  int layer_begin = 0;  // [layer_begin, layer_end)
  int layer_end = 0;
  bool first = false;  // holds the embedding
  bool last = false;   // holds the final norm, LM head and loss
};

// One broken rule of RunPlan::make. A plain sentence is a refused combination; a divisibility rule says so.
struct RuleViolation {
  enum class Kind { kDoesNotDivide, kRefused };
  Kind kind = Kind::kRefused;
  std::string message;
  RuleViolation(std::string m) : message(std::move(m)) {}  // NOLINT: implicit, a refusal by default
  RuleViolation(const char* m) : message(m) {}             // NOLINT
  RuleViolation(Kind k, std::string m) : kind(k), message(std::move(m)) {}
};

struct RunPlan {
  config::RunConfig config;
  int world = 1;
  int64_t micro_batches = 1;        // M per step (global)
  int64_t local_micro_batches = 1;  // k = M / dp
  // The 16-bit GEMM backend train.gemm16 resolves to on this CPU (kernels::gemm16_resolve): kOneDnn or
  // kFallback in mixed precision; kAuto (none) in fp32.
  kernels::Gemm16Kind gemm16 = kernels::Gemm16Kind::kAuto;
  // Bytes per element of the residual stream and of what carries it between ranks (tensor-parallel sums,
  // pipeline messages): 4 in every run the engine makes (fp32 in every precision); the planner prices a
  // published 16-bit run at its own 2 (planner/published_prediction.h), through these same models.
  int64_t stream_bytes = 4;

  static Result<RunPlan> make(const config::RunConfig& config, int world);
  // Every rule `config` breaks at `world` ranks, one sentence each (empty: make() succeeds), with its kind:
  // a size that does not divide (the planner's search says "does not divide") or a combination refused.
  static std::vector<RuleViolation> rule_violations(const config::RunConfig& config, int world);
  // The same sentences without their kinds.
  static std::vector<std::string> violations(const config::RunConfig& config, int world);
  // The chunks pipeline rank r holds, by virtual stage.
  std::vector<ChunkPlacement> chunks_of(int pp_rank) const;
  int chunk_count() const { return config.parallel.pp * config.parallel.virtual_stages; }
  ChunkPlacement chunk(int c) const;
  int64_t first_micro_batch(int dp_rank) const { return dp_rank * local_micro_batches; }
  // Which ranks are workers and which are parameter servers (every rank a worker for all-reduce).
  comm::RoleMap roles() const;
  // What a catalogue fault needs to know of this run (evidence::check_fault_applicable).
  evidence::FaultTarget fault_target() const;
  // Per world rank: whether it runs W passes (plan::splits_backward of its schedule; servers run none).
  std::vector<bool> weight_passes_by_rank() const;
};

// The name of the 16-bit GEMM backend the plan runs (kernels::Gemm16::name(), for the contract's
// engine.gemm16), or "" in fp32.
std::string gemm16_backend_name(const RunPlan& plan);

}  // namespace sp::plan
