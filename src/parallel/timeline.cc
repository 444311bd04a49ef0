#include "parallel/timeline.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/file_io.h"
#include "core/timer.h"
#include "evidence/bundle_paths.h"

namespace sp::parallel {

Result<Timeline> Timeline::open(const std::string& run_dir, int world_rank) {
  const evidence::RunPaths paths(run_dir);
  SP_RETURN_IF_ERROR(make_directories(paths.timeline_dir()));
  SP_ASSIGN_OR_RETURN(JsonlWriter out, JsonlWriter::open(paths.timeline(world_rank), JsonlWriter::Mode::kTruncate));
  return Timeline(std::move(out));
}

void Timeline::begin_step(int64_t step) {
  step_ = step;
  step_start_ns_ = now_ns();
  current_.clear();
}

void Timeline::record(const char* kind, int virtual_stage, int64_t micro_batch, int64_t start_ns) {
  const int64_t end = now_ns();
  current_.push_back(
      {step_, kind, virtual_stage, micro_batch, (start_ns - step_start_ns_) / 1000, (end - step_start_ns_) / 1000, -1});
}

void Timeline::record_span(const char* kind, int virtual_stage, int64_t micro_batch, int64_t start_ns, int64_t end_ns,
                           int unit) {
  current_.push_back({step_, kind, virtual_stage, micro_batch, (start_ns - step_start_ns_) / 1000,
                      (end_ns - step_start_ns_) / 1000, unit});
}

void Timeline::end_step() {
  for (const Interval& iv : current_) {
    nlohmann::json j = {
        {"step", iv.step},   {"kind", iv.kind},  {"virtual_stage", iv.virtual_stage}, {"micro_batch", iv.micro_batch},
        {"t0_us", iv.t0_us}, {"t1_us", iv.t1_us}};
    if (iv.unit >= 0) j["unit"] = iv.unit;
    out_.write(j);
  }
  (void)out_.flush();  // an error is kept: the trainer's finish checks status()
  last_ = std::move(current_);
  current_.clear();
}

void Timeline::write_split(int64_t step, int64_t step_ns, const TimeSplit& split) {
  SP_CHECK(split.sum() <= step_ns, "step {}: the split's kinds sum to {} ns, more than the step's {} ns", step,
           split.sum(), step_ns);
  nlohmann::json parts = nlohmann::json::object();
  const int64_t step_us = step_ns / 1000;
  int64_t counted = 0;
  for (size_t k = 0; k < kTimeKinds; ++k) {
    SP_CHECK_GE(split.ns[k], int64_t{0}, "step {}: time of kind {}", step, kTimeKindNames[k]);
    parts[std::string(kTimeKindNames[k])] = split.ns[k] / 1000;
    counted += split.ns[k] / 1000;
  }
  parts[std::string(kOtherTime)] = step_us - counted;
  out_.write({{"step", step}, {"step_us", step_us}, {"split_us", std::move(parts)}});
  (void)out_.flush();  // an error is kept: the trainer's finish checks status()
}

}  // namespace sp::parallel
