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

bool is_damage(const Status& s) {
  return s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kNotFound || s.code() == StatusCode::kIo;
}

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

// Each rank checks the manifest itself and hashes every world-th shard; one agreement.
Status verify_candidate(comm::Communicator& world, const ckpt::CheckpointPaths& paths, int64_t step,
                        const std::optional<ckpt::Latest>& latest, ckpt::Manifest& out) {
  Status st;
  auto m = ckpt::read_manifest(paths, step);
  if (!m.ok() && latest && latest->step == step && !path_exists(paths.step_dir(step))) {
    st = not_found("'{}' names step {}, but its directory '{}' does not exist", paths.latest(), step,
                   paths.step_dir(step))
             .with_hint("the checkpoint was moved or deleted after its commit");
  } else if (!m.ok()) {
    st = m.status();
  } else if (latest && latest->step == step && latest->manifest_digest != m->digest) {
    st = corrupt("'{}' names manifest digest {} for step {}, but '{}' has digest {}", paths.latest(),
                 latest->manifest_digest, step, ckpt::CheckpointPaths::manifest_in(paths.step_dir(step)), m->digest)
             .with_hint("LATEST or the manifest was damaged");
  } else {
    st = ckpt::verify_shard_files(paths.step_dir(step), *m, world.rank(), world.size());
  }
  SP_RETURN_IF_ERROR(comm::agree(world, st));
  out = std::move(m).value();
  return Status();
}

// Everything but the topology and evidence settings must be the saved run's.
// "fp32/fp32", "bf16/bf16": a contract's train.precision / train.grad_dtype (absent: fp32, as an fp32
// contract omits them).
std::string precision_of(const json& contract) {
  const json train = contract.contains("config") ? contract["config"].value("train", json::object()) : json::object();
  return train.value("precision", std::string("fp32")) + "/" + train.value("grad_dtype", std::string("fp32"));
}

Status check_checkpoint_contract(const ResumePlan& plan, const json& contract, bool convert_precision) {
  SP_RETURN_IF_ERROR(evidence::verify_contract(plan.manifest.contract, ckpt::CheckpointPaths::manifest_in(plan.dir)));
  std::vector<std::string> ignore = evidence::resumable_contract_differences();
  const std::string saved = precision_of(plan.manifest.contract), current = precision_of(contract);
  if (saved != current && !convert_precision)
    return failed_precondition(
               "checkpoint step {} in '{}' was saved in precision {} (train.precision/train.grad_dtype), this "
               "run is {}",
               plan.step, plan.dir, saved, current)
        .with_hint(
            "resume with the precision that saved it, or pass --convert-precision to continue from its fp32 "
            "master weights and optimizer state in the new precision (the trajectory then is that precision's)");
  if (convert_precision)
    // The [fp16] table (dynamic loss scaling) belongs to fp16: it appears or goes with the precision.
    for (const char* k :
         {"config.train.precision", "config.train.grad_dtype", "config.train.gemm16", "engine.gemm16", "config.fp16"})
      ignore.push_back(k);
  const std::vector<std::string> diffs = evidence::contract_diff(plan.manifest.contract, contract, ignore);
  if (diffs.empty()) return Status();
  std::string lines;
  for (const std::string& d : diffs) lines += "\n    " + d;
  return failed_precondition("checkpoint step {} in '{}' was saved by a different run (saved ≠ current):{}", plan.step,
                             plan.dir, lines)
      .with_hint(
          "resume with the configuration, data and build that saved it (only parallel.* and evidence.* may "
          "change), or train into another --out directory");
}

}  // namespace

Result<ResumePlan> plan_anchor(comm::Communicator& world, const std::string& anchor_dir, int64_t step,
                               const json& contract) {
  const ckpt::CheckpointPaths paths(anchor_dir);
  ResumePlan plan;
  SP_RETURN_IF_ERROR(verify_candidate(world, paths, step, std::nullopt, plan.manifest)
                         .with_hint(fmt::format("the anchored replay needs '{}' saved by the reference run "
                                                "(train --checkpoint-at {})",
                                                paths.step_dir(step), step)));
  plan.resume = true;
  plan.step = step;
  plan.dir = paths.step_dir(step);
  SP_RETURN_IF_ERROR(comm::agree(world, check_checkpoint_contract(plan, contract, false)));
  return plan;
}

Result<ResumeMode> parse_resume_mode(std::string_view text) {
  if (text == "auto") return ResumeMode::kAuto;
  if (text == "required") return ResumeMode::kRequired;
  if (text == "never") return ResumeMode::kNever;
  return invalid_argument("--resume {}: expected auto, required or never", text);
}

