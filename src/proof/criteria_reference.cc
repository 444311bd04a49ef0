// The parallel run against the single-device reference (criteria_rows.h): gradients, drift, held-out eval,
// throughput.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "proof/criteria_rows.h"

namespace sp::proof::criterion {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

// 8. Gradients (and losses, parameters) against the single-device reference, in the class the contract
//    promises: bit for bit, or (tensor parallelism, fast reductions) within the single-step tolerance at
//    every anchored step, the free-running run complete and within it at step 0.
Criterion gradients_equal(const GateContext& c) {
  const auto& free = c.parallel_vs_reference;
  const std::string files =
      fmt::format("{}, {}", stage_file(kParallelStage, kChecksumsFile), stage_file(kReferenceStage, kChecksumsFile));
  if (c.bitwise)
    return make("gradients equal the single-device reference", free.ok() && free->holds(),
                free.ok() ? free->describe() : "unreadable", "bitwise: the contract's class (docs/equivalence.md)",
                files, problem_of(free));
  const auto& anchored = c.anchored_vs_reference;
  const bool ok = free.ok() && free->holds() && anchored.ok() && anchored->holds();
  return make("gradients equal the single-device reference", ok,
              anchored.ok() ? anchored->describe() : fmt::format("anchored replay: {}", anchored.status().message()),
              "within the single-step tolerances at every anchored step (docs/equivalence.md §anchored)",
              fmt::format("{}, {}", stage_file(kAnchoredStage, kChecksumsFile), files),
              !anchored.ok() || !anchored->holds() ? problem_of(anchored) : problem_of(free));
}

// 8b. How far the free-running trajectories drift (reported, never required): rounding amplified by
//     training, the reason a non-bitwise class is verified per anchored step and not by trajectory.
Criterion trajectory_drift(const GateContext& c) {
  const auto& free = c.parallel_vs_reference;
  double worst = 0;
  int64_t at = -1;
  if (free.ok())
    for (const auto& [s, d] : free->comparison.drift_per_step)
      if (d > worst) worst = d, at = s;
  const auto par = final_eval(c.bundle->paths().parallel()), ref = final_eval(c.bundle->paths().reference());
  const double eval_drift = par && ref ? std::fabs(*par - *ref) / std::fabs(*ref) : NAN;
  // Named and qualified: which record drifted most and that every figure is relative (|a − b| / |b|).
  const auto drift_text = [&] {
    const Divergence& m = free->comparison.max_drift;
    return fmt::format(
        "largest relative difference {:.2g} at step {} ({} {}); loss relative {:.2g}; final eval relative {:.2g}",
        worst, at, m.phase, m.tensor, free->comparison.max_loss_drift, eval_drift);
  };
  // A bitwise bundle has no drift.json (the gate writes it for non-bitwise classes only): not cited then.
  Criterion out = make("trajectory drift (reported only)", true,
                       !free.ok()  ? "unreadable"
                       : c.bitwise ? "none: bitwise"
                                   : drift_text(),
                       "none: drift of a non-bitwise class is expected (docs/equivalence.md)",
                       c.bitwise ? stage_file(kParallelStage, kChecksumsFile)
                                 : fmt::format("{}, {}", kDriftFile, stage_file(kParallelStage, kChecksumsFile)));
  out.required = false;
  return out;
}

// 13. Independent evaluation on the held-out split: the parallel run's eval improves, and every eval equals the
//     reference's at the same point: bit for bit, or (not bitwise) evaluated from the reference's state there on
//     the parallel topology (the anchored replay, at every point prove.json lists), within the single-step loss
//     tolerance — verified like a step, never by the closeness of two free-running trajectories.
Criterion eval_improves(const GateContext& c) {
  const RunPaths par = c.bundle->paths().parallel(), ref = c.bundle->paths().reference();
  const auto init = initial_eval(par), fin = final_eval(par), ref_fin = final_eval(ref);
  const double margin = c.config.prove.eval_margin;
  const bool improves = init && fin && *fin <= *init - margin;
  const std::map<int64_t, double> theirs = eval_losses(ref);
  const std::string compared_file = stage_file(c.bitwise ? kParallelStage : kAnchoredStage, kMetricsFile);
  const std::map<int64_t, double> mine = c.bitwise ? eval_losses(par) : c.anchored_evals;
  std::vector<int64_t> points;  // the evaluation points judged
  if (c.bitwise)
    for (const auto& [s, v] : theirs) points.push_back(s);
  else
    points = c.bundle->anchored_evals();
  std::string problem;
  if (points.empty() && c.config.train.eval_batches > 0)
    problem =
        fmt::format("{} lists no evaluation point evaluated from the reference's state (anchored_evals)", kProveFile);
  double worst = 0;
  for (int64_t s : points) {
    const auto t = theirs.find(s), m = mine.find(s);
    const std::string at = s < 0 ? "the initial eval" : fmt::format("the eval after step {}", s);
    if (t == theirs.end() || m == mine.end()) {
      if (problem.empty())
        problem = fmt::format("{}: {} is missing",
                              t == theirs.end() ? stage_file(kReferenceStage, kMetricsFile) : compared_file, at);
      continue;
    }
    worst = std::max(worst, std::fabs(m->second - t->second) / std::fabs(t->second));
    if (!same_eval(m->second, t->second, c) && problem.empty())
      problem = fmt::format("{}: {}: {:.17g}, the reference's {:.17g}", compared_file, at, m->second, t->second);
  }
  if (c.bitwise && problem.empty() && mine.size() != theirs.size())
    problem = fmt::format("{} holds {} evals, the reference {}", compared_file, mine.size(), theirs.size());
  std::string measured = init && fin ? fmt::format("{:.4f} → {:.4f} (−{:.4f} nats); reference {:.4f}", *init, *fin,
                                                   *init - *fin, ref_fin.value_or(NAN))
                                     : "missing";
  measured +=
      fmt::format("; {} eval point(s) {}", points.size(),
                  c.bitwise ? "bit for bit" : fmt::format("from the reference's state, max rel. {:.2g}", worst));
  return make("held-out eval improves and matches the reference", improves && problem.empty(), measured,
              c.bitwise ? fmt::format("drop ≥ {} nats; every eval equal to the reference's", margin)
                        : fmt::format("drop ≥ {} nats; the reference's state at every listed eval point, evaluated on "
                                      "this topology, within {:.2g} (the single-step loss tolerance) of its eval",
                                      margin, c.eval_tolerance),
              fmt::format("{}, {}, {} (data.split_sha256)", compared_file, stage_file(kReferenceStage, kMetricsFile),
                          kContractFile),
              !improves
                  ? fmt::format("{}: the eval loss did not improve enough", stage_file(kParallelStage, kMetricsFile))
                  : problem);
}

// 14. Throughput: reported, never sufficient.
Criterion throughput(const GateContext& c) {
  const double t_ref = median_tokens_per_s(c.bundle->paths().reference());
  const double t_par = median_tokens_per_s(c.bundle->paths().parallel());
  Criterion out =
      make("throughput (reported only)", true,
           fmt::format("{:.0f} tokens/s on {} ranks vs {:.0f} on one ({:.2f}x)", t_par, c.config.parallel.world(),
                       t_ref, t_ref > 0 ? t_par / t_ref : 0.0),
           "none: speed proves nothing about correctness",
           fmt::format("{}, {}", stage_file(kParallelStage, kMetricsFile), stage_file(kReferenceStage, kMetricsFile)));
  out.required = false;
  return out;
}

bool same_eval(double a, double b, const GateContext& c) {
  return c.bitwise ? std::memcmp(&a, &b, sizeof a) == 0 : std::fabs(a - b) <= c.eval_tolerance * std::fabs(b);
}

std::string problem_of(const Result<RunEquivalence>& e) {
  if (!e.ok()) return e.status().message();
  const Comparison& c = e->comparison;
  if (!c.problems.empty()) return c.problems.front();
  return c.divergence.empty() ? "" : c.divergence.front().to_string();
}

}  // namespace sp::proof::criterion
