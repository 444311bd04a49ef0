#include "ckpt/load.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ckpt/format.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_io.h"
#include "core/threads.h"

namespace sp::ckpt {

Result<Latest> read_latest(const CheckpointPaths& paths) {
  const std::string path = paths.latest();
  auto text = read_file(path, kMaxLatestBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kCorrupt)
      return corrupt("'{}' is larger than the {} bytes LATEST may have", path, kMaxLatestBytes);
    return text.status();
  }
  return Latest::parse(*text, path);
}

Result<Manifest> read_manifest(const CheckpointPaths& paths, int64_t step) {
  const std::string path = CheckpointPaths::manifest_in(paths.step_dir(step));
  auto text = read_file(path, kMaxManifestBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound && !path_exists(paths.step_dir(step)))
      return not_found("checkpoint step {}: its directory '{}' does not exist", step, paths.step_dir(step))
          .with_hint("it was moved or deleted after its commit; an older committed checkpoint may still be usable");
    if (text.status().code() == StatusCode::kNotFound)
      return not_found("checkpoint '{}' has no {}", paths.step_dir(step), kManifestFile)
          .with_hint(std::string(kOlderCheckpointHint));
    return text.status();
  }
  SP_ASSIGN_OR_RETURN(Manifest m, Manifest::parse(*text, path));
  if (m.step != step)
    return corrupt("'{}' describes step {}, but it is in the directory of step {}", path, m.step, step);
  return m;
}

std::string locate_shard_damage(const std::string& shard_path) {
  auto reader = SafetensorsReader::open(shard_path);
  if (!reader.ok()) return "its header is damaged: " + reader.status().message();
  const auto& meta = reader->metadata();
  const auto it = meta.find(std::string(kMetaFragments));
  if (it == meta.end()) return "its header lost the fragment list";
  auto list = parse_json_strict(it->second, shard_path, 3);
  if (!list.ok() || !list->is_array()) return "its fragment list is damaged";
  std::vector<float> buf;
  for (const nlohmann::json& f : *list) {
    if (!f.is_object() || !f.contains("name") || !f.contains("xxh3") || !f["name"].is_string() ||
        !f["xxh3"].is_string())
      return "its fragment list is damaged";
    const std::string name = f["name"].get<std::string>();
    const SafetensorsEntry* e = reader->find(name);
    if (e == nullptr) return fmt::format("its fragment list names {:?}, which is not stored", name);
    std::string bytes(e->nbytes(), '\0');
    if (!reader->read(*e, bytes.data()).ok()) return fmt::format("tensor {:?} cannot be read", name);
    const std::string got = fmt::format("{:016x}", xxh3_64(bytes.data(), bytes.size()));
    if (got != f["xxh3"].get<std::string>())
      return fmt::format("the damage is in tensor {:?} ({} of {:?}, file bytes {}..{})", name,
                         f.value("kind", std::string("?")), f.value("tensor", std::string("?")),
                         reader->data_offset() + e->begin, reader->data_offset() + e->end);
  }
  return "the damage is in the header (every tensor still matches its recorded XXH3)";
}

