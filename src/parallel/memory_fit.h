// Memory fit: before the engine allocates anything, the ledger model's predicted peak of every rank
// (plan/ledger_model.h: the bytes the engine will allocate, exactly) is summed per host and
// compared with what the host has available, so a model too big for the machine is refused with both
// numbers instead of dying in an allocation. Not a measurement (the ledger compares with the run's
// own at the end) and not the cluster planner (plan/). It counts only what the ledger accounts for:
// the process itself (binary, MPI, data) needs some more, which is why it is a refusal of what cannot
// fit, not a promise that the rest will. Collective over the world communicator; every rank returns
// the same Status. Reference: docs/memory.md §"Does it fit".
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "core/status.h"
#include "plan/ledger_model.h"
#include "plan/run_plan.h"

namespace sp::parallel {

// Refuses (invalid_argument, exit 2) when the predicted peaks of the ranks sharing this host exceed
// its available memory (MemAvailable), naming the host, both numbers and the ranks.
Status check_memory_fit(const plan::RunPlan& plan, const comm::ProcessGrid& grid, comm::Communicator& world);

}  // namespace sp::parallel
