// Pipeline bubble, measured from a run's timeline (timeline/rank-NNNNN.jsonl) next to its theory.
// It reads the files a run left (timeline, topology.json, contract.json) and re-runs nothing.
// Definitions (docs/compare.md §"Bubble"): for world rank r of pipeline group g at step s,
//   span(g, s)    = max over the members of g of the end of their last interval in step s
//                   (each rank's times are relative to its own step start; the schedule's duration),
//   compute(r, s) = Σ (forward + backward) interval lengths, comm(r, s) = Σ (send + recv + wait),
//   bubble(r, s)  = 1 − compute(r, s) / span(g, s).
// A stage (pp rank) aggregates its ranks (dp × tp of them) by the mean per step, then the median over
// steps ≥ 1 (step 0 is warm-up: allocation, first touch). Theory (Narayanan et al. SC'21 §2.2):
// (p−1)/(m+p−1) for GPipe and 1F1B, (p−1)/(v·m+p−1) for interleaved 1F1B with v virtual stages,
// m = micro-batches per dp rank per step. The "stage-cost model" is the same idle-time argument with
// each stage's own measured per-micro-batch cost c_i instead of one common cost:
// span ≈ Σ_i c_i + (m−1)·max_i c_i, bubble_i = 1 − m·c_i / span (GPipe and 1F1B only).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time_split.h"

namespace sp::evidence {

// One line of timeline/rank-NNNNN.jsonl (docs/formats/timeline.md).
struct TimelineInterval {
  int64_t step = 0;
  std::string kind;  // forward, backward, send, recv, wait (others are kept but not counted)
  int virtual_stage = 0;
  int64_t micro_batch = -1;
  int64_t t0_us = 0;
  int64_t t1_us = 0;
  int unit = -1;  // grad_sync: the unit synchronized (optional field "unit")
};

// One step's split of a rank's time (the timeline's split line: core/time_split.h, docs/formats/timeline.md).
struct StepTimeSplit {
  int64_t step = 0;
  int64_t step_us = 0;
  std::array<int64_t, kTimeKinds + 1> us{};  // in kTimeKindNames order, then kOtherTime; Σ = step_us
};

// Parses one rank's file: its intervals, and its split lines into `splits` when given. Errors name
// `path`:line and the field; t1 < t0 is corrupt, and so is a split with a missing, unknown or negative
// kind or whose parts do not sum to step_us.
Result<std::vector<TimelineInterval>> parse_timeline(std::string_view text, const std::string& path,
                                                     std::vector<StepTimeSplit>* splits = nullptr);

// The schedule facts the theory needs, from contract.json's config.
struct PipelineShape {
  int dp = 1, tp = 1, pp = 1;
  std::string schedule = "1f1b";  // gpipe, 1f1b, interleaved, zb-h1
  int virtual_stages = 1;         // v
  int64_t micro_batches = 1;      // m: per dp rank per step
};
// Reads contract["config"]; errors name the missing key.
Result<PipelineShape> pipeline_shape_of(const nlohmann::json& contract);
// (p−1)/(m+p−1), or (p−1)/(v·m+p−1) for interleaved, (p−1)/(3m+p−1) for ZB-H1; 0 when p = 1.
double bubble_theory(const PipelineShape& shape);
// The timeline kinds that are a pass's compute (docs/formats/timeline.md): forward, backward, and ZB-H1's
// backward_input and backward_weight. The bubble and metrics.jsonl's compute_s sum these.
bool timeline_compute_kind(std::string_view kind);

// One rank at one step.
struct RankStepTime {
  int world_rank = 0;
  int stage = 0;  // pp rank
  int64_t step = 0;
  int64_t span_us = 0;     // of its pipeline group
  int64_t compute_us = 0;  // forward + backward
  int64_t comm_us = 0;     // send + recv + wait
  double bubble = 0;       // 1 − compute / span
};

// One pipeline stage, aggregated (mean over its ranks per step, then median over the used steps).
struct StageBubble {
  int stage = 0;
  int ranks = 0;
  double span_ms = 0, compute_ms = 0, comm_ms = 0;
  double bubble = 0;                      // median over steps
  double bubble_min = 0, bubble_max = 0;  // over steps
  double model_bubble = -1;               // stage-cost model; −1 where it does not apply (interleaved)
};

struct BubbleReport {
  PipelineShape shape;
  double theory = 0;
  std::vector<int64_t> steps_used;  // steps ≥ 1, or step 0 alone when the run has one step
  std::vector<StageBubble> stages;  // by pp rank
  std::vector<RankStepTime> rank_steps;
  double measured = 0;                        // mean over stages of their median bubble
  double measured_min = 0, measured_max = 0;  // smallest and largest stage median
  double compute_fraction = 0;                // mean over stages of compute_ms / span_ms
  double comm_fraction = 0;                   // mean over stages of comm_ms / span_ms
  double span_ms = 0;                         // median pipeline span (mean over stages of the stage medians)
  std::vector<std::string> warnings;

  nlohmann::json to_json() const;
  // A Markdown table: stage, ranks, span, compute, comm, measured bubble (min–max), model, theory.
  std::string to_markdown() const;
};

// The rank → place map, from topology.json's groups.pp (each group lists world ranks in pp order).
struct PipelinePlace {
  int group = 0;  // index of the pipeline group
  int stage = 0;  // pp rank
};
Result<std::vector<PipelinePlace>> pipeline_places_of(const nlohmann::json& topology);

// Pure computation: `timelines[r]` are world rank r's intervals, `places[r]` its place.
BubbleReport bubble_of_timelines(const std::vector<std::vector<TimelineInterval>>& timelines,
                                 const std::vector<PipelinePlace>& places, const PipelineShape& shape);

// What bubble_of_run reads: the shape, every world rank's place and its intervals (timelines[r]).
struct RunTimelines {
  PipelineShape shape;
  std::vector<PipelinePlace> places;
  std::vector<std::vector<TimelineInterval>> timelines;
  std::vector<std::vector<StepTimeSplit>> splits;  // splits[r]: world rank r's, in file order
};
// Reads DIR/contract.json, DIR/topology.json and DIR/timeline/rank-*.jsonl. Errors: a missing or
// corrupt file (named), a missing rank file, a rank file with no intervals.
Result<RunTimelines> read_run_timelines(const std::string& dir);
// bubble_of_timelines over read_run_timelines(dir).
Result<BubbleReport> bubble_of_run(const std::string& dir);

}  // namespace sp::evidence
