#include "evidence/contract.h"

#include <cblas.h>
#include <fmt/format.h>

#include "core/hash.h"
#include "core/json_io.h"
#include "core/revision.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {

std::string engine_revision() { return git_revision(); }
std::string compiler_version() { return fmt::format("g++ {}", __VERSION__); }
std::string blas_version() { return openblas_get_config(); }

std::string blas_core_hint(const std::vector<std::string>& diffs) {
  std::string out;
  for (const std::string& d : diffs)
    if (d.rfind("engine.blas:", 0) == 0)
      out +=
          "; engine.blas names the OpenBLAS core, which changes fp32 bits: set OPENBLAS_CORETYPE to the "
          "recorded core (e.g. OPENBLAS_CORETYPE=Prescott) to run that one (docs/performance.md)";
  for (const std::string& d : diffs)
    if (d.rfind("config.train.gemm32:", 0) == 0) {
      // "config.train.gemm32: "onednn" ≠ "openblas"": the recorded backend is the first value.
      const size_t q0 = d.find('"'), q1 = q0 == std::string::npos ? q0 : d.find('"', q0 + 1);
      const std::string recorded = q1 == std::string::npos ? "the recorded backend" : d.substr(q0 + 1, q1 - q0 - 1);
      out +=
          "; train.gemm32 names the fp32 GEMM backend, which changes fp32 bits (\"auto\" is this host's pick, "
          "docs/kernels.md §\"The fp32 GEMM\"): --set train.gemm32=" +
          recorded + " runs the recorded one";
      break;
    }
  return out;
}

std::string contract_hash(const nlohmann::json& c) { return sha256_hex(c.dump()); }

nlohmann::json make_contract(const ContractInputs& in) {
  nlohmann::json c = {
      {"format_version", kContractFormatVersion},
      {"engine",
       {{"revision", engine_revision()},
        {"compiler", compiler_version()},
        {"mpi", in.mpi_version},
        {"blas", blas_version()}}},
      {"config", in.config},
      {"data", in.data_identity},
      {"world_size", in.world_size},
  };
  if (!in.gemm16.empty()) c["engine"]["gemm16"] = in.gemm16;
  if (!in.gemm32.empty()) c["engine"]["gemm32"] = in.gemm32;
  c["hash"] = contract_hash(c);
  return c;
}

Status verify_contract(const nlohmann::json& contract, const std::string& label) {
  if (!contract.is_object() || !contract.contains("hash") || !contract.at("hash").is_string())
    return corrupt("{}: contract has no \"hash\" field", label);
  nlohmann::json body = contract;
  body.erase("hash");
  const std::string want = contract_hash(body);
  if (contract.at("hash").get<std::string>() != want)
    return corrupt("{}: contract content does not match its hash (stored {}, computed {}): the file was edited", label,
                   contract.at("hash").get<std::string>(), want);
  return Status();
}

static void diff(const nlohmann::json& a, const nlohmann::json& b, const std::string& path,
                 const std::vector<std::string>& ignore, std::vector<std::string>& out) {
  for (const auto& prefix : ignore)
    if (path == prefix || path.rfind(prefix + ".", 0) == 0) return;
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items())
      diff(v, b.contains(k) ? b.at(k) : nlohmann::json(), path.empty() ? k : path + "." + k, ignore, out);
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) diff(nlohmann::json(), v, path.empty() ? k : path + "." + k, ignore, out);
    return;
  }
  if (a != b)
    out.push_back(
        fmt::format("{}: {} ≠ {}", path, a.is_null() ? "(absent)" : a.dump(), b.is_null() ? "(absent)" : b.dump()));
}

std::vector<std::string> contract_diff(const nlohmann::json& a, const nlohmann::json& b,
                                       const std::vector<std::string>& ignore) {
  std::vector<std::string> out;
  diff(a, b, "", ignore, out);
  return out;
}

const std::vector<std::string>& stage_contract_differences() {
  static const std::vector<std::string> keys = {"hash", "world_size", "config.parallel", "config.evidence",
                                                "config.prove"};
  return keys;
}

const std::vector<std::string>& resumable_contract_differences() {
  static const std::vector<std::string> keys = {
      "hash",         "world_size",  "config.parallel",        "config.evidence",
      "config.prove", "config.name", "config.train.recompute", "engine.mpi"};
  return keys;
}

const std::vector<std::string>& comparable_contract_differences() {
  static const std::vector<std::string> keys = {"hash",
                                                "world_size",
                                                "config.parallel",
                                                "config.evidence",
                                                "config.prove",
                                                "config.name",
                                                "engine.mpi",
                                                "config.train.recompute",
                                                "config.train.eval_every",
                                                "config.train.eval_batches",
                                                "config.model_config",
                                                "config.deepspeed"};
  return keys;
}

Status check_expected_contract(const std::string& path, const nlohmann::json& contract) {
  SP_ASSIGN_OR_RETURN(const nlohmann::json frozen, read_json_file(path, uint64_t{1} << 26));
  SP_RETURN_IF_ERROR(verify_contract(frozen, path));
  const std::vector<std::string> diffs = contract_diff(frozen, contract, stage_contract_differences());
  if (diffs.empty()) return Status();
  std::string lines;
  for (const std::string& d : diffs) lines += "\n    " + d;
  return failed_precondition("this run's contract differs from the frozen contract '{}' (frozen ≠ this run):{}", path,
                             lines)
      .with_hint(
          "a proof's stages must share one contract: same build, config, data and seed; rerun the whole "
          "protocol if any of them changed" +
          blas_core_hint(diffs));
}

}  // namespace sp::evidence