Status verify_shard_files(const std::string& step_dir, const Manifest& manifest, int offset, int stride) {
  for (const ShardRecord& rec : manifest.shards) {
    if (rec.rank % stride != offset) continue;
    const std::string path = CheckpointPaths::shard_in(step_dir, rec.rank);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT)
        return not_found("checkpoint shard '{}' (rank {} of {}) is missing", path, rec.rank, manifest.shards.size())
            .with_hint(std::string(kOlderCheckpointHint));
      return io_error("cannot stat checkpoint shard '{}': {}", path, std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) return corrupt("checkpoint shard '{}' is not a regular file", path);
    if (static_cast<uint64_t>(st.st_size) != rec.bytes)
      return corrupt("checkpoint shard '{}' is {} bytes, the manifest says {} ({})", path, st.st_size, rec.bytes,
                     static_cast<uint64_t>(st.st_size) < rec.bytes ? "truncated" : "longer than written")
          .with_hint(std::string(kDamagedCheckpointHint));
    // The chunk digests cover every byte as the whole-file one does, and verify on every core.
    SP_ASSIGN_OR_RETURN(const std::vector<std::string> chunks, sha256_file_chunks(path, kShaChunkBytes, usable_cpus()));
    SP_CHECK_EQ(chunks.size(), rec.sha256_chunks.size(), "chunk digests of '{}' (size checked above)", path);
    for (size_t c = 0; c < chunks.size(); ++c)
      if (chunks[c] != rec.sha256_chunks[c])
        return corrupt(
                   "checkpoint shard '{}' fails its SHA-256 check: bytes {}..{} (chunk {} of {}) have SHA-256 {}, "
                   "the manifest says {}: {}",
                   path, c * kShaChunkBytes, std::min<uint64_t>(rec.bytes, (c + 1) * kShaChunkBytes), c, chunks.size(),
                   chunks[c], rec.sha256_chunks[c], locate_shard_damage(path))
            .with_hint(std::string(kDamagedCheckpointHint));
  }
  return Status();
}

Result<Candidates> find_candidates(const CheckpointPaths& paths, bool fallback_previous) {
  SP_ASSIGN_OR_RETURN(CheckpointListing listing, list_checkpoints(paths));
  Candidates c;
  c.any_step_dirs = !listing.steps.empty();
  auto latest =
      listing.has_latest ? read_latest(paths) : Result<Latest>(not_found("'{}' does not exist", paths.latest()));
  std::vector<int64_t> older;  // candidates after LATEST's step, newest first
  if (latest.ok()) {
    c.latest = *latest;
    c.steps.push_back(latest->step);
    for (auto it = listing.steps.rbegin(); it != listing.steps.rend(); ++it) {
      if (*it > latest->step) c.uncommitted.push_back(*it);
      if (*it < latest->step) older.push_back(*it);
    }
  } else {
    c.latest_status = latest.status();
    // Without a readable LATEST nothing is known to be committed: every step directory is only a
    // candidate for --fallback-previous, which verifies each completely before using it.
    for (auto it = listing.steps.rbegin(); it != listing.steps.rend(); ++it) older.push_back(*it);
    c.uncommitted = older;
  }
  if (fallback_previous) c.steps.insert(c.steps.end(), older.begin(), older.end());
  return c;
}

Status verify_checkpoint(const CheckpointPaths& paths, int64_t step) {
  SP_ASSIGN_OR_RETURN(Manifest m, read_manifest(paths, step));
  auto latest = read_latest(paths);
  if (latest.ok() && latest->step == step && latest->manifest_digest != m.digest)
    return corrupt("'{}' names manifest digest {} for step {}, but '{}' has digest {}", paths.latest(),
                   latest->manifest_digest, step, CheckpointPaths::manifest_in(paths.step_dir(step)), m.digest);
  SP_RETURN_IF_ERROR(verify_shard_files(paths.step_dir(step), m));
  // The whole-file digests too (what `sha256sum` checks): the chunks matched, so only a manifest
  // written inconsistently can fail here.
  for (const ShardRecord& rec : m.shards) {
    const std::string path = CheckpointPaths::shard_in(paths.step_dir(step), rec.rank);
    SP_ASSIGN_OR_RETURN(const std::string sha, sha256_file(path));
    if (sha != rec.sha256)
      return corrupt("checkpoint shard '{}' has SHA-256 {}, the manifest says {} (while every chunk digest matches)",
                     path, sha, rec.sha256);
  }
  SP_ASSIGN_OR_RETURN(const model::LlamaConfig config, m.model_config());
  SP_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::open(paths.step_dir(step), m, config));
  return source.check_coverage();
}

}  // namespace sp::ckpt
