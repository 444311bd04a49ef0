// The GEMM backend a run executed against the one its cluster file was calibrated on (docs/plan.md §9, §10).
// `plan --run DIR` prices a run with the cluster's measured rates ([device.measured]); a calibration of another
// library, OpenBLAS core or oneDNN ISA measured another machine's GEMMs (oneDNN's sgemm is 0.95–2.1× OpenBLAS's by
// host), so such a plan is refused naming both, rather than silently off by that factor.
// Not a comparison of speed: of names, the contract's engine.gemm32 / engine.gemm16 against the cluster's
// [device.measured] gemm_backend of the dtype the plan prices.
// Invariant: nothing is refused where either side names nothing (a datasheet preset; --efficiency, which prices
// no measured rate), and an old label on either side ("openblas sgemm, 1 thread", a contract from before
// engine.gemm32 named OpenBLAS) is compared by its library only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "planner/cluster.h"

namespace sp::planner {

// The backend a run's contract says ran the GEMMs of `dtype`: engine.gemm32 for fp32 ("openblas" when a contract
// from before it was recorded has none: OpenBLAS was the only fp32 backend then), engine.gemm16 for bf16 and fp16
// ("" when absent).
std::string run_gemm_backend(const nlohmann::json& contract, const std::string& dtype);

// OK, or kInvalidArgument (exit 2) naming the run's backend (from `run_dir`'s contract) and the cluster's (from
// `cluster_name`), with the calibration that would match as the hint.
Status check_calibrated_backend(const nlohmann::json& contract, const std::string& run_dir, const ClusterSpec& cluster,
                                const std::string& cluster_name, const std::string& dtype);

}  // namespace sp::planner
