#include "parallel/timeline.h"

#include <nlohmann/json.hpp>

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
      {step_, kind, virtual_stage, micro_batch, (start_ns - step_start_ns_) / 1000, (end - step_start_ns_) / 1000});
}

void Timeline::end_step() {
  for (const Interval& iv : current_) {
    const nlohmann::json j = {
        {"step", iv.step},   {"kind", iv.kind},  {"virtual_stage", iv.virtual_stage}, {"micro_batch", iv.micro_batch},
        {"t0_us", iv.t0_us}, {"t1_us", iv.t1_us}};
    out_.write(j);
  }
  (void)out_.flush();  // an error is kept: the trainer's finish checks status()
  last_ = std::move(current_);
  current_.clear();
}

}  // namespace sp::parallel
