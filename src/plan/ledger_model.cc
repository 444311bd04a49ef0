// The ledger model's predictions (ledger_model.h) built on the replay of a rank's memory events
// (ledger_replay.h): step by step, or to the steady state and then in closed form; the parameter server's
// ledger; and a run's measured ledger against its prediction.
#include "plan/ledger_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <tuple>

#include "core/check.h"
#include "model/weights.h"
#include "plan/ledger_replay.h"

namespace sp::plan {
namespace {

using ledger_detail::kF;
using ledger_detail::Replay;

// A step sequence whose allocation state still changes after this many steps is a policy the model
// does not describe (today the state repeats after the first step, or the second under ZeRO-2/3).
constexpr int64_t kMaxTransientSteps = 16;

bool eval_after(const LedgerModelInput& in, int64_t s) {
  return (in.eval_every > 0 && (s + 1) % in.eval_every == 0) || s + 1 == in.steps;
}

// Steps s in [from, steps) followed by an evaluation.
int64_t evals_in(const LedgerModelInput& in, int64_t from) {
  if (from >= in.steps) return 0;
  const int64_t periodic = in.eval_every > 0 ? in.steps / in.eval_every - from / in.eval_every : 0;
  const bool last_is_periodic = in.eval_every > 0 && in.steps % in.eval_every == 0;
  return periodic + (last_is_periodic ? 0 : 1);
}

}  // namespace

LedgerPrediction predict_ps_server_ledger(const LedgerModelInput& in) {
  // Construction order of PsServerUpdate: per piece param and grad, the staging, then AdamW's moments.
  LedgerPrediction p;
  auto alloc = [&](const std::string& name, Category c, int64_t floats) {
    for (MemoryLedger::Bytes* x : {&p.total, &p.by_category[static_cast<size_t>(c)]}) {
      x->live += floats * kF;
      x->peak = std::max(x->peak, x->live);
    }
    MemoryLedger::Entry& e = p.entries[name];
    e.category = c;
    e.live += floats * kF;
    e.peak = std::max(e.peak, e.live);
    ++e.allocations;
  };
  int64_t most = 0;
  for (const auto& piece : in.ps_server_pieces) {
    const std::string unit = model::unit_name(in.model, piece.unit);
    alloc("param." + unit + ".ps", Category::kParam, piece.size);
    alloc("grad." + unit + ".ps", Category::kGrad, piece.size);
    most = std::max(most, piece.size);
  }
  alloc("comm.ps_push", Category::kComm, most * in.ps_workers);
  for (const auto& piece : in.ps_server_pieces) {
    const std::string unit = model::unit_name(in.model, piece.unit);
    alloc("optim.exp_avg." + unit, Category::kOptim, piece.size);
    alloc("optim.exp_avg_sq." + unit, Category::kOptim, piece.size);
  }
  return p;
}

LedgerPrediction predict_ledger_step_by_step(const LedgerModelInput& in) {
  if (!in.ps_server_pieces.empty()) return predict_ps_server_ledger(in);
  Replay r(in);
  r.evaluation();
  for (int64_t s = 0; s < in.steps; ++s) r.step(eval_after(in, s));
  return r.result();
}

LedgerPrediction predict_ledger(const LedgerModelInput& in) {
  if (!in.ps_server_pieces.empty()) return predict_ps_server_ledger(in);
  Replay r(in);
  r.evaluation();  // before training
  for (int64_t s = 0; s < in.steps; ++s) {
    // Steady state: once neither kind of step (with or without an evaluation after it) changes any
    // live byte, peak, pool, gather or buffer, every later step only repeats its allocation counts.
    Replay plain = r, evaluated = r;
    plain.step(false);
    evaluated.step(true);
    if (plain.same_state(r) && evaluated.same_state(r)) {
      const int64_t evals = evals_in(in, s), plains = in.steps - s - evals;
      LedgerPrediction out = r.result();
      for (auto& [name, e] : out.entries)
        e.allocations +=
            plains * (plain.allocations(name) - e.allocations) + evals * (evaluated.allocations(name) - e.allocations);
      return out;
    }
    SP_CHECK(s < kMaxTransientSteps, "ledger model: the allocation state still changes after {} steps", s);
    r.step(eval_after(in, s));
  }
  return r.result();
}

nlohmann::json compare_ledger(const MemoryLedger& measured, const LedgerPrediction& predicted) {
  bool all_equal = true;
  auto row = [&](const MemoryLedger::Bytes& got, const MemoryLedger::Bytes& want) {
    const bool eq = got.peak == want.peak && got.live == want.live;
    all_equal = all_equal && eq;
    return nlohmann::json{{"measured_live", got.live},
                          {"measured_peak", got.peak},
                          {"predicted_live", want.live},
                          {"predicted_peak", want.peak},
                          {"equal", eq}};
  };
  nlohmann::json j;
  j["total"] = row(measured.total(), predicted.total);
  for (size_t c = 0; c < kCategoryCount; ++c)
    j["categories"][std::string(category_name(static_cast<Category>(c)))] =
        row(measured.category(static_cast<Category>(c)), predicted.by_category[c]);
  std::map<std::string, std::pair<MemoryLedger::Entry, MemoryLedger::Entry>> names;
  for (const auto& [n, e] : measured.entries()) names[n].first = e;
  for (const auto& [n, e] : predicted.entries) names[n].second = e;
  for (const auto& [n, pr] : names) {
    const auto& [got, want] = pr;
    const bool eq = got.peak == want.peak && got.live == want.live && got.allocations == want.allocations &&
                    got.category == want.category;
    all_equal = all_equal && eq;
    j["tensors"][n] = {
        {"category", category_name(eq ? got.category : (got.allocations ? got.category : want.category))},
        {"measured_peak", got.peak},
        {"predicted_peak", want.peak},
        {"measured_live", got.live},
        {"predicted_live", want.live},
        {"allocations", got.allocations},
        {"predicted_allocations", want.allocations},
        {"equal", eq}};
  }
  j["equal"] = all_equal;
  return j;
}

}  // namespace sp::plan
