#include "comm/process_grid.h"

#include <algorithm>

#include "core/check.h"

namespace sp::comm {

std::string_view axis_name(Axis axis) {
  switch (axis) {
    case Axis::kDp:
      return "dp";
    case Axis::kTp:
      return "tp";
    case Axis::kPp:
      return "pp";
  }
  return "?";
}

std::optional<Axis> axis_from_name(std::string_view name) {
  for (Axis a : kAllAxes)
    if (axis_name(a) == name) return a;
  return std::nullopt;
}

int Coords::operator[](Axis axis) const {
  switch (axis) {
    case Axis::kDp:
      return dp;
    case Axis::kTp:
      return tp;
    case Axis::kPp:
      return pp;
  }
  return -1;
}

int& Coords::operator[](Axis axis) {
  switch (axis) {
    case Axis::kDp:
      return dp;
    case Axis::kTp:
      return tp;
    case Axis::kPp:
      break;
  }
  return pp;
}

std::string Coords::to_string() const { return fmt::format("dp{}.tp{}.pp{}", dp, tp, pp); }

Result<std::array<Axis, 3>> parse_axis_order(std::string_view order) {
  std::array<Axis, 3> out{};
  std::array<bool, 3> seen{};
  std::string_view rest = order;
  for (int i = 0; i < 3; ++i) {
    const size_t dash = rest.find('-');
    const std::string_view token = i < 2 ? rest.substr(0, dash) : rest;
    const std::optional<Axis> axis = axis_from_name(token);
    if (!axis || (i < 2 && dash == std::string_view::npos) || seen[static_cast<int>(*axis)]) {
      return invalid_argument("axis order '{}' is not a permutation of dp, tp, pp", order)
          .with_hint("write the three axes fastest-varying first, separated by '-', e.g. 'tp-dp-pp'");
    }
    seen[static_cast<int>(*axis)] = true;
    out[i] = *axis;
    if (i < 2) rest = rest.substr(dash + 1);
  }
  return out;
}

Result<ProcessGrid> ProcessGrid::create(int dp, int tp, int pp, std::string_view order, int world) {
  const std::array<int, 3> size = {dp, tp, pp};
  for (Axis a : kAllAxes) {
    if (size[static_cast<int>(a)] < 1)
      return invalid_argument("{} size {} must be at least 1", axis_name(a), size[static_cast<int>(a)]);
  }
  using AxisOrder = std::array<Axis, 3>;
  SP_ASSIGN_OR_RETURN(const AxisOrder axes, parse_axis_order(order));
  const int64_t product = int64_t{dp} * tp * pp;
  if (product != world) {
    return invalid_argument("world size {} ≠ dp {} × tp {} × pp {} = {}", world, dp, tp, pp, product)
        .with_hint(
            fmt::format("launch with mpirun -np {} or change dp/tp/pp so that their product is {}", product, world));
  }
  return ProcessGrid(size, axes);
}

std::string ProcessGrid::order_string() const {
  return fmt::format("{}-{}-{}", axis_name(order_[0]), axis_name(order_[1]), axis_name(order_[2]));
}

Coords ProcessGrid::coords_of(int rank) const {
  SP_CHECK(rank >= 0 && rank < world_size(), "rank {} is outside the grid {}", rank, describe());
  Coords c;
  int rest = rank;
  for (Axis a : order_) {
    c[a] = rest % size(a);
    rest /= size(a);
  }
  return c;
}

int ProcessGrid::rank_of(const Coords& c) const {
  for (Axis a : kAllAxes) {
    SP_CHECK(c[a] >= 0 && c[a] < size(a), "coordinates {} are outside the grid {}", c.to_string(), describe());
  }
  // Horner's rule from the slowest axis: rank = c[a0] + s[a0]·(c[a1] + s[a1]·c[a2]).
  int rank = 0;
  for (int i = 2; i >= 0; --i) rank = rank * size(order_[i]) + c[order_[i]];
  return rank;
}

std::vector<int> ProcessGrid::group_of(Axis axis, int rank) const {
  Coords c = coords_of(rank);
  std::vector<int> group(static_cast<size_t>(size(axis)));
  for (int i = 0; i < size(axis); ++i) {
    c[axis] = i;
    group[static_cast<size_t>(i)] = rank_of(c);
  }
  return group;
}

std::vector<std::vector<int>> ProcessGrid::all_groups(Axis axis) const {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < world_size(); ++r)
    if (coords_of(r)[axis] == 0) groups.push_back(group_of(axis, r));
  // Ranks with axis coordinate 0 are visited in increasing order, so groups are sorted by first rank.
  return groups;
}

std::string ProcessGrid::group_name(Axis axis, int rank) const {
  const Coords c = coords_of(rank);
  std::string fixed;
  for (Axis a : kAllAxes) {
    if (a == axis) continue;
    if (!fixed.empty()) fixed += '.';
    fixed += fmt::format("{}{}", axis_name(a), c[a]);
  }
  return fmt::format("{}[{}]", axis_name(axis), fixed);
}

std::string ProcessGrid::describe() const {
  return fmt::format("dp {} × tp {} × pp {} = {} (order {})", dp_size(), tp_size(), pp_size(), world_size(),
                     order_string());
}

}  // namespace sp::comm