Result<ResumePlan> plan_resume(comm::Communicator& world, const std::string& run_dir, const json& contract,
                               const ResumeOptions& options) {
  const ckpt::CheckpointPaths paths(run_dir);
  const bool root = world.rank() == 0;
  // 1. Rank 0 lists the candidates; everyone works from its list.
  json listing;
  {
    Status st;
    if (root) {
      auto c = ckpt::find_candidates(paths, options.fallback_previous);
      if (c.ok()) {
        listing = {{"steps", c->steps},
                   {"uncommitted", c->uncommitted},
                   {"any_step_dirs", c->any_step_dirs},
                   {"latest_code", static_cast<int>(c->latest_status.code())},
                   {"latest_message", c->latest_status.message()},
                   {"latest", c->latest ? json(c->latest->to_text()) : json()}};
      } else {
        st = c.status();
      }
    }
    SP_RETURN_IF_ERROR(comm::agree(world, st));
    // (A LATEST error message may quote damaged bytes: never let them make dump() throw.)
    listing = json::parse(comm::broadcast_string(world, listing.dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  const auto steps = listing["steps"].get<std::vector<int64_t>>();
  const bool has_latest = !listing["latest"].is_null();
  const auto latest_code = static_cast<StatusCode>(listing["latest_code"].get<int>());
  const bool any = listing["any_step_dirs"].get<bool>() || latest_code != StatusCode::kNotFound;
  std::optional<ckpt::Latest> latest;
  if (has_latest) latest = ckpt::Latest::parse(listing["latest"].get<std::string>(), paths.latest()).value();
  if (root)
    for (int64_t s : listing["uncommitted"].get<std::vector<int64_t>>())
      if (has_latest)
        log_warn("checkpoint '{}' never finished its commit (LATEST names step {}): ignored", paths.step_dir(s),
                 latest->step);

  // 2. --resume.
  if (options.mode == ResumeMode::kNever) {
    if (any)
      return failed_precondition("'{}' already holds checkpoints{}; --resume never refuses to overwrite them",
                                 paths.root(), has_latest ? fmt::format(" (LATEST: step {})", latest->step) : "")
          .with_hint("resume with --resume auto, or train into another --out directory");
    return ResumePlan{};
  }
  if (!has_latest && latest_code == StatusCode::kNotFound && !listing["any_step_dirs"].get<bool>()) {
    if (options.mode == ResumeMode::kRequired)
      return failed_precondition("--resume required: '{}' holds no checkpoint to resume from", paths.root())
          .with_hint("check --out, or start a fresh run with --resume auto");
    if (root) log_info("no checkpoint in '{}': starting a fresh run", paths.root());
    return ResumePlan{};
  }
  if (!has_latest && !options.fallback_previous) {
    if (latest_code == StatusCode::kNotFound)
      return corrupt(
                 "'{}' holds step directories but no LATEST: a first save was interrupted between its rename "
                 "and the LATEST move, or LATEST was deleted",
                 paths.root())
          .with_hint("--fallback-previous resumes from the newest checkpoint that verifies completely");
    return Status(latest_code, listing["latest_message"].get<std::string>(),
                  "--fallback-previous resumes from the newest checkpoint that verifies completely");
  }
  if (!has_latest && root)
    log_warn("checkpoint pointer unusable ({}); --fallback-previous: trying the step directories newest first",
             listing["latest_message"].get<std::string>());

  // 3. The newest candidate that verifies.
  ResumePlan plan;
  std::vector<int64_t> refused;
  Status last;
  for (int64_t step : steps) {
    Status st = verify_candidate(world, paths, step, latest, plan.manifest);
    if (st.ok()) {
      plan.resume = true;
      plan.step = step;
      plan.dir = paths.step_dir(step);
      break;
    }
    if (!options.fallback_previous && is_damage(st))
      return st.with_hint((st.hint().empty() ? "" : st.hint() + "; ") +
                          "--fallback-previous resumes from the newest checkpoint that verifies completely");
    if (!is_damage(st)) return st;
    if (root) log_warn("--fallback-previous: checkpoint step {} refused: {}", step, st.message());
    refused.push_back(step);
    last = st;
  }
  if (!plan.resume)
    return failed_precondition("no usable checkpoint in '{}'{}", paths.root(),
                               last.ok() ? std::string() : ": the oldest one tried was refused: " + last.message());

  // 4. The contract: everything but the topology and evidence settings must be the saved run's.
  SP_RETURN_IF_ERROR(check_checkpoint_contract(plan, contract, options.convert_precision));
  // 5. Set refused checkpoints aside and point LATEST at the one in use (rank 0), so a later resume or
  //    save never meets them again; nothing is deleted.
  Status moved;
  if (root && (!refused.empty() || !latest || latest->step != plan.step)) {
    for (int64_t s : refused) {
      if (!path_exists(paths.step_dir(s))) continue;
      if (::rename(paths.step_dir(s).c_str(), paths.refused_dir(s).c_str()) != 0) {
        moved =
            io_error("cannot rename '{}' to '{}': {}", paths.step_dir(s), paths.refused_dir(s), std::strerror(errno));
        break;
      }
      log_warn("--fallback-previous: damaged checkpoint kept as '{}'", paths.refused_dir(s));
    }
    if (moved.ok()) moved = write_file_atomic(paths.latest(), ckpt::Latest{plan.step, plan.manifest.digest}.to_text());
  }
  SP_RETURN_IF_ERROR(comm::agree(world, moved));
  if (root) {
    const ckpt::Topology& t = plan.manifest.topology;
    log_info("resuming from checkpoint step {} ('{}', saved under {}){}", plan.step, plan.dir, t.describe(),
             refused.empty() ? "" : fmt::format(" instead of the damaged step {}", refused.front()));
  }
  return plan;
}

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
