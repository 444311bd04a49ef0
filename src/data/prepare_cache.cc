// prepare_cached: the content-addressed cache of prepared datasets (prepare.h). Concurrency rule:
// a directory appears under cache_root/<key> only through rename(2) of a complete temporary
// directory, so a reader sees nothing or a complete dataset; it is still verified before use.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/prepare.h"
#include "data/sources.h"

namespace sp::data {
namespace {

std::atomic<uint64_t> g_temp_counter{0};

std::string unique_suffix() { return fmt::format("{}-{}-{}", ::getpid(), g_temp_counter.fetch_add(1), now_ns()); }

}  // namespace

Result<std::string> prepare_cache_key(const PrepareOptions& opt) {
  SP_RETURN_IF_ERROR(validate_prepare_options(opt));
  SP_ASSIGN_OR_RETURN(const SourcesFile src, load_sources(opt.sources_file));
  Sha256 h;
  auto add = [&](const std::string& line) { h.update(line.data(), line.size()); };
  add(fmt::format("shardproof-data-cache\npipeline {}\nsources {}\n", kPipelineVersion, src.sha256));
  for (const SourceSpec& s : src.sources) {
    auto sha = sha256_file(s.resolved_path);
    if (!sha.ok()) return sha.status().with_context(fmt::format("source '{}' listed in '{}'", s.id, src.path));
    add(fmt::format("{} {}\n", s.id, *sha));
  }
  add("options " + prepare_options_json(opt).dump() + "\n");
  if (!opt.tokenizer_file.empty()) {  // a user's tokenizer: its bytes decide every token
    auto sha = sha256_file(opt.tokenizer_file);
    if (!sha.ok()) return sha.status().with_context("tokenizer");
    add("tokenizer " + *sha + "\n");
  }
  return h.hex_digest();
}

Result<PrepareSummary> read_prepared_summary(const std::string& dir) {
  SP_ASSIGN_OR_RETURN(const TokenDataset train, TokenDataset::open(dir, Split::kTrain));
  SP_ASSIGN_OR_RETURN(const TokenDataset eval, TokenDataset::open(dir, Split::kEval));
  const std::string lpath = (std::filesystem::path(dir) / "lineage.json").string();
  SP_ASSIGN_OR_RETURN(const std::string text, read_file(lpath, uint64_t{256} << 20));
  const auto lin = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (lin.is_discarded() || !lin.is_object() || !lin.contains("documents") || !lin.contains("contamination"))
    return corrupt("lineage '{}' is not a shardproof-lineage object", lpath);
  PrepareSummary s;
  s.dir = dir;
  s.identity = train.identity();
  s.tokenizer_sha256 = s.identity.tokenizer_sha256;
  const auto& d = lin["documents"];
  s.documents = d.value("documents", int64_t{0});
  s.train_documents = d.value("train", int64_t{0});
  s.eval_documents = d.value("eval", int64_t{0});
  s.dropped_documents = d.value("dropped", int64_t{0});
  s.eval_contaminated = lin["contamination"].value("eval_contaminated", int64_t{0});
  s.train_tokens = train.num_tokens();
  s.eval_tokens = eval.num_tokens();
  return s;
}

Result<PrepareSummary> prepare_cached(const PrepareOptions& opt, const std::string& cache_root) {
  SP_ASSIGN_OR_RETURN(const std::string key, prepare_cache_key(opt));
  namespace fs = std::filesystem;
  const std::string final_dir = (fs::path(cache_root) / key).string();
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    auto hit = read_prepared_summary(final_dir);
    if (hit.ok()) {
      hit->cache_hit = true;
      log_info("data prepare: cache hit '{}'", final_dir);
      return hit;
    }
    // A damaged entry: move it aside atomically (only one process wins the rename), then rebuild.
    log_warn("data prepare: cache entry '{}' failed verification ({}); rebuilding", final_dir, hit.status().message());
    const std::string bad = (fs::path(cache_root) / (".bad-" + key.substr(0, 16) + "-" + unique_suffix())).string();
    if (std::rename(final_dir.c_str(), bad.c_str()) == 0) fs::remove_all(bad, ec);
  }
  SP_RETURN_IF_ERROR(make_directories(cache_root));
  const std::string tmp = (fs::path(cache_root) / (".tmp-" + key.substr(0, 16) + "-" + unique_suffix())).string();
  auto made = prepare(opt, tmp);
  if (!made.ok()) {
    fs::remove_all(tmp, ec);
    return made.status();
  }
  if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    if (err != EEXIST && err != ENOTEMPTY)
      return io_error("cannot rename '{}' to '{}': {}", tmp, final_dir, std::strerror(err));
    // Another process finished first: use its copy (identical bytes by determinism).
    auto theirs = read_prepared_summary(final_dir);
    if (theirs.ok()) theirs->cache_hit = true;
    return theirs;
  }
  SP_RETURN_IF_ERROR(fsync_directory(cache_root));
  made->dir = final_dir;
  return made;
}

}  // namespace sp::data
