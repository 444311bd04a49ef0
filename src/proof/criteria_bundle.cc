// The bundle as the protocol wrote it (criteria_rows.h): sealed, one contract, records that agree, every stage ran.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <map>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/checksums.h"
#include "evidence/contract.h"
#include "proof/criteria_rows.h"
#include "proof/seal.h"

namespace sp::proof::criterion {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

// 0. Seal: every file as the protocol wrote it.
Criterion sealed(const GateContext& c) {
  auto bad = check_seal(c.bundle->paths().root());
  const bool ok = bad.ok() && bad->empty();
  return make("bundle sealed and unmodified", ok, ok ? fmt::format("every file matches {}", kSealFile) : "modified",
              "no file added, removed or changed", std::string(kSealFile),
              !bad.ok() ? bad.status().message() : fmt::format("{}", fmt::join(*bad, "; ")));
}

// 0b. Signature: whether the seal carries one (reported only: the gate is a function of the files;
//     `verify --key PUB` checks the signature itself, since only a key tells a resealed bundle apart).
Criterion signed_seal(const GateContext& c) {
  const bool signed_bundle = path_exists(c.bundle->paths().signature());
  Criterion out = make("seal signed (reported only)", true,
                       signed_bundle ? "signed (verify --key PUB checks the signature)" : "not signed",
                       "none: anyone can recompute a seal; a signature needs the key", std::string(kSignatureFile));
  out.required = false;
  return out;
}

// 1. Contract: frozen, verified, and every stage ran under it.
Criterion one_contract(const GateContext& c) {
  const json& frozen = c.bundle->contract();
  std::vector<std::string> problems;
  if (Status s = verify_contract(frozen, std::string(kContractFile)); !s.ok()) problems.push_back(s.message());
  std::vector<std::string_view> stages(kStageNames.begin(), kStageNames.end());
  if (!c.bundle->anchors().empty()) stages.push_back(kAnchoredStage);
  if (!c.bundle->fault_anchors().empty()) stages.push_back(kFaultAnchoredStage);
  for (std::string_view stage : stages) {
    const std::string label = stage_file(stage, kContractFile);
    auto sc = read_json_file(c.bundle->paths().stage(stage).contract());
    if (!sc.ok()) {
      problems.push_back(fmt::format("{}: {}", label, sc.status().message()));
      continue;
    }
    if (Status s = verify_contract(*sc, label); !s.ok()) problems.push_back(s.message());
    for (const std::string& d : contract_diff(frozen, *sc, stage_contract_differences()))
      problems.push_back(fmt::format("{}: {}", label, d));
    const json par = (*sc)["config"]["parallel"];
    const bool reference = stage == kReferenceStage;
    if (reference && (par.value("dp", 0) != 1 || par.value("tp", 0) != 1 || par.value("pp", 0) != 1))
      problems.push_back(fmt::format("{}: not the single-device topology", label));
    if (!reference && par != frozen["config"]["parallel"])
      problems.push_back(fmt::format("{}: config.parallel differs from the frozen contract", label));
  }
  return make("one contract across the stages", problems.empty(),
              problems.empty() ? fmt::format("hash {}", frozen.value("hash", std::string()).substr(0, 16))
                               : fmt::format("{} difference(s)", problems.size()),
              "identical up to topology and evidence settings", fmt::format("{}, */{}", kContractFile, kContractFile),
              problems.empty() ? "" : problems.front());
}

// 1b. What is recorded twice agrees: each stage's loss in metrics.jsonl is, bit for bit, the loss its
//     checksums.jsonl holds at that step (a loss edited in one place only is caught here).
Criterion records_agree(const GateContext& c) {
  std::vector<std::string> problems;
  int64_t checked = 0;
  std::vector<std::string_view> stages = {kReferenceStage, kParallelStage, kFaultStage, kRecoveryStage};
  if (!c.bundle->anchors().empty()) stages.push_back(kAnchoredStage);
  if (!c.bundle->fault_anchors().empty()) stages.push_back(kFaultAnchoredStage);
  for (std::string_view stage : stages) {
    const RunPaths run = c.bundle->paths().stage(stage);
    // A fault run that stopped before its first record has none (stages completed does not require it).
    if ((stage == kFaultStage || stage == kFaultAnchoredStage) && !path_exists(run.checksums())) continue;
    auto records = read_checksums(run.checksums());
    if (!records.ok()) {
      problems.push_back(records.status().message());
      continue;
    }
    std::map<int64_t, double> loss;
    std::map<int64_t, const ChecksumRecord*> scaler;  // fp16
    for (const ChecksumRecord& r : *records) {
      if (r.key.phase == "loss") loss[r.key.step] = r.value;
      if (r.key.phase == evidence::kScalerPhase) scaler[r.key.step] = &r;
    }
    for (const json& m : metrics_records(run)) {
      const int64_t step = m.value("step", int64_t{-1});
      if (step < 0 || !m.contains("loss")) continue;
      ++checked;
      // fp16: the loss scale and the skip, recorded in both files, agree exactly.
      const auto sc = scaler.find(step);
      if (m.contains("loss_scale") != (sc != scaler.end()))
        problems.push_back(fmt::format("step {}: {} {} a loss scale, {} {}", step, stage_file(stage, kMetricsFile),
                                       m.contains("loss_scale") ? "has" : "has no", stage_file(stage, kChecksumsFile),
                                       sc != scaler.end() ? "has a scaler record" : "has no scaler record"));
      else if (sc != scaler.end() &&
               (m.value("loss_scale", 0.0) != sc->second->scale || m.value("skipped", false) != sc->second->skipped))
        problems.push_back(fmt::format("step {}: {} says loss scale {} (skipped {}), {} says {} (skipped {})", step,
                                       stage_file(stage, kMetricsFile), m.value("loss_scale", 0.0),
                                       m.value("skipped", false), stage_file(stage, kChecksumsFile), sc->second->scale,
                                       sc->second->skipped));
      const auto it = loss.find(step);
      const double v = m["loss"].is_number() ? m["loss"].get<double>() : std::nan("");
      if (it == loss.end())
        problems.push_back(fmt::format("{}: step {} has a loss but {} has none", stage_file(stage, kMetricsFile), step,
                                       stage_file(stage, kChecksumsFile)));
      else if (std::memcmp(&v, &it->second, sizeof v) != 0 && !(std::isnan(v) && std::isnan(it->second)))
        problems.push_back(fmt::format("step {}: {} says loss {:.17g}, {} says {:.17g}", step,
                                       stage_file(stage, kMetricsFile), v, stage_file(stage, kChecksumsFile),
                                       it->second));
    }
  }
  return make("records agree across views", problems.empty(),
              fmt::format("{} losses compared, {} differ", checked, problems.size()),
              "metrics.jsonl and checksums.jsonl hold the same loss bits (fp16: loss scale and skip) at every step",
              fmt::format("*/{}, */{}", kMetricsFile, kChecksumsFile), problems.empty() ? "" : problems.front());
}

// 2. The stages ran to completion (the fault stage may not).
Criterion stages_completed(const GateContext& c) {
  std::vector<std::string> failed;
  std::vector<std::string_view> required = {"contract", kReferenceStage, kParallelStage, kRecoveryStage};
  if (!c.bundle->anchors().empty()) required.push_back(kAnchoredStage);
  for (std::string_view stage : required) {
    const json* st = c.bundle->stage(stage);
    if (st == nullptr)
      failed.push_back(fmt::format("{}: did not run", stage));
    else if (st->value("exit_code", -1) != 0)
      failed.push_back(fmt::format("{}: exit {}: {}", stage, st->value("exit_code", -1), st->value("error", "")));
  }
  return make(
      "stages completed", failed.empty(),
      failed.empty() ? fmt::format("{}: exit 0", fmt::join(required, ", ")) : fmt::format("{} failed", failed.size()),
      "exit 0", std::string(kProveFile), failed.empty() ? "" : failed.front());
}

}  // namespace sp::proof::criterion
