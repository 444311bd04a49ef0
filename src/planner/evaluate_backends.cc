// The run's GEMM backend against the calibrated one (evaluate_backends.h).
#include "planner/evaluate_backends.h"

#include <fmt/format.h>

namespace sp::planner {

namespace {

// "openblas-0.3.21/Cooperlake" → "openblas"; "openblas sgemm, 1 thread" → "openblas"; "fallback-sgemm" → "fallback".
std::string library_of(const std::string& backend) { return backend.substr(0, backend.find_first_of("- ,")); }

// A name as kernels::gemm32_backend_name and Gemm16::name() write it: library-version/detail.
bool canonical(const std::string& backend) {
  const size_t dash = backend.find('-'), slash = backend.find('/');
  return dash != std::string::npos && slash != std::string::npos && dash < slash &&
         backend.find(' ') == std::string::npos;
}

}  // namespace

std::string run_gemm_backend(const nlohmann::json& contract, const std::string& dtype) {
  const nlohmann::json engine = contract.value("engine", nlohmann::json::object());
  if (dtype == "fp32") return engine.value("gemm32", std::string("openblas"));
  return engine.value("gemm16", std::string());
}

Status check_calibrated_backend(const nlohmann::json& contract, const std::string& run_dir, const ClusterSpec& cluster,
                                const std::string& cluster_name, const std::string& dtype) {
  const auto calibrated = cluster.measured.gemm_backend.find(dtype);
  if (calibrated == cluster.measured.gemm_backend.end() || calibrated->second.empty()) return Status();
  const std::string ran = run_gemm_backend(contract, dtype);
  if (ran.empty()) return Status();
  const std::string& cal = calibrated->second;
  const bool same = canonical(ran) && canonical(cal) ? ran == cal : library_of(ran) == library_of(cal);
  if (same) return Status();
  const std::string field = dtype == "fp32" ? "engine.gemm32" : "engine.gemm16";
  const std::string lib = library_of(ran);
  return invalid_argument(
             "run '{}' executed its {} GEMMs on {} (contract {}), but cluster '{}' was calibrated on {} "
             "([device.measured] gemm_backend.{}): its rates are another backend's",
             run_dir, dtype, ran, field, cluster_name, cal, dtype)
      .with_hint(dtype == "fp32" && (lib == "openblas" || lib == "onednn")
                     ? fmt::format("calibrate what the run executes (shardproof plan calibrate --gemm32 {} on the "
                                   "run's host), or price its GEMMs at a stated fraction of the peak (--efficiency)",
                                   lib)
                     : "calibrate on the run's host (shardproof plan calibrate), or price its GEMMs at a stated "
                       "fraction of the peak (--efficiency)");
}

}  // namespace sp::planner
