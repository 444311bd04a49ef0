// Published throughput tables (data/published/*.toml): runs of other systems with the configuration they
// state, read strictly, for validating the planner's time model against them (docs/plan.md). It is not the
// planner: it only reads and cross-checks what the paper printed.
// Invariant: every row names a known shape (planner/model_shape.h) whose heads, hidden size and layers equal the
// row's, and whose parameter count rounds to the row's params_billion; tp·pp divides the GPU count; and
// tflops_per_gpu · gpus agrees with the printed aggregate to its printed precision (±0.5 %). A transcription
// error in any of these fails to load, naming the row and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::planner {

struct PublishedRun {
  std::string model;  // a named shape
  double params_billion = 0;
  int64_t attention_heads = 0, hidden_size = 0, layers = 0;
  int tp = 1, pp = 1, gpus = 1;
  int64_t global_batch = 0;  // sequences
  double tflops_per_gpu = 0;
  double percent_of_peak = 0;
  double aggregate_pflops = 0;
  int dp() const { return gpus / (tp * pp); }
};

struct PublishedTable {
  std::string title, authors, venue, url, table, cluster, precision, recompute, flops_definition;
  // How every row ran, where the paper states it for all rows (optional keys; empty: not stated, then searched
  // or the engine's): the pipeline schedule of the rows with pp > 1 ("1f1b", "interleaved"), and the dtype the
  // run kept its activations in and summed its tensor-parallel outputs in ("fp16", "bf16", "fp32").
  std::string schedule, activations;
  int64_t seq_len = 0, vocab_size = 0;
  double peak_tflops = 0;
  std::vector<PublishedRun> runs;
};

Result<PublishedTable> read_published_table(const std::string& path);

}  // namespace sp::planner
