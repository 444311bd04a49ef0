// The parameter server's key space (docs/ps.md): every unit's flat buffer (tp = 1) laid end to end in
// unit-id order; server j owns the contiguous keys RoleMap::key_range(keys, j), i.e. a few pieces of
// units. Pure arithmetic, shared by the engine's servers and workers (parallel/parameter_server.h) and
// by the plan's ledger and traffic models, so both split the keys the same way.
// Invariant: the servers' pieces cover every element of every unit exactly once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "comm/roles.h"
#include "model/weights.h"

namespace sp::plan {

// A unit-local range [begin, end) of the flat key space.
struct PsPiece {
  const model::UnitLayout* unit = nullptr;
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class PsKeySpace {
 public:
  // units: every unit of the model (tp = 1), in unit-id order.
  PsKeySpace(std::vector<const model::UnitLayout*> units, const comm::RoleMap& roles);
  int64_t keys() const { return keys_; }
  // Server j's pieces in key order.
  std::vector<PsPiece> pieces(int j) const;
  // Every (server, piece) overlapping unit `u`, in server order.
  std::vector<std::pair<int, PsPiece>> pieces_of_unit(const model::UnitLayout* u) const;
  const std::vector<const model::UnitLayout*>& units() const { return units_; }

 private:
  std::vector<const model::UnitLayout*> units_;
  std::vector<int64_t> offsets_;  // of each unit in the key space
  comm::RoleMap roles_;
  int64_t keys_ = 0;
};

// Every unit of the model as a parameter server lays them out (tp = 1), in unit-id order.
std::vector<model::UnitLayout> ps_unit_layouts(const model::LlamaConfig& config);
}  // namespace sp::plan
