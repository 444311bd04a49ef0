#include "plan/ps_keys.h"

#include <algorithm>

#include "core/check.h"

namespace sp::plan {

std::vector<model::UnitLayout> ps_unit_layouts(const model::LlamaConfig& config) {
  std::vector<model::UnitLayout> out;
  for (int id = 0; id < model::unit_count(config); ++id) out.push_back(model::unit_layout(config, id, 0, 1));
  return out;
}

PsKeySpace::PsKeySpace(std::vector<const model::UnitLayout*> units, const comm::RoleMap& roles)
    : units_(std::move(units)), roles_(roles) {
  SP_CHECK(roles_.parameter_server(), "a parameter-server key space needs servers");
  for (size_t i = 0; i < units_.size(); ++i) {
    SP_CHECK(i == 0 || units_[i]->id > units_[i - 1]->id, "units must be in unit-id order");
    offsets_.push_back(keys_);
    keys_ += units_[i]->numel;
  }
}

std::vector<PsPiece> PsKeySpace::pieces(int j) const {
  const comm::KeyRange k = roles_.key_range(keys_, j);
  std::vector<PsPiece> out;
  for (size_t i = 0; i < units_.size(); ++i) {
    const int64_t lo = std::max(k.begin, offsets_[i]), hi = std::min(k.end, offsets_[i] + units_[i]->numel);
    if (lo < hi) out.push_back({units_[i], lo - offsets_[i], hi - offsets_[i]});
  }
  return out;
}

std::vector<std::pair<int, PsPiece>> PsKeySpace::pieces_of_unit(const model::UnitLayout* u) const {
  std::vector<std::pair<int, PsPiece>> out;
  for (int j = 0; j < roles_.servers(); ++j)
    for (const PsPiece& p : pieces(j))
      if (p.unit->id == u->id) out.emplace_back(j, p);
  return out;
}

}  // namespace sp::plan
