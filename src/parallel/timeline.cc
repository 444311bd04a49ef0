#include "parallel/timeline.h"

#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/timer.h"

namespace sp::parallel {

Result<Timeline> Timeline::open(const std::string& run_dir, int world_rank) {
  SP_RETURN_IF_ERROR(make_directories(run_dir + "/timeline"));
  const std::string path = fmt::format("{}/timeline/rank-{:05d}.jsonl", run_dir, world_rank);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return io_error("cannot create timeline file '{}'", path);
  return Timeline(f);
}

Timeline::Timeline(Timeline&& o) noexcept
    : f_(std::exchange(o.f_, nullptr)), step_(o.step_), step_start_ns_(o.step_start_ns_),
      current_(std::move(o.current_)), last_(std::move(o.last_)) {}

Timeline::~Timeline() {
  if (f_ != nullptr) std::fclose(f_);
}

void Timeline::begin_step(int64_t step) {
  step_ = step;
  step_start_ns_ = now_ns();
  current_.clear();
}

void Timeline::record(const char* kind, int virtual_stage, int64_t micro_batch, int64_t start_ns) {
  const int64_t end = now_ns();
  current_.push_back({step_, kind, virtual_stage, micro_batch, (start_ns - step_start_ns_) / 1000,
                      (end - step_start_ns_) / 1000});
}

void Timeline::end_step() {
  for (const Interval& iv : current_) {
    const nlohmann::json j = {{"step", iv.step},       {"kind", iv.kind},   {"virtual_stage", iv.virtual_stage},
                              {"micro_batch", iv.micro_batch}, {"t0_us", iv.t0_us}, {"t1_us", iv.t1_us}};
    const std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), f_);
  }
  std::fflush(f_);
  last_ = std::move(current_);
  current_.clear();
}

}  // namespace sp::parallel
