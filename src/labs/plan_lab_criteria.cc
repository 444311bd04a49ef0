#include "labs/plan_lab_criteria.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace sp::labs {

using proof::Criterion;
using proof::Gate;

namespace {

std::string seconds(double s) { return fmt::format("{:.2f} s", s); }

// A criterion over `cases`: `check` returns the problem of one case ("" when it holds); a case that was not
// evaluated fails it. The detail is the first problem; no case at all fails too.
Criterion judge(std::string_view name, std::string threshold, const std::vector<const PlanLabRecord*>& cases,
                const std::function<std::string(const PlanLabRecord&)>& check) {
  Criterion k;
  k.name = std::string(name);
  k.threshold = std::move(threshold);
  std::vector<std::string> held, evidence;
  for (const PlanLabRecord* r : cases) {
    evidence.push_back(r->c.plan_file());
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

// 0. Every case's plan.json is what the planner gives from the lab's inputs (the planner is deterministic):
//    an edited figure, however consistent with the others, is not the planner's.
Criterion every_plan_rederived(const PlanLabContext& c) {
  return judge("every plan re-derived from its inputs",
               "plan.json equals the planner's evaluation of the lab's inputs (catalogue, cluster presets)", c.all(),
               [&](const PlanLabRecord& r) {
                 const auto it = c.planner.find(r.c.dir());
                 if (it == c.planner.end())
                   return fmt::format("{}: the planner did not evaluate the lab's inputs", r.c.dir());
                 if (r.plan == it->second) return std::string();
                 const nlohmann::json patch = nlohmann::json::diff(r.plan, it->second);
                 const std::string path = patch.empty() ? "" : patch[0].value("path", std::string());
                 const nlohmann::json::json_pointer at(path);
                 return fmt::format("{}: {} is {}, the planner gives {} from the lab's inputs", r.c.plan_file(),
                                    path.empty() ? "the document" : path,
                                    r.plan.contains(at) ? r.plan.at(at).dump() : "absent",
                                    it->second.contains(at) ? it->second.at(at).dump() : "absent");
               });
}

// 1. Every case's plan.json is the lab's (cluster, nodes, model, strategy, axis order) and has its report.html.
Criterion every_case_evaluated(const PlanLabContext& c) {
  return judge("every case evaluated",
               "plan.json (the lab's cluster, nodes, model, strategy, axis order) and report.html for every "
               "cluster × placement",
               c.all(), [](const PlanLabRecord&) { return std::string(); });
}

// 2. Every case fits its devices' memory.
Criterion every_case_fits(const PlanLabContext& c) {
  return judge("every case fits", "memory.fits and peak_bytes ≤ limit_bytes", c.all(), [](const PlanLabRecord& r) {
    return r.fits && r.peak_bytes <= r.limit_bytes
               ? std::string()
               : fmt::format("{}: peak {} B against {} B (fits: {})", r.c.dir(), r.peak_bytes, r.limit_bytes, r.fits);
  });
}

// 3. The sound placements carry no warning, and their tp groups stay inside a node.
Criterion sound_not_flagged(const PlanLabContext& c) {
  return judge("sound placements not flagged", "no placement.warnings and the tp groups inside one node", c.sound(),
               [](const PlanLabRecord& r) {
                 if (!r.warnings.empty()) return fmt::format("{}: flagged: {}", r.c.dir(), r.warnings.front());
                 if (r.tp_crosses_nodes)
                   return fmt::format("{}: tp groups cross nodes ({}) unflagged", r.c.dir(), r.tp_link);
                 return std::string();
               });
}

// 4. The fault placement is flagged: a warning that names the tp groups, and they do cross nodes.
Criterion fault_flagged(const PlanLabContext& c) {
  return judge("fault placement flagged", "placement.warnings names the tp groups and they cross nodes (links.tp)",
               c.fault(), [](const PlanLabRecord& r) {
                 if (!r.tp_crosses_nodes)
                   return fmt::format("{}: tp groups do not cross nodes ({})", r.c.dir(), r.tp_link);
                 for (const std::string& w : r.warnings)
                   if (w.find("tp groups") != std::string::npos) return std::string();
                 return fmt::format("{}: the topology check did not flag tp groups that cross nodes on {}", r.c.dir(),
                                    r.tp_link);
               });
}

// 5. The fault placement's dominant communication is on the tp groups' link that crosses nodes.
Criterion fault_on_inter_node_link(const PlanLabContext& c) {
  return judge("fault dominated by the inter-node link",
               "step.dominant_comm is on links.tp.link, a link that crosses nodes", c.fault(),
               [](const PlanLabRecord& r) {
                 return r.tp_crosses_nodes && r.dominant_link == r.tp_link
                            ? std::string()
                            : fmt::format("{}: dominant '{}', tp link '{}' (crosses nodes: {})", r.c.dir(), r.dominant,
                                          r.tp_link, r.tp_crosses_nodes);
               });
}

// 6. On every cluster, the fault placement's step is slower than every sound placement's.
Criterion fault_slower(const PlanLabContext& c) {
  return judge("fault placement slower", "step.seconds above every sound placement's on its cluster", c.fault(),
               [&](const PlanLabRecord& r) {
                 for (const std::string& p : c.spec.placements) {
                   const PlanLabRecord* s = c.find(r.c.cluster, p);
                   if (p == c.spec.fault_placement || s == nullptr) continue;
                   if (!s->ok()) return fmt::format("{} not evaluated", s->c.dir());
                   if (!(r.step_s > s->step_s))
                     return fmt::format("{} {} is not slower than {} {}", r.c.dir(), seconds(r.step_s), s->c.dir(),
                                        seconds(s->step_s));
                 }
                 return std::string();
               });
}

// 7. The clusters differ: on every placement, every pair of clusters' step times apart by more than 1 %.
Criterion clusters_differ(const PlanLabContext& c) {
  return judge("clusters differ", "step.seconds of each placement differ by > 1 % between clusters", c.all(),
               [&](const PlanLabRecord& r) {
                 for (const std::string& other : c.spec.clusters) {
                   const PlanLabRecord* o = c.find(other, r.c.placement);
                   if (other == r.c.cluster || o == nullptr) continue;
                   if (!o->ok()) return fmt::format("{} not evaluated", o->c.dir());
                   if (!(std::abs(r.step_s - o->step_s) > 0.01 * std::max(r.step_s, o->step_s)))
                     return fmt::format("{} {} and {} {} are within 1 %", r.c.dir(), seconds(r.step_s), o->c.dir(),
                                        seconds(o->step_s));
                 }
                 return std::string();
               });
}

// 8. Information: how much the fault placement's in-pass collectives grow per cluster.
Criterion pass_comm_growth(const PlanLabContext& c) {
  Criterion growth;
  growth.name = "in-pass collectives, fault / sound";
  growth.passed = true;
  growth.required = false;
  growth.threshold = "information";
  growth.evidence = "step.pass_comm_seconds";
  std::vector<std::string> parts;
  for (const PlanLabRecord* f : c.fault())
    for (const PlanLabRecord* s : c.sound())
      if (s->c.cluster == f->c.cluster && f->ok() && s->ok() && s->pass_comm_s > 0)
        parts.push_back(fmt::format("{}: {} → {} ({:.1f}×)", f->c.cluster, seconds(s->pass_comm_s),
                                    seconds(f->pass_comm_s), f->pass_comm_s / s->pass_comm_s));
  growth.measured = parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, "; "));
  return growth;
}

}  // namespace

