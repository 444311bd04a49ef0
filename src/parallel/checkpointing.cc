// Checkpointing glue (checkpointing.h), the state half: the engine's owned pieces written to a checkpoint
// and read back under any topology, and the evidence files cut back to a checkpoint's prefixes. Which
// checkpoint a run resumes from is decided in checkpointing_resume.cc.
#include "parallel/checkpointing.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "ckpt/reshard.h"
#include "comm/agree.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/log.h"
#include "evidence/bundle_paths.h"
#include "evidence/contract.h"
#include "parallel/engine.h"

namespace sp::parallel {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// SHA-256 of the first `bytes` bytes of `path`; an error if the file is shorter.
Result<std::string> sha256_prefix(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open '{}': {}", path, std::strerror(errno));
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  uint64_t done = 0;
  Status st;
  while (done < bytes) {
    const ssize_t n = ::read(fd, buf.data(), std::min<uint64_t>(buf.size(), bytes - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = corrupt("'{}' ended at byte {} before the {} bytes it had when the checkpoint was taken", path, done, bytes);
      break;
    }
    sha.update(buf.data(), static_cast<size_t>(n));
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (!st.ok()) return st;
  return sha.hex_digest();
}

std::vector<ckpt::StateSpan> spans_of(Engine& engine) {
  std::vector<ckpt::StateSpan> spans;
  for (const Engine::StatePiece& p : engine.state_pieces())
    spans.push_back({p.unit, p.begin, p.end, {p.param, p.exp_avg, p.exp_avg_sq}});
  return spans;
}

ckpt::Topology topology_of(const Engine& engine) {
  const config::ParallelConfig& pc = engine.plan().config.parallel;
  return {pc.dp, pc.tp, pc.pp, pc.zero, engine.grid().order_string(), pc.parameter_server() ? pc.servers : 0};
}

}  // namespace

Status prepare_evidence_for_resume(comm::Communicator& world, const std::string& run_dir, const ResumePlan& plan) {
  Status st;
  if (world.rank() == 0) {
    st = [&]() -> Status {
      const ckpt::CheckpointPaths paths(run_dir);
      for (const auto& [name, prefix] : plan.manifest.evidence) {
        const std::string path = paths.run_file(name);
        if (!path_exists(path)) {
          log_warn("evidence file '{}' is missing: its records before step {} are lost; continuing a new file", path,
                   plan.step);
          continue;
        }
        SP_ASSIGN_OR_RETURN(const std::string sha, sha256_prefix(path, prefix.bytes));
        if (sha != prefix.sha256)
          return corrupt(
                     "evidence file '{}' no longer starts with the {} bytes it had when checkpoint step {} was "
                     "taken (SHA-256 {}, recorded {})",
                     path, prefix.bytes, plan.step, sha, prefix.sha256)
              .with_hint("restore the run's evidence files, or delete this one to start it anew");
        if (::truncate(path.c_str(), static_cast<off_t>(prefix.bytes)) != 0)
          return io_error("cannot truncate '{}': {}", path, std::strerror(errno));
      }
      // Trace and timeline files are per process (sequence numbers restart): keep the interrupted
      // process's files beside the new ones.
      std::string dest = paths.segment_dir(plan.step, 0);
      for (int i = 1; path_exists(dest); ++i) dest = paths.segment_dir(plan.step, i);
      const evidence::RunPaths run(run_dir);
      for (const std::string& from : {run.trace_dir(), run.timeline_dir()}) {
        if (!path_exists(from)) continue;
        SP_RETURN_IF_ERROR(make_directories(dest));
        std::error_code ec;
        fs::rename(from, fs::path(dest) / fs::path(from).filename(), ec);
        if (ec) return io_error("cannot move '{}' to '{}': {}", from, dest, ec.message());
      }
      return Status();
    }();
  }
  return comm::agree(world, st);
}

Status load_checkpoint(Engine& engine, comm::Communicator& world, comm::TraceContext& trace, const ResumePlan& plan) {
  comm::ScopedPhase phase(trace, comm::Phase::kCheckpoint, plan.step);
  auto source = ckpt::CheckpointSource::open(plan.dir, plan.manifest, engine.plan().config.model);
  SP_RETURN_IF_ERROR(comm::agree(world, source.status()));
  SP_RETURN_IF_ERROR(comm::agree(world, source->fill(spans_of(engine), engine.coords().tp)));
  auto next = engine.restore_loader(plan.manifest.loader_cursor);
  Status cursor = next.status();
  if (next.ok() && *next != plan.step)
    cursor = corrupt("checkpoint step {}: its data cursor resumes at step {}", plan.step, *next);
  SP_RETURN_IF_ERROR(comm::agree(world, cursor.with_context(ckpt::CheckpointPaths::manifest_in(plan.dir))));
  engine.optimizer().set_steps_taken(plan.manifest.optimizer_steps);
  // fp16: the loss scaler continues where it was (a checkpoint of another precision has none: the scaler
  // starts afresh, which --convert-precision allowed).
  if (optim::LossScaler* ls = engine.loss_scaler(); ls != nullptr && !plan.manifest.loss_scaler.is_null()) {
    auto state = optim::LossScaler::state_from_json(plan.manifest.loss_scaler, ls->config());
    SP_RETURN_IF_ERROR(comm::agree(
        world, state.status().with_context(ckpt::CheckpointPaths::manifest_in(plan.dir) + ": optimizer.loss_scaler")));
    ls->restore(*state);
  }
  engine.state_loaded();
  if (world.rank() == 0) {
    const ckpt::Topology now = topology_of(engine);
    if (!(now == plan.manifest.topology))
      log_info("resharded checkpoint step {}: saved under {}, loaded under {}", plan.step,
               plan.manifest.topology.describe(), now.describe());
    log_info("loaded checkpoint step {}: {:.1f} MB read by rank 0", plan.step, source->bytes_read() / 1e6);
  }
  return Status();
}

Result<ckpt::SaveOutcome> save_checkpoint(Engine& engine, comm::Communicator& world, comm::TraceContext& trace,
                                          const std::string& run_dir, int64_t steps_done, const json& contract,
                                          const CheckpointOptions& options) {
  comm::ScopedPhase phase(trace, comm::Phase::kCheckpoint, steps_done);
  const int rank = world.rank();
  ckpt::SaveRequest req;
  req.run_dir = run_dir;
  req.step = steps_done;
  req.coords = engine.label(rank);
  req.tp_rank = engine.coords().tp;
  if (engine.saves_state()) req.spans = spans_of(engine);
  req.keep_last = options.keep_last;
  req.fault = options.fault;
  // Every shard records the training state the manifest records (ckpt/format.h kMetaState).
  req.manifest.optimizer_steps = engine.optimizer().steps_taken();
  if (engine.loss_scaler() != nullptr) req.manifest.loss_scaler = engine.loss_scaler()->state_json();
  req.manifest.loader_cursor = engine.loader_cursor(steps_done);
  req.precondition = options.precondition;
  if (rank == 0) {
    req.manifest.contract = contract;
    req.manifest.contract_hash = contract.value("hash", std::string());
    req.manifest.topology = topology_of(engine);
    const ckpt::CheckpointPaths paths(run_dir);
    for (const std::string& name : options.evidence_files) {
      const std::string path = paths.run_file(name);
      if (!path_exists(path)) continue;
      auto bytes = read_file(path);
      if (!bytes.ok()) continue;  // evidence is best effort here; the checkpoint itself is not
      req.manifest.evidence[name] = {bytes->size(), sha256_hex(*bytes)};
    }
    for (int r = 0; r < world.size(); ++r) req.rank_coords.push_back(engine.label(r));
  }
  return ckpt::save_checkpoint(world, req);
}

}  // namespace sp::parallel
