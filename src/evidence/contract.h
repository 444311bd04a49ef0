// The run contract (contract.json, docs/formats/contract.md): everything that defines a run,
// frozen and hashed. Two runs are comparable only if their contracts agree on every field except
// the topology; a resumed run or a later protocol stage must present the identical contract, and
// a difference is reported field by field ("train.seed: 1234 ≠ 99").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::evidence {

struct ContractInputs {
  nlohmann::json config;         // RunConfig::to_json()
  nlohmann::json data_identity;  // corpus/tokenizer/split/shard hashes, vocab size
  std::string mpi_version;
  int world_size = 1;
  // The 16-bit GEMM backend that runs (kernels::Gemm16::name(), e.g. "onednn-2.6.3/avx512_core_bf16"), as
  // engine.gemm16; empty in fp32, where the field is absent (an fp32 contract is unchanged).
  std::string gemm16;
  // The fp32 GEMM backend that ran (kernels::gemm32_backend_name: "openblas-0.3.21/Cooperlake",
  // "onednn-2.6.3/avx512_core_bf16"), as engine.gemm32; config.train.gemm32 says which one was asked for.
  std::string gemm32;
};

// Builds the contract document with its "hash" (SHA-256 of the canonical dump of everything else).
nlohmann::json make_contract(const ContractInputs& in);
std::string contract_hash(const nlohmann::json& contract_without_hash);
// Checks the stored hash against the content (a tampered file fails, naming the file).
Status verify_contract(const nlohmann::json& contract, const std::string& label);
// Field-by-field differences ("train.seed: 1234 ≠ 99"), skipping keys under `ignore` prefixes.
std::vector<std::string> contract_diff(const nlohmann::json& a, const nlohmann::json& b,
                                       const std::vector<std::string>& ignore = {});

// The contract keys that may differ between a proof's stages: the topology and evidence settings
// (docs/prove.md). A resumed run may also change the run's name, the MPI library (resharding onto another
// machine) and train.recompute (recomputation trains the same bits; docs/checkpoints.md).
const std::vector<std::string>& stage_contract_differences();
const std::vector<std::string>& resumable_contract_differences();
// Two runs compared with `verify --against` (or in `compare`): also recomputation (the same numbers, bit
// for bit), the evaluation settings (they do not touch training) and where [model] came from (a
// --model-config file; the model itself is compared).
const std::vector<std::string>& comparable_contract_differences();
// --expect-contract: `contract` must be the frozen contract at `path` up to stage_contract_differences().
Status check_expected_contract(const std::string& path, const nlohmann::json& contract);

// "; engine.blas names …" when `diffs` (contract_diff lines) include engine.blas — the OpenBLAS core is part of the
// contract, and OPENBLAS_CORETYPE reproduces the recorded one — and "; train.gemm32 names …" with the --set that
// runs the recorded fp32 GEMM backend when they include config.train.gemm32; else "". Appended to hints.
std::string blas_core_hint(const std::vector<std::string>& diffs);

std::string engine_revision();
std::string compiler_version();
std::string blas_version();

}  // namespace sp::evidence
