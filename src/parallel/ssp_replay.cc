#include "parallel/ssp_replay.h"

#include <cstring>

#include "comm/staleness.h"
#include "core/check.h"

namespace sp::parallel {

SspReplay::SspReplay(std::vector<const model::UnitLayout*> units, ParamStore& newest, int workers, int staleness,
                     MemoryLedger& ledger)
    : newest_(newest), workers_(workers), staleness_(staleness), held_(static_cast<size_t>(workers), 0) {
  SP_CHECK(workers >= 1 && staleness >= 0, "SspReplay({}, {})", workers, staleness);
  SP_CHECK_EQ(newest.zero(), 0, "the replay's newest parameters are a full replica");
  if (staleness_ == 0) return;
  caches_.resize(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w)
    for (const model::UnitLayout* u : units)
      caches_[static_cast<size_t>(w)].units.emplace_back(
          u, Tensor(ledger, "param." + u->name + ".replay" + std::to_string(w), Category::kParam, {u->numel}));
}

ConstBufView SspReplay::Cache::acquire(int unit) {
  for (auto& [u, t] : units)
    if (u->id == unit) return t.view();
  SP_CHECK(false, "the replay cache holds no unit {}", unit);
  __builtin_unreachable();
}

model::ParamSource& SspReplay::replica(int w) {
  SP_CHECK(w >= 0 && w < workers_, "replay worker {} of {}", w, workers_);
  if (caches_.empty()) return newest_;
  return caches_[static_cast<size_t>(w)];
}

void SspReplay::copy_newest(int w) {
  if (caches_.empty()) return;
  Cache& c = caches_[static_cast<size_t>(w)];
  const std::vector<model::UnitPiece> owned = newest_.owned();
  for (size_t i = 0; i < owned.size(); ++i) {
    SP_CHECK(owned[i].unit == c.units[i].first && owned[i].begin == 0, "replay cache {} unit order", w);
    std::memcpy(c.units[i].second.f32(), owned[i].f32(), sizeof(float) * static_cast<size_t>(owned[i].size()));
  }
}

void SspReplay::reset() {
  for (int w = 0; w < workers_; ++w) {
    copy_newest(w);
    held_[static_cast<size_t>(w)] = 0;
  }
}

void SspReplay::after_update(int64_t step) {
  for (int w = 0; w < workers_; ++w)
    if (comm::refreshes_after(step, w, staleness_)) {
      copy_newest(w);
      held_[static_cast<size_t>(w)] = step + 1;
    }
}

void SspReplay::add_to_prediction(plan::LedgerPrediction& p, const std::vector<const model::UnitLayout*>& units,
                                  int workers, int staleness) {
  if (staleness == 0) return;
  const auto param = static_cast<size_t>(Category::kParam);
  for (int w = 0; w < workers; ++w)
    for (const model::UnitLayout* u : units) {
      const int64_t bytes = 4 * u->numel;
      MemoryLedger::Entry& e = p.entries["param." + u->name + ".replay" + std::to_string(w)];
      e.category = Category::kParam;
      e.live += bytes;
      e.peak += bytes;
      e.allocations += 1;
      p.by_category[param].live += bytes;
      p.by_category[param].peak += bytes;
      p.total.live += bytes;
      p.total.peak += bytes;
    }
}

}  // namespace sp::parallel