PlanLabContext PlanLabContext::make(const PlanLabSpec& spec, const std::string& dir,
                                    std::map<std::string, nlohmann::json> planner) {
  PlanLabContext c;
  c.spec = spec;
  c.planner = std::move(planner);
  for (const PlanLabCase& k : plan_lab_cases(spec)) c.records.push_back(read_plan_lab_case(spec, k, dir));
  return c;
}

std::vector<const PlanLabRecord*> PlanLabContext::all() const {
  std::vector<const PlanLabRecord*> out;
  for (const PlanLabRecord& r : records) out.push_back(&r);
  return out;
}

std::vector<const PlanLabRecord*> PlanLabContext::sound() const {
  std::vector<const PlanLabRecord*> out;
  for (const PlanLabRecord& r : records)
    if (!is_fault(r)) out.push_back(&r);
  return out;
}

std::vector<const PlanLabRecord*> PlanLabContext::fault() const {
  std::vector<const PlanLabRecord*> out;
  for (const PlanLabRecord& r : records)
    if (is_fault(r)) out.push_back(&r);
  return out;
}

const PlanLabRecord* PlanLabContext::find(const std::string& cluster, const std::string& placement) const {
  for (const PlanLabRecord& r : records)
    if (r.c.cluster == cluster && r.c.placement == placement) return &r;
  return nullptr;
}

const std::vector<PlanLabRule>& plan_lab_criteria() {
  static const std::vector<PlanLabRule> k = {
      {"every plan re-derived from its inputs", every_plan_rederived},
      {"every case evaluated", every_case_evaluated},
      {"every case fits", every_case_fits},
      {"sound placements not flagged", sound_not_flagged},
      {"fault placement flagged", fault_flagged},
      {"fault dominated by the inter-node link", fault_on_inter_node_link},
      {"fault placement slower", fault_slower},
      {"clusters differ", clusters_differ},
      {"in-pass collectives, fault / sound", pass_comm_growth},
  };
  return k;
}

Gate plan_lab_gate(const PlanLabContext& context) {
  Gate g;
  for (const PlanLabRule& rule : plan_lab_criteria()) g.criteria.push_back(rule.check(context));
  return g;
}

std::string plan_lab_summary(const PlanLabContext& context, std::string_view heading, const Gate& gate) {
  const PlanLabSpec& p = context.spec;
  std::string s = fmt::format("# {}\n\n**Verdict: {}**\n\n", heading, gate.passed() ? "PASS" : "FAIL");
  s += fmt::format(
      "{} with {}, {} nodes per cluster, global batch {}; the planner's figures (fp32 peak at 50 %, the "
      "assumptions in each plan.json). The fault placement is `{}`.\n\n",
      p.model, p.strategy, p.nodes, p.global_batch, p.fault_placement);
  s += "| cluster | placement | step | MFU | dominant communication | collectives inside the passes | warnings |\n"
       "|---|---|---|---|---|---|---|\n";
  for (const PlanLabRecord& r : context.records) {
    if (!r.ok()) {
      s += fmt::format("| {} | `{}` | not evaluated | | {} | | |\n", r.c.cluster, r.c.placement, r.problem);
      continue;
    }
    s += fmt::format(
        "| {} | `{}` | {} | {:.1f} % | {} | {} | {} |\n", r.c.cluster, r.c.placement, seconds(r.step_s), 100 * r.mfu,
        r.dominant, seconds(r.pass_comm_s),
        r.warnings.empty() ? std::string("none") : fmt::format("**{}**: {}", r.warnings.size(), r.warnings.front()));
  }
  s += "\nEach case's folder holds plan.json and report.html (`shardproof plan --out` writes the same).\n";
  return s + "\n## Gate\n\n" + gate.criteria_markdown();
}

}  // namespace sp::labs
