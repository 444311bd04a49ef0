// Internal to planner/: what the calibration's probes share (calibrate_kernels.cc, calibrate_memory.cc) —
// the interleaved median in thread CPU time, the fills, and the memory families' calibration. Not an
// interface of the planner.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/calibrate_kernels.h"
#include "tensor/dtype.h"

namespace sp::planner::calibration_detail {

// The median seconds of each probe, in the calling thread's CPU time (the kernels run on it: OpenBLAS and
// oneDNN pinned to one thread), so that the time the thread waits for the core while other processes share
// it is not counted: a loaded machine otherwise charges a long call (a 2048-wide GEMM, several ms, longer
// than a scheduler slice) with its neighbours' time and a short one not, which bends the curves by size
// (docs/plan.md §10). On an idle core CPU time and wall time agree. The probes are measured in 3
// interleaved rounds (every probe a little, then every probe again), so that a change of the machine's load
// during the calibration (its caches and memory bandwidth, which CPU time does count) moves every size
// alike; per round a probe runs at least once and min_seconds / 3.
std::vector<double> median_seconds(const std::vector<std::function<void()>>& probes, double min_seconds);
// Keeps a probe's result alive, so the compiler cannot drop a call whose output nothing reads.
void do_not_optimize(uint64_t v);
// n floats (at least one) of base + (i mod 13)/16: finite, varied, no denormals; and their 16-bit patterns.
std::vector<float> filled(int64_t n, float base);
std::vector<uint16_t> filled16(int64_t n, DType t);

// The bandwidth of every memory-bound family (kernel_costs.h byte formulas) over the bytes one call moves.
void calibrate_memory(const KernelCalibrationOptions& o, KernelCalibration& k);

}  // namespace sp::planner::calibration_detail
