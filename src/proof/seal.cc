#include "proof/seal.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

#include "core/file_io.h"
#include "core/hash.h"
#include "evidence/bundle_paths.h"

namespace sp::proof {
namespace fs = std::filesystem;
using evidence::ProofPaths;

namespace {

// Every regular file of the bundle that the seal covers, relative to it.
std::vector<std::string> sealed_files(const std::string& bundle) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(bundle))
    if (e.is_regular_file()) {
      const std::string r = fs::relative(e.path(), bundle).string();
      if (r != evidence::kSealFile && r != evidence::kSignatureFile && !ProofPaths::is_derived(r)) files.push_back(r);
    }
  std::sort(files.begin(), files.end());
  return files;
}

// A path from the seal: relative, inside the bundle.
bool inside(const std::string& relative) {
  const fs::path p(relative);
  if (relative.empty() || p.is_absolute()) return false;
  for (const fs::path& part : p)
    if (part == "..") return false;
  return true;
}

}  // namespace

Status seal_bundle(const std::string& bundle) {
  std::string text;
  for (const std::string& f : sealed_files(bundle)) {
    SP_ASSIGN_OR_RETURN(const std::string h, sha256_file(bundle + "/" + f));
    text += h + "  " + f + "\n";
  }
  return write_file_atomic(ProofPaths(bundle).seal(), text);
}

Result<std::vector<std::string>> check_seal(const std::string& bundle) {
  const std::string seal = ProofPaths(bundle).seal();
  SP_ASSIGN_OR_RETURN(const std::string text, read_file(seal, uint64_t{1} << 28));
  std::vector<std::string> bad;
  std::set<std::string> listed;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    if (line.size() < 67 || line.substr(64, 2) != "  ") return corrupt("{}: malformed line '{}'", seal, line);
    const std::string file = line.substr(66);
    if (!inside(file)) return corrupt("{}: '{}' is not a path inside the bundle", seal, file);
    listed.insert(file);
    auto h = sha256_file(bundle + "/" + file);
    if (!h.ok())
      bad.push_back(fmt::format("{}: missing", file));
    else if (*h != line.substr(0, 64))
      bad.push_back(fmt::format("{}: changed since the bundle was sealed", file));
  }
  for (const std::string& f : sealed_files(bundle))
    if (!listed.count(f)) bad.push_back(fmt::format("{}: not in the seal (added later)", f));
  return bad;
}

namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

Result<Key> read_key(const std::string& path, bool is_private) {
  SP_ASSIGN_OR_RETURN(const std::string pem, read_file(path, uint64_t{1} << 16));
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return internal_error("cannot allocate an OpenSSL buffer");
  Key key(is_private ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)
                     : PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return invalid_argument("'{}' is not an Ed25519 {} key in PEM format", path, is_private ? "private" : "public")
        .with_hint(is_private ? "openssl genpkey -algorithm ed25519 -out key.pem"
                              : "openssl pkey -in key.pem -pubout -out key.pub");
  return key;
}

std::string to_hex(const unsigned char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

}  // namespace

Status check_signing_key(const std::string& private_key_pem) { return read_key(private_key_pem, true).status(); }

Status sign_seal(const std::string& bundle, const std::string& private_key_pem) {
  SP_ASSIGN_OR_RETURN(const Key key, read_key(private_key_pem, true));
  const ProofPaths paths(bundle);
  SP_ASSIGN_OR_RETURN(const std::string seal, read_file(paths.seal(), uint64_t{1} << 28));
  std::unique_ptr<EVP_MD_CTX, MdDeleter> ctx(EVP_MD_CTX_new());
  unsigned char sig[64];
  size_t len = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const unsigned char*>(seal.data()), seal.size()) != 1)
    return internal_error("OpenSSL could not sign '{}' with '{}'", paths.seal(), private_key_pem);
  return write_file_atomic(paths.signature(), to_hex(sig, len) + "\n");
}

Status check_signature(const std::string& bundle, const std::string& public_key_pem) {
  SP_ASSIGN_OR_RETURN(const Key key, read_key(public_key_pem, false));
  const ProofPaths paths(bundle);
  SP_ASSIGN_OR_RETURN(const std::string seal, read_file(paths.seal(), uint64_t{1} << 28));
  auto text = read_file(paths.signature(), 4096);
  if (!text.ok()) return not_found("'{}': the bundle is not signed", paths.signature());
  std::string hex = *text;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  if (hex.size() != 128 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return corrupt("'{}' is not a hex Ed25519 signature (128 hex digits)", paths.signature());
  unsigned char sig[64];
  for (size_t i = 0; i < 64; ++i) sig[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  std::unique_ptr<EVP_MD_CTX, MdDeleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1)
    return internal_error("OpenSSL could not set up the verification");
  if (EVP_DigestVerify(ctx.get(), sig, sizeof sig, reinterpret_cast<const unsigned char*>(seal.data()), seal.size()) !=
      1)
    return corrupt("'{}' is not a signature of '{}' by the key '{}': the seal was changed or signed by another key",
                   paths.signature(), paths.seal(), public_key_pem);
  return Status();
}

}  // namespace sp::proof
