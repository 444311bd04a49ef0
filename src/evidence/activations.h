// The per-layer activation trace (docs/formats/activations.md): with evidence.activation_digests on,
// every rank appends one record per (step, global micro-batch, point) of the training forward passes
// it computes to activations/rank-NNNNN.jsonl, and `compare_activations` aligns a run's records with
// a reference run's to name the first point, in forward order, where a forward-path fault shows.
// Not here: gradients and parameters (checksums.jsonl, evidence/compare.h), eval forwards.
// Invariant: a record's key (step, micro_batch, point) does not depend on the topology, and under
// DP/ZeRO/PP in deterministic mode its digest equals the single-device reference's bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json_io.h"
#include "core/status.h"
#include "model/stage_hooks.h"

namespace sp::evidence {

struct ActivationRecord {
  int64_t step = 0;
  int64_t micro_batch = 0;  // global index: plan first_micro_batch(dp rank) + local index
  std::string point;        // "embed", "block.<i>" (global layer), "final_norm", "logits"
  int rank = 0;             // world rank that wrote it
  std::string digest;       // XXH3-128 (core/hash.h) of the fp32 bytes, 32 hex digits
  double l2 = 0;            // exact L2 norm (core/exact_sum.h); NaN ("l2": null) if any value is not finite
  int64_t numel = 0;
  nlohmann::json to_json() const;
  std::string to_line() const;  // one JSON line, fields in the order above, no newline
};

// Hashes `data` in place (no copy, no Tensor: the memory ledger does not move). A 16-bit view is widened
// exactly a block at a time (for_each_f32_block), so its record is that of the fp32 values it stands for.
ActivationRecord make_activation_record(int64_t step, int64_t micro_batch, std::string_view point, int rank,
                                        ConstBufView data);
inline ActivationRecord make_activation_record(int64_t step, int64_t micro_batch, std::string_view point, int rank,
                                               const float* data, int64_t numel) {
  return make_activation_record(step, micro_batch, point, rank, f32_view(data, numel));
}

// Position of a point in the forward pass: embed < block.0 < block.1 < … < final_norm < logits.
// nullopt for a name that is not a point.
std::optional<int64_t> activation_point_order(std::string_view point);

// Called by world rank 0 before any rank opens its recorder: keeps only the records of steps
// < keep_before_step in every activations/rank-*.jsonl (0: removes the files), so a fresh run never
// mixes with an old run's files and a resumed run replays its steps once.
Status prepare_activation_dir(const std::string& run_dir, int64_t keep_before_step);

// The observer the engine hands to the model stages for training forward passes. Only tp rank 0
// writes (embed, block and final-norm outputs are replicated over tp); "logits" only when tp = 1
// (under tp > 1 they are vocabulary shards); under sequence parallelism the stage observes only
// "final_norm" and "logits" (the residual stream is a sequence shard). Each record is one write(2), so a killed rank
// leaves whole lines.
class ActivationRecorder final : public model::ActivationObserver {
 public:
  // Opens activations/rank-NNNNN.jsonl for appending (creating the folder).
  static Result<std::unique_ptr<ActivationRecorder>> open(const std::string& run_dir, int rank, int tp_rank,
                                                          int tp_size);

  void begin_step(int64_t step) { step_ = step; }
  void observe(const char* point, int64_t micro_batch, ConstBufView data) override;
  int64_t records() const { return records_; }
  const Status& status() const { return out_.status(); }  // the first write error, naming the file
  Status close() { return out_.close(); }

 private:
  ActivationRecorder(JsonlWriter out, int rank, bool writes, bool logits);
  JsonlWriter out_;
  int rank_;
  bool writes_;  // tp rank 0
  bool logits_;  // tp = 1
  int64_t step_ = -1;
  int64_t records_ = 0;
};

// All records of a run (every activations/rank-*.jsonl). `recorded` is false when the run has no
// activations/ folder. A final line without its newline (a rank killed mid-write) is ignored;
// any other malformed line, an unknown point or a key recorded twice is an error naming file and line.
struct ActivationTrace {
  bool recorded = false;
  std::vector<ActivationRecord> records;
};
Result<ActivationTrace> read_activations(const std::string& run_dir);

struct ActivationDifference {
  int64_t step = -1;
  int64_t micro_batch = -1;
  std::string point;
  int rank = -1;      // world rank of the run that wrote the record; -1: missing in the run
  int ref_rank = -1;  // -1: missing in the reference
  std::string got_digest, want_digest;
  double got_l2 = 0, want_l2 = 0, rel_l2 = 0;
  int64_t got_numel = 0, want_numel = 0;
  std::string message;  // one line
  nlohmann::json to_json() const;
};

struct ActivationComparison {
  bool recorded = false;            // the run recorded activations
  bool reference_recorded = false;  // the reference did
  bool bitwise = true;
  double tolerance = 0;  // relative L2 tolerance when !bitwise
  int64_t compared = 0;  // keys present in both
  int64_t bitwise_equal = 0;
  int64_t differing = 0;                    // records that differ (including missing ones)
  int64_t unmatched = 0;                    // run records at steps the reference did not reach (not compared)
  int64_t first_step = -1, last_step = -1;  // steps compared
  double max_rel_l2 = 0;
  std::optional<ActivationDifference> first;                    // in forward order: step, then point, then micro-batch
  std::vector<std::pair<int64_t, int64_t>> differing_per_step;  // propagation: (step, records)
  bool equal() const { return recorded && reference_recorded && !first.has_value(); }
  nlohmann::json to_json() const;
  std::string summary() const;  // several lines for a terminal
};

// Aligns the run's records with the reference's by (step, micro_batch, point) over the steps the run
// reached (and the reference has). Bitwise: digests must be equal; otherwise the relative difference
// of the L2 norms must be ≤ rel_tol. A record present on one side only is a difference, except
// "logits", compared only when both runs recorded logits (tp = 1 on both sides), and the residual stream
// ("embed", "block.<i>"), compared only when both recorded it (not under sequence parallelism). `only_steps` (when not
// empty) restricts the comparison to those steps: an anchored replay ran only its anchors.
Result<ActivationComparison> compare_activations(const std::string& run_dir, const std::string& ref_dir, bool bitwise,
                                                 double rel_tol = 0.0, const std::vector<int64_t>& only_steps = {});

}  // namespace sp::evidence
