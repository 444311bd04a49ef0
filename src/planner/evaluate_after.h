// Internal to planner/ (evaluate.cc): what a rank spends after the pipeline on its own — the optimizer's
// kernels and the evidence — priced with the cluster's measured rates (kernel_costs.h), and the group arithmetic
// both sides use. Not an interface of the planner.
#pragma once

#include <string>

#include "planner/evaluate.h"
#include "planner/kernel_costs.h"

namespace sp::planner::evaluate_detail {

// "tp" of "tp[dp0.pp1]": the axis of a group name (comm/process_grid.h).
std::string axis_of_group(const std::string& group);
// Members of a group on `axis` ("tp", "dp", "pp", or the world of a parameter-server run).
int group_size(const config::ParallelConfig& pc, const std::string& axis);

// The optimizer step of the rank at `coords` (kernel_costs.h optimizer_kernels).
KernelTimes optimizer_times(const PlanQuery& q, const plan::RunPlan& plan, const comm::Coords& coords, double peak);
// The evidence of one step on rank `r` (kernel_costs.h evidence_kernels): its checksums, its replica digest and
// its trace's payload digests over the step's predicted traffic (`r.traffic`, the traffic model's own ops).
KernelTimes evidence_times(const PlanQuery& q, const plan::RunPlan& plan, const RankEvaluation& r, double peak);

}  // namespace sp::planner::evaluate_detail
