// The sources file (data/sources.json): which corpus files `data prepare` reads, with their
// origin, licence, declared language and SHA-256, and how each file is cut into documents.
// Not the pipeline (prepare.h). Invariant: a listed file whose SHA-256 differs from the recorded
// one is refused, so lineage always describes the bytes actually read.
// Format: docs/formats/lineage.md, "sources.json".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::data {

enum class DocFormat {
  kPercentSeparated,  // documents separated by a line holding only "%" (fortune(6) files)
  kWholeFile,         // the whole file is one document
};

struct SourceSpec {
  std::string id;             // [a-z0-9._-]+, unique in the file
  std::string path;           // as written (relative to the sources file's folder, or absolute)
  std::string resolved_path;  // the path opened
  std::string sha256;         // recorded SHA-256, lower-case hex; empty = not recorded
  std::string language;       // declared language (BCP 47), e.g. "en", "zh"
  std::string licence;        // SPDX identifier or LicenseRef-*
  std::string licence_file;   // where the licence text is (relative to the sources file), optional
  DocFormat format = DocFormat::kPercentSeparated;
  bool planted = false;           // synthetic test material, not real text
  nlohmann::ordered_json origin;  // free-form provenance (package, version, path inside it)
};

struct SourcesFile {
  std::string path;
  std::string sha256;  // of the sources file bytes
  std::vector<SourceSpec> sources;
};

// Reads and validates the sources file; errors name the file, the source index and the key.
Result<SourcesFile> load_sources(const std::string& path);

struct DocSpan {
  int64_t offset = 0;  // byte offset in the corpus file
  int64_t size = 0;    // bytes
};
// Cuts a corpus file into documents. "%" separator lines (also "%\r") are not part of any
// document; nor is the newline before a separator. Empty documents are dropped.
std::vector<DocSpan> split_documents(std::string_view file, DocFormat format);

}  // namespace sp::data
