// The proof bundle, read back: the first divergence of a fault run and the gate, derived from the
// files the protocol's stages wrote (docs/prove.md) and nothing else. `shardproof prove` calls these
// after its stages; `shardproof verify DIR` calls the same functions on a bundle someone sent, so the
// verdict is reproducible by a third party without running the training code path.
// Not the stages themselves (cli/cmd_prove.cc) and not the evidence formats (docs/formats/).
// Invariant: the result is a pure function of the bundle's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "evidence/compare.h"
#include "evidence/faults.h"
#include "evidence/gate.h"

namespace sp::parallel {

// Bundle layout: DIR/prove.json (protocol parameters and stage outcomes), DIR/contract.json (stage 1),
// DIR/{reference,parallel,fault,recovery}/ (one run bundle each), DIR/first_divergence.json,
// DIR/gate.json, DIR/summary.md, DIR/bundle.sha256 (the seal).
inline constexpr const char* kStageDirs[] = {"reference", "parallel", "fault", "recovery"};

// One evidence view's verdict on the fault run.
struct Detection {
  evidence::View view = evidence::View::kJob;
  bool recorded = true;       // the bundle holds this view's evidence
  bool found = false;         // it saw a difference from the reference (or from the plan)
  int64_t step = -1;
  std::string phase = {};     // trace phase, checksum phase (loss/grad/param), "replicas", "checkpoint", ...
  int point = 0;              // where in a step the view observes (docs/prove.md §first divergence)
  std::vector<int> ranks = {};  // world ranks named, when the view can name them
  std::string tensor = {};
  std::string detail = {};
  std::string evidence = {};  // file(s), relative to the bundle
  nlohmann::json to_json() const;
};

struct FirstDivergence {
  std::vector<Detection> views;  // every view, in catalogue order
  int first = -1;                // index into views of the earliest detection; −1: nothing diverged
  std::vector<std::pair<int64_t, int64_t>> propagation;  // (step, checksum records out of class)
  const Detection* earliest() const { return first < 0 ? nullptr : &views[static_cast<size_t>(first)]; }
  nlohmann::json to_json() const;
  std::string line() const;  // "first divergence: checksums, step 4, grad, layers.1.attn.q_proj.weight ..."
};

// The fault run (DIR/fault) against the reference (DIR/reference). `bitwise` is the class the
// parallel stage proved: bitwise configurations are compared bit for bit, the others with the
// documented tolerances.
FirstDivergence locate_first_divergence(const std::string& bundle, const nlohmann::json& prove, bool bitwise,
                                        const evidence::Tolerances& tol = {});

struct ProofVerdict {
  evidence::Gate gate;
  FirstDivergence divergence;
  std::vector<std::string> notes;  // lines for summary.md
};

// Every criterion of the gate (docs/prove.md §gate), from the bundle's files alone.
Result<ProofVerdict> derive_gate(const std::string& bundle);

// bundle.sha256: "SHA256  relative/path" for every file of the bundle but the seal itself.
Status seal_bundle(const std::string& bundle);
// Files whose bytes differ from the seal, that are missing, or that the seal does not list.
Result<std::vector<std::string>> check_seal(const std::string& bundle);

Result<nlohmann::json> read_json_file(const std::string& path);
// The record of stage `name` in prove.json's "stages" (null if it did not run).
const nlohmann::json* find_stage(const nlohmann::json& prove, const std::string& name);

}  // namespace sp::parallel
