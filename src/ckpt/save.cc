#include "ckpt/save.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "ckpt/format.h"
#include "ckpt/load.h"
#include "ckpt/names.h"
#include "comm/agree.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"

namespace sp::ckpt {
namespace fs = std::filesystem;
namespace {

constexpr std::array<std::string_view, 5> kPhaseNames = {"shard-write", "before-manifest", "before-rename",
                                                         "before-latest", "after-latest"};
constexpr size_t kRecordBytes = 8 + 64;  // shard size (u64, little-endian) + SHA-256 hex

[[noreturn]] void kill_self(SavePhase phase, int64_t step, int rank) {
  std::fprintf(stderr, "shardproof: injected fault: ckpt-kill-%s at step %lld on rank %d: SIGKILL\n",
               std::string(save_phase_name(phase)).c_str(), static_cast<long long>(step), rank);
  std::fflush(stderr);
  ::raise(SIGKILL);
  std::abort();  // not reached
}

void maybe_kill(const SaveRequest& req, SavePhase phase, int rank) {
  if (req.fault && req.fault->kill && req.fault->matches(phase, req.step, rank)) kill_self(phase, req.step, rank);
}

Status remove_tree(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return io_error("cannot remove '{}': {}", dir, ec.message());
  return Status();
}

// Renames `dir` to its ".deleting" name first, so a crash mid-removal never leaves a step directory
// that looks committed but lacks files.
Status delete_checkpoint_dir(const CheckpointPaths& paths, int64_t step) {
  const std::string from = paths.step_dir(step), to = paths.deleting_dir(step);
  SP_RETURN_IF_ERROR(remove_tree(to));
  if (::rename(from.c_str(), to.c_str()) != 0)
    return io_error("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno));
  SP_RETURN_IF_ERROR(fsync_directory(paths.root()));
  return remove_tree(to);
}

// Step 1 (rank 0): clean leftovers of interrupted saves, create the partial directory.
Status prepare(const CheckpointPaths& paths, int64_t step) {
  SP_RETURN_IF_ERROR(make_directories(paths.root()));
  SP_ASSIGN_OR_RETURN(CheckpointListing listing, list_checkpoints(paths));
  for (const std::string& name : listing.leftovers) {
    log_info("checkpoint: removing '{}' left by an interrupted save", paths.entry(name));
    SP_RETURN_IF_ERROR(remove_tree(paths.entry(name)));
  }
  SP_RETURN_IF_ERROR(make_directories(paths.partial_dir(step)));
  return fsync_directory(paths.root());
}

// Step 2 (every rank): the shard file, or an injected fault in its place.
Status write_shard(const ShardImage& img, const std::string& path, const SaveRequest& req, int rank) {
  const bool kill = req.fault && req.fault->kill && req.fault->matches(SavePhase::kShardWrite, req.step, rank);
  const bool fail = req.fault && !req.fault->kill && req.fault->matches(SavePhase::kShardWrite, req.step, rank);
  if (kill || fail) {
    const std::string bytes = img.writer.to_bytes();
    SP_RETURN_IF_ERROR(write_file(path, std::string_view(bytes).substr(0, bytes.size() / 2)));  // torn
    if (kill) kill_self(SavePhase::kShardWrite, req.step, rank);
    ::unlink(path.c_str());  // what SafetensorsWriter::write does after a failed write
    return io_error("cannot write safetensors file '{}': {} (injected fault ckpt-enospc)", path, std::strerror(ENOSPC));
  }
  return img.writer.write(path);
}

// Step 3 (rank 0): manifest, rename, LATEST, retention.
Status commit(const CheckpointPaths& paths, const SaveRequest& req, const std::vector<ShardRecord>& records,
              SaveOutcome& out) {
  const std::string partial = paths.partial_dir(req.step), final_dir = paths.step_dir(req.step);
  SP_RETURN_IF_ERROR(fsync_directory(partial));
  for (const ShardRecord& r : records) {  // every shard visible here with the size its writer reported
    const std::string path = CheckpointPaths::shard_in(partial, r.rank);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != r.bytes)
      return io_error("checkpoint shard '{}' of rank {} is not visible to rank 0 with its {} bytes", path, r.rank,
                      r.bytes)
          .with_hint("checkpoints need a directory every rank shares (one host, or a shared file system)");
  }
  Manifest m = req.manifest;
  m.step = req.step;
  m.shards = records;
  m.seal();
  auto latest = read_latest(paths);
  const bool exists = path_exists(final_dir);
  if (exists) {
    // A second save of a step: keep an identical, intact checkpoint; never touch a committed one.
    auto old = read_manifest(paths, req.step);
    const bool identical = old.ok() && old->digest == m.digest && verify_shard_files(final_dir, *old).ok();
    const bool committed = latest.ok() && req.step <= latest->step;
    if (identical || committed) SP_RETURN_IF_ERROR(remove_tree(partial));
    if (identical) {
      out.kept_existing = true;
      log_info("checkpoint: '{}' already holds this exact checkpoint (manifest digest {}): kept, not rewritten",
               final_dir, m.digest.substr(0, 16));
    } else if (committed) {
      return failed_precondition(
                 "checkpoint '{}' is already committed and holds a different state ({}); a committed checkpoint is "
                 "never overwritten",
                 final_dir,
                 old.ok() ? fmt::format("manifest digest {}, this save {}", old->digest, m.digest)
                          : old.status().message())
          .with_hint("move that directory away to save this step again, or resume from it");
    } else {
      log_warn("checkpoint: '{}' never finished its commit (LATEST does not name it): replacing it", final_dir);
      SP_RETURN_IF_ERROR(delete_checkpoint_dir(paths, req.step));
    }
  }
  if (!out.kept_existing) {
    maybe_kill(req, SavePhase::kBeforeManifest, 0);
    SP_RETURN_IF_ERROR(write_file(CheckpointPaths::manifest_in(partial), m.to_text()));
    SP_RETURN_IF_ERROR(fsync_directory(partial));
    maybe_kill(req, SavePhase::kBeforeRename, 0);
    if (::rename(partial.c_str(), final_dir.c_str()) != 0)
      return io_error("cannot rename '{}' to '{}': {}", partial, final_dir, std::strerror(errno));
    SP_RETURN_IF_ERROR(fsync_directory(paths.root()));
  }
  maybe_kill(req, SavePhase::kBeforeLatest, 0);
  SP_RETURN_IF_ERROR(write_file_atomic(paths.latest(), Latest{req.step, m.digest}.to_text()));
  maybe_kill(req, SavePhase::kAfterLatest, 0);
  out.dir = final_dir;
  out.bytes = m.total_bytes();
  // Retention, only now that the new checkpoint is LATEST: keep the keep_last newest up to this step.
  SP_ASSIGN_OR_RETURN(CheckpointListing listing, list_checkpoints(paths));
  std::vector<int64_t> committed;
  for (int64_t s : listing.steps)
    if (s <= req.step) committed.push_back(s);
  const auto keep = static_cast<size_t>(std::max<int64_t>(req.keep_last, 1));
  for (size_t i = 0; i + keep < committed.size(); ++i) {
    SP_CHECK(committed[i] != req.step, "retention would delete the checkpoint it just committed");
    SP_RETURN_IF_ERROR(delete_checkpoint_dir(paths, committed[i]));
    out.deleted.push_back(committed[i]);
  }
  return Status();
}

}  // namespace

std::string_view save_phase_name(SavePhase phase) { return kPhaseNames[static_cast<size_t>(phase)]; }

Result<std::optional<SaveFault>> parse_save_fault(std::string_view spec) {
  const size_t at = spec.find('@'), colon = spec.find(':');
  const std::string_view name = spec.substr(0, std::min(at, colon));
  SaveFault f;
  if (name == "ckpt-enospc") {
    f.kill = false;
  } else if (name.rfind("ckpt-kill-", 0) == 0) {
    const std::string_view phase = name.substr(10);
    const auto it = std::find(kPhaseNames.begin(), kPhaseNames.end(), phase);
    if (it == kPhaseNames.end())
      return invalid_argument("--fault {}: unknown checkpoint phase '{}'", spec, phase)
          .with_hint("phases: shard-write, before-manifest, before-rename, before-latest, after-latest");
    f.phase = static_cast<SavePhase>(it - kPhaseNames.begin());
  } else {
    return std::optional<SaveFault>();
  }
  auto number = [&](std::string_view text, const char* what) -> Result<int64_t> {
    int64_t v = 0;
    if (text.empty() || text.size() > 12)
      return invalid_argument("--fault {}: {} '{}' is not a number", spec, what, text);
    for (char c : text) {
      if (c < '0' || c > '9') return invalid_argument("--fault {}: {} '{}' is not a number", spec, what, text);
      v = v * 10 + (c - '0');
    }
    return v;
  };
  if (at != std::string_view::npos) {
    if (colon != std::string_view::npos && colon < at)
      return invalid_argument("--fault {}: write NAME[@STEP][:RANK]", spec);
    SP_ASSIGN_OR_RETURN(f.step,
                        number(spec.substr(at + 1, colon == std::string_view::npos ? colon : colon - at - 1), "step"));
  }
  if (colon != std::string_view::npos) {
    SP_ASSIGN_OR_RETURN(const int64_t r, number(spec.substr(colon + 1), "rank"));
    if (r >= kMaxWorld) return invalid_argument("--fault {}: rank {} is out of range", spec, r);
    f.rank = static_cast<int>(r);
  }
  return std::optional<SaveFault>(f);
}

Result<SaveOutcome> save_checkpoint(comm::Communicator& world, const SaveRequest& req) {
  auto agree = [&world](const Status& local) { return comm::agree(world, local); };
  Stopwatch clock;
  const int rank = world.rank();
  const CheckpointPaths paths(req.run_dir);
  const std::string context = fmt::format("saving checkpoint step {}", req.step);
  const Status ready = !req.precondition.ok() ? req.precondition : rank == 0 ? prepare(paths, req.step) : Status();
  SP_RETURN_IF_ERROR(agree(ready).with_context(context));

  const std::string partial = paths.partial_dir(req.step);
  // The digests are computed from memory while the same memory is written out (and fsynced).
  ShardImage img =
      build_shard(rank, req.coords, req.tp_rank, req.step, req.spans, /*digests=*/false, req.manifest.training_state());
  std::thread hasher([&img] { digest_shard(img); });
  const Status written = write_shard(img, CheckpointPaths::shard_in(partial, rank), req, rank);
  hasher.join();
  const Status wrote = agree(written);
  if (!wrote.ok()) {
    if (rank == 0) {
      const Status rm = remove_tree(partial);
      if (!rm.ok()) log_warn("{}", rm.message());
    }
    return wrote.with_context(context + " (nothing was committed; LATEST is unchanged)");
  }

  if (rank != 0) maybe_kill(req, SavePhase::kBeforeManifest, rank);
  // Every rank learns every shard's size (the chunk-digest counts of the second gather), rank 0
  // also the digests.
  const size_t world_size = static_cast<size_t>(world.size());
  char mine[kRecordBytes];
  for (size_t i = 0; i < 8; ++i) mine[i] = static_cast<char>((img.bytes >> (8 * i)) & 0xFF);
  std::memcpy(mine + 8, img.sha256.data(), 64);
  std::vector<char> all(kRecordBytes * world_size);
  std::vector<int64_t> counts(world_size, static_cast<int64_t>(kRecordBytes));
  world.all_gather(mine, all.data(), counts, DType::kU8);
  auto bytes_of = [&](size_t r) {
    uint64_t b = 0;
    for (int i = 7; i >= 0; --i)
      b = (b << 8) | static_cast<unsigned char>(all[kRecordBytes * r + static_cast<size_t>(i)]);
    return b;
  };
  int64_t total_chunk_chars = 0;
  for (size_t r = 0; r < world_size; ++r) {
    counts[r] = static_cast<int64_t>(64 * chunk_count(bytes_of(r), kShaChunkBytes));
    total_chunk_chars += counts[r];
  }
  std::string my_chunks;
  for (const std::string& d : img.sha256_chunks) my_chunks += d;
  SP_CHECK_EQ(static_cast<int64_t>(my_chunks.size()), counts[static_cast<size_t>(rank)], "chunk digests");
  std::string all_chunks(rank == 0 ? static_cast<size_t>(total_chunk_chars) : 0, '\0');
  world.gather(my_chunks.data(), counts[static_cast<size_t>(rank)], rank == 0 ? all_chunks.data() : nullptr, counts,
               DType::kU8, 0);

  SaveOutcome out;
  Status committed;
  if (rank == 0) {
    SP_CHECK_EQ(req.rank_coords.size(), static_cast<size_t>(world.size()), "coords of every rank");
    std::vector<ShardRecord> records;
    size_t at = 0;  // next chunk digest in all_chunks
    for (size_t r = 0; r < world_size; ++r) {
      ShardRecord rec;
      rec.rank = static_cast<int>(r);
      rec.coords = req.rank_coords[r];
      rec.file = shard_file_name(rec.rank);
      rec.bytes = bytes_of(r);
      rec.sha256.assign(all.data() + kRecordBytes * r + 8, 64);
      for (uint64_t c = 0; c < chunk_count(rec.bytes, kShaChunkBytes); ++c, at += 64)
        rec.sha256_chunks.push_back(all_chunks.substr(at, 64));
      records.push_back(std::move(rec));
    }
    committed = commit(paths, req, records, out);
    if (!committed.ok() && path_exists(partial)) {
      const Status rm = remove_tree(partial);
      if (!rm.ok()) log_warn("{}", rm.message());
    }
  } else {
    for (SavePhase p : {SavePhase::kBeforeRename, SavePhase::kBeforeLatest, SavePhase::kAfterLatest})
      maybe_kill(req, p, rank);
  }
  SP_RETURN_IF_ERROR(agree(committed).with_context(context));
  out.dir = paths.step_dir(req.step);
  out.seconds = clock.seconds();
  return out;
}

}  // namespace sp::ckpt
