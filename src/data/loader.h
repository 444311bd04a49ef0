// The deterministic training loader and the fixed evaluation set. Not the dataset (token_dataset.h).
//
// Training: the token stream of N tokens has W = (N − 1) / T windows of T+1 tokens at stride T
// (window w = tokens [w·T, w·T + T]). Row b of micro-batch mb of step s is window
//     w = perm_e(g mod W),   g = (s·M + mb)·B + b,   e = g / W (the epoch),
// where perm_e is a bijection of [0, W) keyed by (seed, e): a 4-round balanced Feistel network on
// the smallest even number of bits covering W, with Philox round functions (core/rng.h), and cycle
// walking to stay inside [0, W) (Black & Rogaway 2002). Every token of the global batch is a pure
// function of (seed, step, mb, b): a rank computes its own micro-batches and gets the same tokens
// whatever the topology. The cursor (a checkpoint's data position) is the next step plus the spec.
//
// Evaluation: windows at stride T in order (every token after the first is a target exactly once),
// the first max_batches full batches of B rows; no randomness.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "data/token_dataset.h"

namespace sp::data {

struct LoaderSpec {
  int64_t micro_batch_size = 1;  // B
  int64_t seq_len = 1;           // T
  int64_t micro_batches = 1;     // M per step
  uint64_t seed = 0;
};

// Bijection of [0, n) keyed by (seed, epoch). Exposed for tests and for tools that explain an order.
class WindowPermutation {
 public:
  WindowPermutation(int64_t n, uint64_t seed, int64_t epoch);
  int64_t operator()(int64_t x) const;  // 0 ≤ x < n

 private:
  int64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t seed_;
  int64_t epoch_;
};

class Loader {
 public:
  // Checks B, T, M ≥ 1 and W ≥ 1 with a message naming the values; the constructor SP_CHECKs the same.
  static Status validate(const TokenDataset& train, const LoaderSpec& spec);
  static Result<Loader> create(const TokenDataset& train, LoaderSpec spec);
  // `train` must outlive the loader.
  Loader(const TokenDataset& train, LoaderSpec spec);

  const LoaderSpec& spec() const { return spec_; }
  int64_t windows() const { return windows_; }  // W
  // The window of row b of micro-batch mb of step s (the formula above).
  int64_t window_of(int64_t step, int64_t mb, int64_t b) const;
  // tokens: (B, T+1) int32, row-major; inputs are [:, :T], targets [:, 1:].
  void micro_batch(int64_t step, int64_t mb, int32_t* tokens) const;

  // Serializable position for checkpoints: JSON with the seed, next step, the spec and the
  // dataset's shard hash; restore() checks them all and returns next_step.
  nlohmann::json cursor(int64_t next_step) const;
  Result<int64_t> restore(const nlohmann::json& cursor) const;

 private:
  const TokenDataset* train_;
  LoaderSpec spec_;
  int64_t windows_;
};

class EvalSet {
 public:
  // max_batches < 0 means every full batch. batches() may be 0 when the split is too small;
  // create() turns that into an error with a hint.
  EvalSet(const TokenDataset& eval, int64_t micro_batch_size, int64_t seq_len, int64_t max_batches);
  static Result<EvalSet> create(const TokenDataset& eval, int64_t micro_batch_size, int64_t seq_len,
                                int64_t max_batches);
  // The split holds at least `batches` (≥ 1) full batches: an evaluation over fewer (or none: a
  // mean over no tokens) would not be the one the configuration asks for.
  static Status validate(const TokenDataset& eval, int64_t micro_batch_size, int64_t seq_len, int64_t batches);
  int64_t batches() const { return batches_; }
  void batch(int64_t i, int32_t* tokens) const;  // (B, T+1) int32

 private:
  const TokenDataset* eval_;
  int64_t b_, t_, batches_;
};

}  // namespace sp::data
