#include "data/sources.h"

#include <filesystem>
#include <set>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_io.h"

namespace sp::data {
namespace {

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

bool valid_sha(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Result<SourcesFile> load_sources(const std::string& path) {
  auto bytes = read_file(path, uint64_t{16} << 20);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound)
      return not_found("sources file '{}' does not exist", path)
          .with_hint("pass --sources data/sources.json (the bundled corpus) or a file in that format");
    return bytes.status();
  }
  if (bytes->find_first_not_of(" \t\r\n") == std::string::npos)
    return invalid_argument("sources file '{}' is empty", path)
        .with_hint("it must be a JSON object with a non-empty \"sources\" array (docs/formats/lineage.md)");
  // Strict (core/json_io.h): a half-written file is named with the line and column where it breaks off.
  auto parsed = parse_json_strict(*bytes, path);
  if (!parsed.ok())
    return invalid_argument("sources file {}", parsed.status().message())
        .with_hint("it must be one complete JSON object with a \"sources\" array (docs/formats/lineage.md)");
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return invalid_argument("sources file '{}' is not a JSON object", path);
  if (j.value("format", "") != "shardproof-sources")
    return invalid_argument("sources file '{}': key 'format' must be \"shardproof-sources\"", path);
  if (!j.contains("version") || j["version"] != 1)
    return invalid_argument("sources file '{}': key 'version' must be 1", path);
  if (!j.contains("sources") || !j["sources"].is_array() || j["sources"].empty())
    return invalid_argument("sources file '{}' lists no sources (key 'sources' must be a non-empty array)", path);

  SourcesFile out;
  out.path = path;
  out.sha256 = sha256_hex(*bytes);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::set<std::string> ids;
  for (size_t i = 0; i < j["sources"].size(); ++i) {
    const auto& s = j["sources"][i];
    auto bad = [&](std::string_view key, std::string_view want) {
      return invalid_argument("sources file '{}': source {}: key '{}' must be {}", path, i, key, want);
    };
    if (!s.is_object()) return bad("(entry)", "an object");
    SourceSpec spec;
    for (const char* key : {"id", "path", "language", "licence"})
      if (!s.contains(key) || !s[key].is_string() || s[key].get<std::string>().empty())
        return bad(key, "a non-empty string");
    spec.id = s["id"].get<std::string>();
    if (!valid_id(spec.id)) return bad("id", "[a-z0-9._-]{1,64}");
    if (!ids.insert(spec.id).second)
      return invalid_argument("sources file '{}': source {}: id '{}' is used twice", path, i, spec.id);
    spec.path = s["path"].get<std::string>();
    spec.resolved_path = std::filesystem::path(spec.path).is_absolute() ? spec.path : (dir / spec.path).string();
    spec.language = s["language"].get<std::string>();
    spec.licence = s["licence"].get<std::string>();
    if (s.contains("licence_file")) {
      if (!s["licence_file"].is_string()) return bad("licence_file", "a string");
      spec.licence_file = s["licence_file"].get<std::string>();
    }
    if (s.contains("sha256")) {
      if (!s["sha256"].is_string() || !valid_sha(s["sha256"].get<std::string>()))
        return bad("sha256", "64 lower-case hex digits");
      spec.sha256 = s["sha256"].get<std::string>();
    }
    const std::string format = s.value("format", "percent_separated");
    if (format == "percent_separated")
      spec.format = DocFormat::kPercentSeparated;
    else if (format == "whole_file")
      spec.format = DocFormat::kWholeFile;
    else
      return bad("format", "\"percent_separated\" or \"whole_file\"");
    if (s.contains("planted")) {
      if (!s["planted"].is_boolean()) return bad("planted", "true or false");
      spec.planted = s["planted"].get<bool>();
    }
    if (s.contains("origin")) spec.origin = nlohmann::ordered_json::parse(s["origin"].dump());
    out.sources.push_back(std::move(spec));
  }
  return out;
}

std::vector<DocSpan> split_documents(std::string_view file, DocFormat format) {
  std::vector<DocSpan> docs;
  auto add = [&](size_t b, size_t e) {
    if (e > b) docs.push_back({static_cast<int64_t>(b), static_cast<int64_t>(e - b)});
  };
  if (format == DocFormat::kWholeFile) {
    add(0, file.size());
    return docs;
  }
  size_t doc_begin = 0, line = 0;
  while (line <= file.size()) {
    size_t nl = file.find('\n', line);
    const size_t line_end = nl == std::string_view::npos ? file.size() : nl;
    const std::string_view text = file.substr(line, line_end - line);
    if (text == "%" || text == "%\r") {
      add(doc_begin, line == 0 ? 0 : line - 1);  // without the newline before the separator
      doc_begin = nl == std::string_view::npos ? file.size() : nl + 1;
    }
    if (nl == std::string_view::npos) break;
    line = nl + 1;
  }
  size_t end = file.size();
  if (end > doc_begin && file[end - 1] == '\n') --end;  // the file's final newline
  add(doc_begin, end);
  return docs;
}

}  // namespace sp::data
