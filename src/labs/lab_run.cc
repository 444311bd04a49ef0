// Checking a lab's run and what its bundle carries about it (docs/labs.md). The catalogue itself is data
// (configs/labs/catalogue.toml, labs/catalogue.h): adding a lab is adding one [[lab]] table. Each lab
// is checked by tests/unit/labs_test.cc and again by `lab run` before launch (validate_lab), so a broken
// preset or an inapplicable fault is refused with exit 2, never run.
#include "labs/lab_run.h"

#include <fmt/format.h>

#include "config/run_sources.h"
#include "evidence/faults.h"
#include "labs/judge_lab.h"
#include "labs/plan_lab.h"
#include "plan/protocol.h"
#include "plan/run_plan.h"

namespace sp::labs {

std::string lab_file(const std::string& root, const std::string& file) {
  return file.empty() || file.front() == '/' ? file : root + "/" + file;
}

Result<config::RunConfig> lab_config(const Lab& lab, const std::string& root,
                                     const std::vector<std::string>& extra_sets) {
  std::vector<std::string> sets = lab.sets;
  sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  Result<config::RunConfig> config = config::load_run_config(
      root, lab.preset, "", lab_file(root, lab.model_config), sets,
      config::DeepSpeedInput{.file = lab_file(root, lab.deepspeed), .world = lab.deepspeed.empty() ? 0 : lab.world});
  if (!config.ok()) return config.status().with_context(fmt::format("lab {}", lab.key));
  return config;
}

Status validate_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets) {
  if (!lab.available)
    return failed_precondition("lab {} (§{} {}) is not available: {}", lab.key, lab.section, lab.title,
                               lab.unavailable_reason);
  if (lab.is_plan()) {
    if (!extra_sets.empty())
      return invalid_argument("lab {} is a plan lab: --set applies to a proof lab's run configuration", lab.key)
          .with_hint("vary a plan with `shardproof plan` (the commands `lab show " + lab.key + "` prints)");
    return validate_plan_lab(lab, root);
  }
  if (lab.is_judge()) return validate_judge_lab(lab, root, extra_sets);
  SP_ASSIGN_OR_RETURN(const config::RunConfig config, lab_config(lab, root, extra_sets));
  const auto context = [&](const Status& s) { return s.with_context(fmt::format("lab {}", lab.key)); };
  // The declared world is the catalogue's promise; a learner's --set may change the topology.
  const int world = extra_sets.empty() ? lab.world : config.parallel.world();
  Result<plan::RunPlan> plan = plan::RunPlan::make(config, world);
  if (!plan.ok()) return context(plan.status());
  Result<evidence::FaultSpec> fault = evidence::parse_fault(lab.fault);
  if (!fault.ok()) return context(fault.status());
  if (!fault->any()) return invalid_argument("lab {}: no fault; stage 3 needs one from the catalogue", lab.key);
  // As `prove` plans stage 3 (plan/protocol.h).
  if (Result<plan::ProtocolPlan> p = plan::plan_protocol(config, lab.fault); !p.ok()) return context(p.status());
  return Status();
}

std::string observation_view(const std::string& text) {
  // The first file the observation names decides; the order of `kViews` breaks no tie (earliest match wins).
  static const std::vector<std::pair<std::string_view, std::string_view>> kViews = {
      {"timeline", "pipeline"},       {"ledger", "memory"},
      {"trace", "traffic"},           {"comm_predicted", "traffic"},
      {"checkpoints", "checkpoints"}, {"checksums", "curves"},
      {"metrics", "curves"},          {"first-divergence", "divergence"},
      {"fault/", "divergence"},       {"recovery/", "curves"}};
  size_t best = std::string::npos;
  std::string_view view = "gate";
  for (const auto& [word, id] : kViews)
    if (const size_t at = text.find(word); at < best) best = at, view = id;
  return std::string(view);
}

nlohmann::json lab_bundle_json(const Lab& lab) {
  nlohmann::json observations = nlohmann::json::array();
  for (const Observation& o : lab.observe)
    observations.push_back({{"text", o.text}, {"view", observation_view(o.text)}, {"claims", o.checks}});
  nlohmann::json j = {{"key", lab.key},
                      {"section", lab.section},
                      {"title", lab.title},
                      {"mechanism", lab.mechanism},
                      {"check", fmt::format("shardproof lab check {} DIR{}", lab.key,
                                            lab.variation.empty() ? "" : " --variation " + lab.variation)},
                      {"observations", observations}};
  if (!lab.variation.empty()) j["variation"] = {{"name", lab.variation}, {"sets", lab.sets}};
  return j;
}

}  // namespace sp::labs
