// Checkpointing glue (checkpointing.h), the resume half: which checkpoint a run continues from. --resume
// decides whether one is wanted; the newest candidate whose manifest, LATEST and shard hashes verify on
// every rank is taken (--fallback-previous: damaged ones are set aside, never deleted), and its contract
// must equal this run's up to the topology and evidence settings. Collective: every rank returns the same.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "comm/agree.h"
#include "core/file_io.h"
#include "core/log.h"
#include "evidence/contract.h"
#include "parallel/checkpointing.h"

namespace sp::parallel {
using nlohmann::json;

namespace {

bool is_damage(const Status& s) {
  return s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kNotFound || s.code() == StatusCode::kIo;
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
          "resume with the configuration, data and build that saved it (only parallel.*, evidence.* and "
          "train.recompute may change), or train into another --out directory" +
          evidence::blas_core_hint(diffs));
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

namespace {

// What rank 0 found under checkpoints/ (ckpt::find_candidates), as every rank sees it.
struct CandidateListing {
  std::vector<int64_t> steps;  // newest first
  std::vector<int64_t> uncommitted;
  bool any_step_dirs = false;
  StatusCode latest_code = StatusCode::kOk;
  std::string latest_message;
  std::optional<ckpt::Latest> latest;  // LATEST, when it parsed
  // Anything at all that a fresh run would overwrite.
  bool any() const { return any_step_dirs || latest_code != StatusCode::kNotFound; }
};

// 1. Rank 0 lists the candidates; everyone works from its list (collective).
Result<CandidateListing> list_candidates(comm::Communicator& world, const ckpt::CheckpointPaths& paths,
                                         bool fallback_previous) {
  json listing;
  Status st;
  if (world.rank() == 0) {
    auto c = ckpt::find_candidates(paths, fallback_previous);
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
  CandidateListing out;
  out.steps = listing["steps"].get<std::vector<int64_t>>();
  out.uncommitted = listing["uncommitted"].get<std::vector<int64_t>>();
  out.any_step_dirs = listing["any_step_dirs"].get<bool>();
  out.latest_code = static_cast<StatusCode>(listing["latest_code"].get<int>());
  out.latest_message = listing["latest_message"].get<std::string>();
  if (!listing["latest"].is_null())
    out.latest = ckpt::Latest::parse(listing["latest"].get<std::string>(), paths.latest()).value();
  return out;
}

// 3. The newest candidate that verifies; `refused` collects the damaged ones skipped under --fallback-previous.
Result<ResumePlan> newest_verified(comm::Communicator& world, const ckpt::CheckpointPaths& paths,
                                   const CandidateListing& found, bool fallback_previous,
                                   std::vector<int64_t>& refused) {
  ResumePlan plan;
  Status last;
  for (int64_t step : found.steps) {
    Status st = verify_candidate(world, paths, step, found.latest, plan.manifest);
    if (st.ok()) {
      plan.resume = true;
      plan.step = step;
      plan.dir = paths.step_dir(step);
      return plan;
    }
    if (!fallback_previous && is_damage(st))
      return st.with_hint((st.hint().empty() ? "" : st.hint() + "; ") +
                          "--fallback-previous resumes from the newest checkpoint that verifies completely");
    if (!is_damage(st)) return st;
    if (world.rank() == 0) log_warn("--fallback-previous: checkpoint step {} refused: {}", step, st.message());
    refused.push_back(step);
    last = st;
  }
  return failed_precondition("no usable checkpoint in '{}'{}", paths.root(),
                             last.ok() ? std::string() : ": the oldest one tried was refused: " + last.message());
}

// 5. Sets refused checkpoints aside and points LATEST at the one in use (rank 0), so a later resume or save
//    never meets them again; nothing is deleted. Collective.
Status set_refused_aside(comm::Communicator& world, const ckpt::CheckpointPaths& paths,
                         const std::vector<int64_t>& refused, const CandidateListing& found, const ResumePlan& plan) {
  Status moved;
  if (world.rank() == 0 && (!refused.empty() || !found.latest || found.latest->step != plan.step)) {
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
  return comm::agree(world, moved);
}

}  // namespace

Result<ResumePlan> plan_resume(comm::Communicator& world, const std::string& run_dir, const json& contract,
                               const ResumeOptions& options) {
  const ckpt::CheckpointPaths paths(run_dir);
  const bool root = world.rank() == 0;
  // 1. Rank 0 lists the candidates; everyone works from its list.
  SP_ASSIGN_OR_RETURN(const CandidateListing found, list_candidates(world, paths, options.fallback_previous));
  const bool has_latest = found.latest.has_value();
  if (root && has_latest)
    for (int64_t s : found.uncommitted)
      log_warn("checkpoint '{}' never finished its commit (LATEST names step {}): ignored", paths.step_dir(s),
               found.latest->step);

  // 2. --resume.
  if (options.mode == ResumeMode::kNever) {
    if (found.any())
      return failed_precondition("'{}' already holds checkpoints{}; --resume never refuses to overwrite them",
                                 paths.root(), has_latest ? fmt::format(" (LATEST: step {})", found.latest->step) : "")
          .with_hint("resume with --resume auto, or train into another --out directory");
    return ResumePlan{};
  }
  if (!has_latest && found.latest_code == StatusCode::kNotFound && !found.any_step_dirs) {
    if (options.mode == ResumeMode::kRequired)
      return failed_precondition("--resume required: '{}' holds no checkpoint to resume from", paths.root())
          .with_hint("check --out, or start a fresh run with --resume auto");
    if (root) log_info("no checkpoint in '{}': starting a fresh run", paths.root());
    return ResumePlan{};
  }
  if (!has_latest && !options.fallback_previous) {
    if (found.latest_code == StatusCode::kNotFound)
      return corrupt(
                 "'{}' holds step directories but no LATEST: a first save was interrupted between its rename "
                 "and the LATEST move, or LATEST was deleted",
                 paths.root())
          .with_hint("--fallback-previous resumes from the newest checkpoint that verifies completely");
    return Status(found.latest_code, found.latest_message,
                  "--fallback-previous resumes from the newest checkpoint that verifies completely");
  }
  if (!has_latest && root)
    log_warn("checkpoint pointer unusable ({}); --fallback-previous: trying the step directories newest first",
             found.latest_message);

  // 3. The newest candidate that verifies.
  std::vector<int64_t> refused;
  SP_ASSIGN_OR_RETURN(const ResumePlan plan, newest_verified(world, paths, found, options.fallback_previous, refused));
  // 4. The contract: everything but the topology and evidence settings must be the saved run's.
  SP_RETURN_IF_ERROR(check_checkpoint_contract(plan, contract, options.convert_precision));
  // 5. Refused checkpoints set aside, LATEST at the one in use.
  SP_RETURN_IF_ERROR(set_refused_aside(world, paths, refused, found, plan));
  if (root) {
    const ckpt::Topology& t = plan.manifest.topology;
    log_info("resuming from checkpoint step {} ('{}', saved under {}){}", plan.step, plan.dir, t.describe(),
             refused.empty() ? "" : fmt::format(" instead of the damaged step {}", refused.front()));
  }
  return plan;
}

}  // namespace sp::parallel
