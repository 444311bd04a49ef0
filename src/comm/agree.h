// Agreement on expected failures: every rank returns the same Status, so a bad file seen by one
// rank stops all of them with one message instead of leaving peers blocked in a collective.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "core/status.h"

namespace sp::comm {

// Collective: if any rank's `local` is an error, every rank returns the error of the lowest such
// rank (message prefixed with "rank R: " when it was not rank 0); otherwise ok.
Status agree(Communicator& comm, const Status& local);
// Collective: every rank returns group rank 0's `value`.
std::string broadcast_string(Communicator& comm, const std::string& value);

}  // namespace sp::comm
