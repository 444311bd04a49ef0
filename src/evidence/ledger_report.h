// ledger.json: per rank, measured vs predicted bytes (ledger_model.h) per category, per named tensor
// and in total, plus the memory budget verdict (docs/formats/ledger.md). Rank 0 writes the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace sp::evidence {

// Collective over `world`: group rank 0 receives every rank's document, in rank order (others: empty).
std::vector<nlohmann::json> gather_json(comm::Communicator& world, const nlohmann::json& mine);

// Collective: gathers each rank's comparison (compare_ledger output plus "rank" and "coords") and
// writes DIR/ledger.json on rank 0 with "equal" (all ranks) and the budget verdict. Every rank
// returns the same Status (the write's).
Status write_ledger_report(comm::Communicator& world, const nlohmann::json& mine, double budget_mb,
                           const std::string& out_dir);

}  // namespace sp::evidence
