#include "proof/seal.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

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
      if (r != evidence::kSealFile && !ProofPaths::is_derived(r)) files.push_back(r);
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
    if (!h.ok()) bad.push_back(fmt::format("{}: missing", file));
    else if (*h != line.substr(0, 64)) bad.push_back(fmt::format("{}: changed since the bundle was sealed", file));
  }
  for (const std::string& f : sealed_files(bundle))
    if (!listed.count(f)) bad.push_back(fmt::format("{}: not in the seal (added later)", f));
  return bad;
}

}  // namespace sp::proof
