// Helpers shared by the multi-rank tests: the grids each rank count is tested on, and a run
// directory that every rank agrees on.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "temp_dir.h"

namespace sp::comm::test {

// (dp, tp, pp) grids for a world size: every axis alone, and the mixed grids that fit.
inline std::vector<std::array<int, 3>> grids_for_world(int world) {
  if (world == 2) return {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}};
  if (world == 4) return {{4, 1, 1}, {2, 2, 1}, {1, 2, 2}, {2, 1, 2}};
  return {{world, 1, 1}, {1, world, 1}, {1, 1, world}};
}

inline std::string grid_label(const std::array<int, 3>& g) { return fmt::format("dp{}.tp{}.pp{}", g[0], g[1], g[2]); }

// A fresh directory under the system temp dir (sp::test::temp_path), named by rank 0's pid
// (broadcast), created by rank 0. Collective over `world`.
inline std::string shared_temp_dir(Communicator& world, const std::string& tag) {
  int64_t id = world.rank() == 0 ? static_cast<int64_t>(::getpid()) : 0;
  world.broadcast(&id, 1, DType::kI64, 0);
  const std::string dir = sp::test::temp_path(tag, id).string();
  if (world.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  world.barrier();
  return dir;
}

}  // namespace sp::comm::test
