// The seal of a proof bundle (bundle.sha256, docs/prove.md): "SHA256  relative/path" for every file
// the protocol wrote, sorted by path, written after the last stage. The derived files (gate.json,
// summary.md, first_divergence.json: evidence::ProofPaths::is_derived) are not sealed; `verify`
// derives them again from the sealed ones.
// Invariant: check_seal reports every file whose bytes differ, that is missing, or that the seal does
// not list; it never reads outside the bundle.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace sp::proof {

Status seal_bundle(const std::string& bundle);
// Files whose bytes differ from the seal, that are missing, or that the seal does not list (one line
// each, naming the file). An unreadable or malformed seal is an error.
Result<std::vector<std::string>> check_seal(const std::string& bundle);

}  // namespace sp::proof
