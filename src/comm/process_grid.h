// ProcessGrid: the (dp, tp, pp) rank grid as pure arithmetic: no MPI, no state beyond the sizes.
// It is not a communicator; comm/mpi_communicator.h builds the per-axis communicators from it.
// Invariant: rank ↔ coords is a bijection on [0, world); with the default order "tp-dp-pp"
// (fastest axis first, as Megatron places tp peers on adjacent ranks)
//     rank = tp_rank + tp · (dp_rank + dp · pp_rank)
// and in general, for an order "a0-a1-a2": rank = c[a0] + s[a0] · (c[a1] + s[a1] · c[a2]).
// Reference: docs/comm.md §1 (grid equation, group naming); docs/formats/topology.md.
//
// Worked example, dp 2 × tp 2 × pp 2 = 8, order tp-dp-pp:
//   rank  0 dp0.tp0.pp0   rank 1 dp0.tp1.pp0   rank 2 dp1.tp0.pp0   rank 3 dp1.tp1.pp0
//   rank  4 dp0.tp0.pp1   rank 5 dp0.tp1.pp1   rank 6 dp1.tp0.pp1   rank 7 dp1.tp1.pp1
//   tp groups: tp[dp0.pp0] = [0, 1]  tp[dp1.pp0] = [2, 3]  tp[dp0.pp1] = [4, 5]  tp[dp1.pp1] = [6, 7]
//   dp groups: dp[tp0.pp0] = [0, 2]  dp[tp1.pp0] = [1, 3]  dp[tp0.pp1] = [4, 6]  dp[tp1.pp1] = [5, 7]
//   pp groups: pp[dp0.tp0] = [0, 4]  pp[dp0.tp1] = [1, 5]  pp[dp1.tp0] = [2, 6]  pp[dp1.tp1] = [3, 7]
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::comm {

enum class Axis { kDp = 0, kTp = 1, kPp = 2 };
inline constexpr std::array<Axis, 3> kAllAxes = {Axis::kDp, Axis::kTp, Axis::kPp};

std::string_view axis_name(Axis axis);  // "dp", "tp", "pp"
std::optional<Axis> axis_from_name(std::string_view name);

// A rank's position on the grid; each coordinate is in [0, size of its axis).
struct Coords {
  int dp = 0;
  int tp = 0;
  int pp = 0;

  int operator[](Axis axis) const;
  int& operator[](Axis axis);
  bool operator==(const Coords&) const = default;
  std::string to_string() const;  // "dp1.tp0.pp1"
};

class ProcessGrid {
 public:
  static constexpr std::string_view kDefaultOrder = "tp-dp-pp";

  // Errors (kInvalidArgument): a size < 1; `order` not a permutation of dp, tp, pp written as
  // "a-b-c" (fastest first); world ≠ dp·tp·pp, with the full equation in the message.
  static Result<ProcessGrid> create(int dp, int tp, int pp, std::string_view order, int world);

  int dp_size() const { return size_[0]; }
  int tp_size() const { return size_[1]; }
  int pp_size() const { return size_[2]; }
  int size(Axis axis) const { return size_[static_cast<int>(axis)]; }
  int world_size() const { return size_[0] * size_[1] * size_[2]; }
  // Fastest-varying axis first.
  const std::array<Axis, 3>& order() const { return order_; }
  std::string order_string() const;  // "tp-dp-pp"

  // SP_CHECK on out-of-range arguments: callers index the grid with ranks it produced.
  Coords coords_of(int rank) const;
  int rank_of(const Coords& coords) const;
  // The world ranks that share every coordinate of `rank` except `axis`, in axis-rank order;
  // `rank`'s own position in the result is coords_of(rank)[axis].
  std::vector<int> group_of(Axis axis, int rank) const;
  // Every group on `axis`, each in axis-rank order; the groups are ordered by their first rank.
  // Together they partition [0, world).
  std::vector<std::vector<int>> all_groups(Axis axis) const;
  // "dp[tp0.pp1]": the axis, then the other coordinates (in dp, tp, pp order) that fix the group.
  std::string group_name(Axis axis, int rank) const;
  // "dp 2 × tp 2 × pp 2 = 8 (order tp-dp-pp)".
  std::string describe() const;

 private:
  ProcessGrid(std::array<int, 3> size, std::array<Axis, 3> order) : size_(size), order_(order) {}
  std::array<int, 3> size_;    // indexed by Axis
  std::array<Axis, 3> order_;  // fastest first
};

// Parses "tp-dp-pp" into axes, fastest first; errors name the string and the expected form.
Result<std::array<Axis, 3>> parse_axis_order(std::string_view order);

}  // namespace sp::comm
