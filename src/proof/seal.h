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

// The optional signature (bundle.sig): Ed25519 over the bytes of bundle.sha256, so that a third party
// holding the public key can tell a resealed bundle from the original (a seal alone can be recomputed
// by anyone). Keys are PEM files, e.g. `openssl genpkey -algorithm ed25519 -out key.pem` and
// `openssl pkey -in key.pem -pubout -out key.pub`. bundle.sig holds the signature in hex.
Status sign_seal(const std::string& bundle, const std::string& private_key_pem);
Status check_signing_key(const std::string& private_key_pem);  // before a proof starts: the key is usable
Status check_signature(const std::string& bundle, const std::string& public_key_pem);

}  // namespace sp::proof
