// Resharding: any rank's state, under any (dp, tp, pp, zero), assembled from a checkpoint saved under
// any other. Each wanted range of a tensor's tensor-parallel shard is mapped to logical indices, and
// every saved fragment that overlaps it is copied in by runs (pread straight into the destination
// for long runs, a bounded staging window otherwise), so a rank reads only the byte ranges it needs
// and never holds more than one window of a file in memory.
// Not the integrity check (load.h verifies sizes and SHA-256 first) and not the engine glue.
// Invariant: fill() succeeds only if every wanted element is covered exactly once by the saved
// fragments; a gap or a double cover is reported as corruption naming the tensor and the range.
// Replicated tensors (RMSNorm weights under TP) are taken from the saving tp rank equal to the
// target's tp rank when it exists, else from tp rank 0: at an unchanged tp degree every rank gets
// back exactly its own copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/shard.h"

namespace sp::ckpt {

class CheckpointSource {
 public:
  // Opens every shard of the checkpoint in `step_dir` (headers only) and validates their metadata
  // against `config` (the model being loaded into) and the manifest's topology.
  static Result<CheckpointSource> open(const std::string& step_dir, const Manifest& manifest,
                                       const model::LlamaConfig& config);
  CheckpointSource(CheckpointSource&&) noexcept;
  CheckpointSource& operator=(CheckpointSource&&) noexcept;
  ~CheckpointSource();

  // Fills all three kinds of every span of a rank whose tensor-parallel coordinate is `tp_rank`
  // (the disjoint regions on every usable CPU, core/threads.h).
  Status fill(const std::vector<StateSpan>& spans, int tp_rank) const;
  // A whole logical tensor (row-major, numel(spec.shape) floats): consolidated export.
  Status read_logical(const std::string& tensor, StateKind kind, float* dst) const;
  // Every logical tensor of every kind is tiled exactly once by the fragments (once per saving tp
  // rank for replicated tensors). Reads no tensor data.
  Status check_coverage() const;

  const Manifest& manifest() const;
  const WeightIndex& weights() const;
  size_t fragment_count() const;
  uint64_t bytes_read() const;  // tensor bytes read by fill/read_logical so far

 private:
  struct Impl;
  explicit CheckpointSource(std::unique_ptr<Impl> impl);
  Status fill_region(const model::WeightSpec& spec, StateKind kind, const Geometry& target, int64_t begin, int64_t end,
                     float* dst, int target_tp) const;
  std::unique_ptr<Impl> impl_;
};

// The runs where a source range [sa, sb) and a target range [ta, tb) of the same logical tensor
// hold the same logical elements: source element sk + i is target element tk + i for i < n.
// In increasing source order. Exposed for tests.
struct Overlap {
  int64_t sk = 0, tk = 0, n = 0;
};
std::vector<Overlap> overlaps_of(const Geometry& source, int64_t sa, int64_t sb, const Geometry& target, int64_t ta,
                                 int64_t tb);

}  // namespace sp::ckpt
