// Timeline: per-rank intervals of compute, send, recv and idle per micro-batch
// (timeline/rank-NNNNN.jsonl, docs/formats/timeline.md), from which the pipeline bubble is measured,
// and after them the step's split by kind (core/time_split.h): where the rank's step time went.
// An interval is [t0, t1) in microseconds of the steady clock relative to the step start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/status.h"
#include "core/time_split.h"

namespace sp::parallel {

struct Interval {
  int64_t step = 0;
  std::string kind;  // "forward", "backward", "send", "recv", "wait", "optimizer", "grad_sync"
  int virtual_stage = 0;
  int64_t micro_batch = -1;
  int64_t t0_us = 0;
  int64_t t1_us = 0;
  int unit = -1;  // grad_sync: the unit whose gradient was synchronized (written only then)
};

class Timeline {
 public:
  // (Re)creates the rank's file in the run's timeline/ directory.
  static Result<Timeline> open(const std::string& run_dir, int world_rank);
  void begin_step(int64_t step);
  // Records [start_ns, now) as `kind`.
  void record(const char* kind, int virtual_stage, int64_t micro_batch, int64_t start_ns);
  // Records [start_ns, end_ns) as `kind` (a span measured elsewhere: a unit's gradient sync, `unit` ≥ 0).
  void record_span(const char* kind, int virtual_stage, int64_t micro_batch, int64_t start_ns, int64_t end_ns,
                   int unit = -1);
  // Writes the step's intervals; returns the step's busy (compute) fraction data for the bubble.
  void end_step();
  const std::vector<Interval>& last_step() const { return last_; }
  // Writes the step's split after its intervals: {"step", "step_us", "split_us": {kind: µs, …, "other": µs}},
  // each kind rounded down and "other" the rest of step_us, so that the parts sum to step_us exactly.
  void write_split(int64_t step, int64_t step_ns, const TimeSplit& split);
  // The first write error, or ok; close() flushes and closes the file.
  const Status& status() const { return out_.status(); }
  Status close() { return out_.close(); }

 private:
  explicit Timeline(JsonlWriter out) : out_(std::move(out)) {}
  JsonlWriter out_;
  int64_t step_ = 0;
  int64_t step_start_ns_ = 0;
  std::vector<Interval> current_, last_;
};

}  // namespace sp::parallel
