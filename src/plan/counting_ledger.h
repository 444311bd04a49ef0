// A ledger that only counts (the ledger model's, ledger_replay.h): MemoryLedger's bookkeeping rules — live
// bytes and peaks in total, per category and per name, allocations per name — without memory. Internal to
// plan/; not an API.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "plan/ledger_model.h"

namespace sp::plan::ledger_detail {

struct CountingLedger {
  LedgerPrediction p;
  bool named = true;  // keep per-name entries (LedgerModelInput::named)
  void alloc(const std::string& name, Category c, int64_t bytes) { bump(name, c, bytes, true); }
  void free(const std::string& name, Category c, int64_t bytes) { bump(name, c, -bytes, false); }
  void bump(const std::string& name, Category c, int64_t b, bool count) {
    auto up = [b](MemoryLedger::Bytes& x) {
      x.live += b;
      x.peak = std::max(x.peak, x.live);
    };
    up(p.total);
    up(p.by_category[static_cast<size_t>(c)]);
    if (!named) return;
    auto& e = p.entries[name];
    e.category = c;
    e.live += b;
    e.peak = std::max(e.peak, e.live);
    if (count) ++e.allocations;
  }
};

}  // namespace sp::plan::ledger_detail
