// A plan lab's gate and summary (cli/plan_lab.h), derived from the files under the lab's DIR alone: each
// case's plan.json (docs/plan.md §8) and report.html. The expectations (which cases, which strategy, which
// placement is the fault) are the catalogue's. Each criterion re-checks the file's own facts against each
// other rather than trusting one field: "flagged" needs the warning AND a tp link that crosses nodes;
// "dominant on the inter-node link" needs the dominant part's link to be that crossing link. A missing or
// unreadable case fails every criterion that needs it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <optional>

#include "cli/plan_lab.h"
#include "cli/strategy_spec.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"

namespace sp::cli {
namespace {

// What the gate reads from one case's plan.json; `problem` is why the case does not count as evaluated.
struct CaseRecord {
  PlanLabCase c;
  std::string problem;  // empty: read and consistent with the catalogue
  double step_s = 0, pass_comm_s = 0, mfu = 0;
  int64_t peak_bytes = 0, limit_bytes = 0;
  bool fits = false;
  std::string dominant, dominant_axis, dominant_link;  // "tp backward on inter-node infiniband", "tp", "inter-node …"
  std::vector<std::string> warnings;
  bool tp_crosses_nodes = false;
  std::string tp_link;
  bool ok() const { return problem.empty(); }
};

std::string plan_file(const PlanLabCase& c) { return c.dir() + "/" + std::string(evidence::kPlanFile); }

CaseRecord read_case(const Lab& lab, const PlanLabCase& c, const std::string& dir) {
  CaseRecord r;
  r.c = c;
  const std::string path = dir + "/" + plan_file(c);
  if (!path_exists(path)) {
    r.problem = plan_file(c) + " does not exist";
    return r;
  }
  if (!path_exists(dir + "/" + c.dir() + "/" + std::string(evidence::kReportFile))) {
    r.problem = c.dir() + "/" + std::string(evidence::kReportFile) + " does not exist";
    return r;
  }
  Result<nlohmann::json> j = read_json_file(path);
  if (!j.ok()) {
    r.problem = j.status().message();
    return r;
  }
  const Result<StrategySpec> s = parse_strategy(lab.plan.strategy);
  try {  // a field of the wrong type or missing: the case was not evaluated as the lab says
    const nlohmann::json& in = j->at("inputs");
    const nlohmann::json& st = in.at("strategy");
    const std::vector<std::pair<std::string, std::string>> expected = {{"kind", "plan"},
                                                                       {"inputs.cluster.name", c.cluster},
                                                                       {"inputs.model.name", lab.plan.model},
                                                                       {"inputs.strategy.axis_order", c.placement}};
    const std::vector<std::string> actual = {
        j->at("kind").get<std::string>(), in.at("cluster").at("name").get<std::string>(),
        in.at("model").at("name").get<std::string>(), st.at("axis_order").get<std::string>()};
    for (size_t i = 0; i < expected.size(); ++i)
      if (actual[i] != expected[i].second)
        r.problem = fmt::format("{}: {} is '{}', the lab's case has '{}'", plan_file(c), expected[i].first, actual[i],
                                expected[i].second);
    if (s.ok() && (st.at("dp").get<int>() != s->dp || st.at("tp").get<int>() != s->tp ||
                   st.at("pp").get<int>() != s->pp || st.at("zero").get<int>() != s->zero))
      r.problem = fmt::format("{}: strategy {} is not the lab's {}", plan_file(c), st.at("name").get<std::string>(),
                              lab.plan.strategy);
    if (in.at("cluster").at("nodes").get<int>() != lab.plan.nodes ||
        in.at("global_batch").get<int64_t>() != lab.plan.global_batch)
      r.problem = fmt::format("{}: nodes or global batch are not the lab's ({}, {})", plan_file(c), lab.plan.nodes,
                              lab.plan.global_batch);
    const nlohmann::json& step = j->at("step");
    r.step_s = step.at("seconds").get<double>();
    r.pass_comm_s = step.at("pass_comm_seconds").get<double>();
    r.mfu = step.at("mfu").get<double>();
    r.dominant = step.at("dominant_comm").get<std::string>();
    const size_t on = r.dominant.find(" on ");
    r.dominant_axis = r.dominant.substr(0, r.dominant.find(' '));
    r.dominant_link = on == std::string::npos ? "" : r.dominant.substr(on + 4);
    const nlohmann::json& mem = j->at("memory");
    r.fits = mem.at("fits").get<bool>();
    r.peak_bytes = mem.at("peak_bytes").get<int64_t>();
    r.limit_bytes = mem.at("limit_bytes").get<int64_t>();
    const nlohmann::json& placement = j->at("placement");
    r.warnings = placement.at("warnings").get<std::vector<std::string>>();
    r.tp_crosses_nodes = placement.at("links").at("tp").at("crosses_nodes").get<bool>();
    r.tp_link = placement.at("links").at("tp").at("link").get<std::string>();
    if (!(std::isfinite(r.step_s) && r.step_s > 0))
      r.problem = fmt::format("{}: step.seconds is {}", plan_file(c), r.step_s);
  } catch (const nlohmann::json::exception& e) {
    r.problem = fmt::format("{}: {}", plan_file(c), e.what());
  }
  return r;
}

// Collects the cases a criterion judges: `check` returns the problem of one case ("" when it holds).
template <typename Check>
proof::Criterion judge(std::string name, std::string threshold, const std::vector<const CaseRecord*>& cases,
                       Check check) {
  proof::Criterion k;
  k.name = std::move(name);
  k.threshold = std::move(threshold);
  std::vector<std::string> held, evidence;
  for (const CaseRecord* r : cases) {
    evidence.push_back(plan_file(r->c));
    const std::string problem = r->ok() ? check(*r) : r->c.dir() + " not evaluated (" + r->problem + ")";
    if (problem.empty())
      held.push_back(r->c.dir());
    else if (k.detail.empty())
      k.detail = problem;
  }
  k.passed = !cases.empty() && k.detail.empty();
  k.measured = fmt::format("{} of {} cases hold", held.size(), cases.size());
  k.evidence = fmt::format("{}", fmt::join(evidence, ", "));
  if (cases.empty()) k.detail = "no case to judge";
  return k;
}

std::string seconds(double s) { return fmt::format("{:.2f} s", s); }

}  // namespace

proof::Gate plan_lab_gate(const Lab& lab, const std::string& dir) {
  std::vector<CaseRecord> records;
  for (const PlanLabCase& c : plan_lab_cases(lab)) records.push_back(read_case(lab, c, dir));
  std::vector<const CaseRecord*> all, sound, fault;
  for (const CaseRecord& r : records) {
    all.push_back(&r);
    (r.c.placement == lab.plan.fault_placement ? fault : sound).push_back(&r);
  }
  const auto find = [&](const std::string& cluster, const std::string& placement) -> const CaseRecord* {
    for (const CaseRecord& r : records)
      if (r.c.cluster == cluster && r.c.placement == placement) return &r;
    return nullptr;
  };
  proof::Gate g;
  g.criteria.push_back(judge("every case evaluated",
                             "plan.json (the lab's cluster, nodes, model, strategy, axis order) and report.html for "
                             "every cluster × placement",
                             all, [](const CaseRecord&) { return std::string(); }));
  g.criteria.push_back(
      judge("every case fits", "memory.fits and peak_bytes ≤ limit_bytes", all, [](const CaseRecord& r) {
        return r.fits && r.peak_bytes <= r.limit_bytes ? std::string()
                                                       : fmt::format("{}: peak {} B against {} B (fits: {})", r.c.dir(),
                                                                     r.peak_bytes, r.limit_bytes, r.fits);
      }));
  g.criteria.push_back(judge("sound placements not flagged", "no placement.warnings and the tp groups inside one node",
                             sound, [](const CaseRecord& r) {
                               if (!r.warnings.empty())
                                 return fmt::format("{}: flagged: {}", r.c.dir(), r.warnings.front());
                               if (r.tp_crosses_nodes)
                                 return fmt::format("{}: tp groups cross nodes ({}) unflagged", r.c.dir(), r.tp_link);
                               return std::string();
                             }));
  g.criteria.push_back(
      judge("fault placement flagged", "placement.warnings names the tp groups and they cross nodes (links.tp)", fault,
            [](const CaseRecord& r) {
              if (!r.tp_crosses_nodes)
                return fmt::format("{}: tp groups do not cross nodes ({})", r.c.dir(), r.tp_link);
              for (const std::string& w : r.warnings)
                if (w.find("tp groups") != std::string::npos) return std::string();
              return fmt::format("{}: the topology check did not flag tp groups that cross nodes on {}", r.c.dir(),
                                 r.tp_link);
            }));
  g.criteria.push_back(judge("fault dominated by the inter-node link",
                             "step.dominant_comm is on links.tp.link, a link that crosses nodes", fault,
                             [](const CaseRecord& r) {
                               return r.tp_crosses_nodes && r.dominant_link == r.tp_link
                                          ? std::string()
                                          : fmt::format("{}: dominant '{}', tp link '{}' (crosses nodes: {})",
                                                        r.c.dir(), r.dominant, r.tp_link, r.tp_crosses_nodes);
                             }));
  g.criteria.push_back(judge("fault placement slower", "step.seconds above every sound placement's on its cluster",
                             fault, [&](const CaseRecord& r) {
                               for (const std::string& p : lab.plan.placements) {
                                 const CaseRecord* s = find(r.c.cluster, p);
                                 if (p == lab.plan.fault_placement || s == nullptr) continue;
                                 if (!s->ok()) return fmt::format("{} not evaluated", s->c.dir());
                                 if (!(r.step_s > s->step_s))
                                   return fmt::format("{} {} is not slower than {} {}", r.c.dir(), seconds(r.step_s),
                                                      s->c.dir(), seconds(s->step_s));
                               }
                               return std::string();
                             }));
  // The clusters differ: on every placement, every pair of clusters' step times apart by more than 1 %.
  g.criteria.push_back(judge("clusters differ", "step.seconds of each placement differ by > 1 % between clusters", all,
                             [&](const CaseRecord& r) {
                               for (const std::string& other : lab.plan.clusters) {
                                 const CaseRecord* o = find(other, r.c.placement);
                                 if (other == r.c.cluster || o == nullptr) continue;
                                 if (!o->ok()) return fmt::format("{} not evaluated", o->c.dir());
                                 if (!(std::abs(r.step_s - o->step_s) > 0.01 * std::max(r.step_s, o->step_s)))
                                   return fmt::format("{} {} and {} {} are within 1 %", r.c.dir(), seconds(r.step_s),
                                                      o->c.dir(), seconds(o->step_s));
                               }
                               return std::string();
                             }));
  // Information: how much the fault placement's in-pass collectives grow per cluster.
  proof::Criterion growth;
  growth.name = "in-pass collectives, fault / sound";
  growth.passed = true;
  growth.required = false;
  growth.threshold = "information";
  growth.evidence = "step.pass_comm_seconds";
  std::vector<std::string> parts;
  for (const CaseRecord* f : fault)
    for (const CaseRecord* s : sound)
      if (s->c.cluster == f->c.cluster && f->ok() && s->ok() && s->pass_comm_s > 0)
        parts.push_back(fmt::format("{}: {} → {} ({:.1f}×)", f->c.cluster, seconds(s->pass_comm_s),
                                    seconds(f->pass_comm_s), f->pass_comm_s / s->pass_comm_s));
  growth.measured = parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, "; "));
  g.criteria.push_back(growth);
  return g;
}

