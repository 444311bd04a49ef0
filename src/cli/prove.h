// `shardproof prove`: the four-stage proof protocol (docs/prove.md). Driver process, not an MPI rank:
// each stage is its own `mpirun` launch of this binary, and the gate is derived from the files the
// stages wrote (proof/gate.h), the same way `shardproof verify DIR` derives it for a third party.
//   1 contract   freeze the run contract (config, data, versions) into DIR/contract.json
//   2 reference  dp=tp=pp=1 and the parallel configuration, full evidence, checkpoint at step k
//   3 fault      the parallel configuration with exactly one catalogue fault: first divergence
//   4 recovery   no fault, resume from the step-k checkpoint: the reference trajectory again
#pragma once

#include <string>
#include <vector>

#include "cli/run_source.h"
#include "labs/catalogue.h"
#include "proof/gate.h"

namespace sp::cli {

struct ProveOptions {
  RunSource source;          // preset or config, model config, ds_config, sets, root; np: the parallel run's world
                             // size (dp = np / (tp × pp) unless a --set gives dp)
  std::string fault;         // catalogue fault NAME[@step][:rank]; empty: the preset's [prove] fault
  std::string out;           // bundle directory (must not hold a previous bundle)
  std::string cache;         // prepared-data cache (default <root>/.shardproof-cache)
  std::string title;         // heading of summary.md (labs pass their key and title)
  bool quiet = false;        // no per-step progress lines from the stages
  bool no_recovery = false;  // skip stage 4: shows that the gate fails without it (tests, labs)
  std::string sign;          // Ed25519 private key (PEM): sign the seal (bundle.sig)
  // The lab a bundle carries (prove.json "lab": key, section, title, mechanism, observations with the report
  // view each one points to); null outside `lab run`. summary.md and report.html open with it.
  nlohmann::json lab{};
};

// Runs the protocol; prints the stage lines, the verdict, the first-divergence line and the bundle path.
// Returns the exit code: 0 PASS, 1 FAIL, 2 usage or configuration error.
int run_prove(const ProveOptions& options);

// The gate table, the first-divergence line, the verdict and the bundle path, on stdout.
void print_verdict(const proof::ProofVerdict& verdict, const std::string& bundle);

// A proof lab's run as `prove` runs it (`lab run KEY --out DIR`, cmd_lab.cc; docs/labs.md).
struct LabRunOptions {
  std::string out{};                      // bundle directory
  std::string root{};                     // source root (configs/, data/)
  std::string cache{};                    // prepared-data cache (empty: prove's default)
  std::vector<std::string> extra_sets{};  // learner's variations, applied after the lab's sets
  bool quiet = false;
};
// The proof protocol's options for this lab (title "LSL-D §4.2.1 Data parallelism"), carrying the lab
// (labs/lab_run.h lab_bundle_json).
ProveOptions lab_prove_options(const labs::Lab& lab, const LabRunOptions& options);

}  // namespace sp::cli
