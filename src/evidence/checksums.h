// Gradient and parameter checksums (checksums.jsonl, docs/formats/checksums.md).
// Every rank summarizes the pieces it owns (TensorSummary: shard-invariant digest + exact stats);
// one integer all-reduce over the world sums them, so every rank ends with the summary of each
// logical tensor as if computed on one device. Replicated tensors (RMSNorm weights under TP) are
// contributed by tp rank 0 only; a per-tensor `count` equal to numel proves that every element was
// contributed exactly once. Records are written by world rank 0 at fixed points of a step:
// phase "grad" (after accumulation and dp sync, before clipping) and "param" (after the update).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/json_io.h"
#include "core/status.h"
#include "evidence/tensor_summary.h"
#include "model/weights.h"

namespace sp::evidence {

// The loss scaler's record (fp16 runs): its phase and tensor name (docs/formats/checksums.md).
inline constexpr const char* kScalerPhase = "scaler";
inline constexpr const char* kScalerTensor = "loss_scaler";

// The logical tensors of a model in canonical order (model::weight_table).
class LogicalTensors {
 public:
  explicit LogicalTensors(const model::LlamaConfig& config);
  size_t size() const { return specs_.size(); }
  const model::WeightSpec& spec(size_t i) const { return specs_[i]; }
  int64_t numel(size_t i) const { return shape_numel(specs_[i].shape); }
  size_t index_of(const std::string& name) const;

 private:
  std::vector<model::WeightSpec> specs_;
};

// This rank's contribution: one summary per logical tensor (empty where it holds nothing).
// digest = false: statistics only, lanes zero (TensorSummary::add_contiguous).
std::vector<TensorSummary> summarize_pieces(const LogicalTensors& tensors, const std::vector<model::UnitPiece>& pieces,
                                            bool contribute_replicated, bool digest = true);
// Collective over `world`: the sum of every rank's summaries, identical on every rank.
std::vector<TensorSummary> all_reduce_summaries(comm::Communicator& world, const std::vector<TensorSummary>& local);
// Everything merged into one (e.g. the global gradient norm from its exact sum of squares).
TensorSummary merge_all(const std::vector<TensorSummary>& summaries);

// One checksums.jsonl line (with its newline) for a logical tensor's summary: the record
// {"step","phase","tensor","numel"} + TensorSummary::to_json(), dumped with sorted keys.
std::string tensor_record(int64_t step, const std::string& phase, const std::string& tensor, int64_t numel,
                          const TensorSummary& summary);

// checksums.jsonl, written by world rank 0. kAppend continues a resumed run's file (checkpointing
// has cut it back to the checkpoint's prefix). Every write error is kept and returned by flush()/close().
class ChecksumWriter {
 public:
  static Result<ChecksumWriter> open(const std::string& path, JsonlWriter::Mode mode);
  // One line per tensor: {"step","phase","tensor","numel","digest","l2","sum","absmax","finite","count",...}.
  void write_tensors(int64_t step, const std::string& phase, const LogicalTensors& tensors,
                     const std::vector<TensorSummary>& summaries);
  // A scalar record, e.g. phase "loss": {"step","phase","tensor":"loss","value","bits"}: bits is the
  // float64 pattern in hex so comparisons are exact.
  void write_scalar(int64_t step, const std::string& phase, const std::string& name, double value);
  // fp16 runs only, one per step after its loss record: {"step","phase":"scaler","tensor":"loss_scaler",
  // "scale","skipped"}: the dynamic loss scale the step ran with and whether the scaler skipped it (an
  // overflow). Exact in every topology (every rank's scaler sees the same overflow verdict).
  void write_scaler(int64_t step, double scale, bool skipped);
  Status flush() { return out_.flush(); }
  Status close() { return out_.close(); }
  const Status& status() const { return out_.status(); }  // the first write error, naming the file

 private:
  explicit ChecksumWriter(JsonlWriter out) : out_(std::move(out)) {}
  JsonlWriter out_;
};

}  // namespace sp::evidence