std::string plan_lab_summary(const Lab& lab, const std::string& dir, const proof::Gate& gate) {
  const PlanLabSpec& p = lab.plan;
  std::string s = fmt::format("# {} §{} {}\n\n**Verdict: {}**\n\n", lab.key, lab.section, lab.title,
                              gate.passed() ? "PASS" : "FAIL");
  s += fmt::format(
      "{} with {}, {} nodes per cluster, global batch {}; the planner's figures (fp32 peak at 50 %, the "
      "assumptions in each plan.json). The fault placement is `{}`.\n\n",
      p.model, p.strategy, p.nodes, p.global_batch, p.fault_placement);
  s += "| cluster | placement | step | MFU | dominant communication | collectives inside the passes | warnings |\n"
       "|---|---|---|---|---|---|---|\n";
  for (const PlanLabCase& c : plan_lab_cases(lab)) {
    const CaseRecord r = read_case(lab, c, dir);
    if (!r.ok()) {
      s += fmt::format("| {} | `{}` | not evaluated | | {} | | |\n", c.cluster, c.placement, r.problem);
      continue;
    }
    s += fmt::format(
        "| {} | `{}` | {} | {:.1f} % | {} | {} | {} |\n", c.cluster, c.placement, seconds(r.step_s), 100 * r.mfu,
        r.dominant, seconds(r.pass_comm_s),
        r.warnings.empty() ? std::string("none") : fmt::format("**{}**: {}", r.warnings.size(), r.warnings.front()));
  }
  s += "\nEach case's folder holds plan.json and report.html (`shardproof plan --out` writes the same).\n";
  s += "\n## Gate\n\n| criterion | result | measured | threshold | evidence |\n|---|---|---|---|---|\n";
  for (const proof::Criterion& c : gate.criteria)
    s += fmt::format("| {} | {} | {} | {} | `{}` |\n", c.name, !c.required ? "info" : (c.passed ? "pass" : "**FAIL**"),
                     c.measured, c.threshold, c.evidence);
  bool any = false;
  for (const proof::Criterion& c : gate.criteria)
    if (!c.detail.empty()) {
      if (!any) s += "\n## Details\n\n";
      any = true;
      s += fmt::format("- **{}**: {}\n", c.name, c.detail);
    }
  return s;
}

}  // namespace sp::cli
