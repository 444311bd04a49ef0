// A proof bundle, read back (docs/prove.md): prove.json (the protocol's parameters and how each stage
// ended), the frozen contract, and one run bundle per stage. The gate (gate.h), the first divergence
// (first_divergence.h) and the seal (seal.h) read a bundle only through this and the evidence readers,
// so `prove` and `verify DIR` derive the same verdict from the same bytes.
// Not the stages themselves (cli/cmd_prove.cc runs them) and not the formats (docs/formats/).
// Invariant: everything here is a pure function of the bundle's files.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "evidence/bundle_paths.h"
#include "evidence/faults.h"

namespace sp::proof {

class ProofBundle {
 public:
  // Reads prove.json and contract.json strictly; the fault spec must parse.
  static Result<ProofBundle> open(const std::string& dir);

  const evidence::ProofPaths& paths() const { return paths_; }
  const nlohmann::json& prove() const { return prove_; }
  const nlohmann::json& contract() const { return contract_; }  // the frozen contract (stage 1)
  const evidence::FaultSpec& fault() const { return fault_; }
  int64_t checkpoint_step() const { return checkpoint_step_; }  // k
  int world_size() const { return world_size_; }
  // The anchored replays (prove.json "anchors", "fault_anchors", "fault_warmup"): empty when the
  // configuration promises bitwise equality and nothing was replayed.
  const std::vector<int64_t>& anchors() const { return anchors_; }
  const std::vector<int64_t>& fault_anchors() const { return fault_anchors_; }
  // The evaluation points the anchored replay evaluated from the reference's state (prove.json
  // "anchored_evals"; −1: the initial eval).
  const std::vector<int64_t>& anchored_evals() const { return anchored_evals_; }
  // The record of stage `name` in prove.json's "stages" (null if it did not run).
  const nlohmann::json* stage(std::string_view name) const;

 private:
  explicit ProofBundle(std::string dir) : paths_(std::move(dir)) {}
  evidence::ProofPaths paths_;
  nlohmann::json prove_, contract_;
  evidence::FaultSpec fault_;
  int64_t checkpoint_step_ = 0;
  int world_size_ = 1;
  std::vector<int64_t> anchors_, fault_anchors_, anchored_evals_;
};

// Readers of a stage's metrics.jsonl shared by the views and the criteria. A missing or unreadable
// file reads as no records: the criterion that needs them then fails, naming the file.
std::vector<nlohmann::json> metrics_records(const evidence::RunPaths& run);
std::map<int64_t, double> eval_losses(const evidence::RunPaths& run);  // step → eval loss; −1: at initialization
std::optional<double> initial_eval(const evidence::RunPaths& run);
std::optional<double> final_eval(const evidence::RunPaths& run);
double median_tokens_per_s(const evidence::RunPaths& run);  // over steps ≥ 1 (step 0 warms up)

}  // namespace sp::proof
