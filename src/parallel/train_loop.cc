// run_training's phase 5 (trainer.h, train_run.h): the training loop, step by step with its checksum and
// metrics records, evaluations and checkpoints, and the anchored replay that records each anchor step from
// the reference run's own state.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "comm/staleness.h"
#include "core/file_io.h"
#include "core/log.h"
#include "core/timer.h"
#include "parallel/train_run.h"
#include "plan/traffic_model.h"

namespace sp::parallel::train_detail {
namespace {

std::string eta_string(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

// The step's checksum records (loss always; gradients and parameters when taken) on rank 0.
void write_step_records(Run& run, const StepResult& r, bool take) {
  if (!run.checksums) return;
  run.checksums->write_scalar(r.step, "loss", "loss", r.loss);
  // fp16: the loss scaler's record, every step (plan::expected_records).
  if (run.config.train.precision.compute == DType::kF16) {
    SP_CHECK(r.loss_scale > 0, "step {}: an fp16 step without a loss scale", r.step);
    run.checksums->write_scaler(r.step, r.loss_scale, r.skipped);
  }
  if (take) {
    run.checksums->write_tensors(r.step, "grad", run.engine->tensors(), r.grads);
    run.checksums->write_tensors(r.step, "param", run.engine->tensors(), r.params);
  }
  (void)run.checksums->flush();  // an error is kept and reported by finish()
}

// The step's end on this rank: its checksum records (`records`), whose writing is part of the step's time
// (step_s) and of its evidence, then the step's split in the timeline.
void finish_step(Run& run, StepResult& r, bool take, bool records) {
  if (records) {
    Stopwatch clock;
    write_step_records(run, r, take);
    const int64_t ns = clock.nanoseconds();
    r.step_ns += ns;
    r.time_split[TimeKind::kEvidence] += ns;
    r.seconds = static_cast<double>(r.step_ns) * 1e-9;
  }
  run.timeline->write_split(r.step, r.step_ns, r.time_split);
}

// metrics.jsonl's time_split_s: rank 0's step by kind in seconds, "other" the rest of step_s.
nlohmann::json time_split_seconds(const StepResult& r) {
  nlohmann::json parts = nlohmann::json::object();
  for (size_t k = 0; k < kTimeKinds; ++k)
    parts[std::string(kTimeKindNames[k])] = static_cast<double>(r.time_split.ns[k]) * 1e-9;
  parts[std::string(kOtherTime)] = static_cast<double>(r.step_ns - r.time_split.sum()) * 1e-9;
  return parts;
}

nlohmann::json step_metrics(const StepResult& r, double tokens_per_step) {
  nlohmann::json m = {{"step", r.step},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"grad_norm", r.grad_norm},
                      {"clip", r.clip},
                      {"finite", r.finite},
                      {"skipped", r.skipped},
                      {"step_s", r.seconds},
                      {"compute_s", r.compute_seconds},
                      {"tokens_per_s", tokens_per_step / r.seconds},
                      {"time_split_s", time_split_seconds(r)}};
  if (!r.diverging_ranks.empty()) m["diverging_ranks"] = r.diverging_ranks;
  if (!r.versions.empty()) {  // SSP: the version each worker's gradient was computed on, and its staleness
    m["versions"] = r.versions;
    std::vector<int64_t> staleness;
    for (int64_t v : r.versions) staleness.push_back(r.step - v);
    m["staleness"] = staleness;
  }
  if (r.loss_scale > 0) m["loss_scale"] = r.loss_scale;  // fp16: the scale the step ran with
  return m;
}

Status save_at(Run& run, int64_t steps_done, CheckpointOptions options) {
  // A checkpoint records the evidence files' prefixes: never commit one over incomplete evidence.
  if (Status e = run.evidence_status(); !e.ok())
    options.precondition = Status(e.code(), "not saved (LATEST is unchanged): evidence incomplete: " + e.message(),
                                  "free space or fix the file system, then resume from the last checkpoint");
  SP_ASSIGN_OR_RETURN(
      const ckpt::SaveOutcome saved,
      save_checkpoint(*run.engine, *run.comms.world, run.trace, run.opt.out_dir, steps_done, run.contract, options));
  if (run.rank == 0)
    log_info("checkpoint step {}: {} ({:.1f} MB, {:.2f} s){}", steps_done, saved.dir, saved.bytes / 1e6, saved.seconds,
             saved.deleted.empty() ? "" : fmt::format("; removed step {}", fmt::join(saved.deleted, ", ")));
  return run.engine->faults().after_checkpoint(saved.dir);
}

}  // namespace

// 5b. The anchored replay: for every anchor a, the reference's state at a − warmup, steps up to a, and
//     step a's records (metrics and anchors.json say which checkpoint each came from).
Status anchored_loop(Run& run, TrainSummary& summary) {
  const TrainOptions& opt = run.opt;
  const double tokens_per_step = static_cast<double>(run.config.train.global_batch * run.config.train.seq_len);
  nlohmann::json anchors = nlohmann::json::array();
  for (int64_t a : opt.anchors) {
    const int64_t start = a - opt.anchor_warmup;
    SP_ASSIGN_OR_RETURN(const ResumePlan from, plan_anchor(*run.comms.world, opt.anchor_from, start, run.contract));
    SP_RETURN_IF_ERROR(load_checkpoint(*run.engine, *run.comms.world, run.trace, from));
    for (int64_t s = start; s <= a; ++s) {
      const int64_t every = run.config.evidence.checksum_every;
      const bool take = s == a && every > 0 && s % every == 0;  // the reference's cadence
      StepResult r = run.engine->step(s, take);
      finish_step(run, r, take, /*records=*/s == a);
      if (s < a) continue;  // warm-up: this topology's own step from the reference's state
      nlohmann::json m = step_metrics(r, tokens_per_step);
      m["anchor"] = start;
      run.write_metrics(m);
      summary.final_loss = r.loss;
      summary.steps = s + 1;
      if (run.rank == 0 && opt.progress)
        log_info("anchor {}: step {} from the reference's step {}: loss {:.6f}", a, s, start, r.loss);
    }
    anchors.push_back({{"step", a}, {"loaded", start}, {"manifest_digest", from.manifest.digest}});
  }
  for (int64_t s : opt.anchor_evals) {  // the reference's state at an evaluation point, evaluated on this topology
    SP_ASSIGN_OR_RETURN(const ResumePlan from, plan_anchor(*run.comms.world, opt.anchor_from, s + 1, run.contract));
    SP_RETURN_IF_ERROR(load_checkpoint(*run.engine, *run.comms.world, run.trace, from));
    const double ev = run.engine->evaluate(s);
    run.write_metrics({{"step", s}, {"eval_loss", ev}, {"anchor", s + 1}});
    summary.final_eval_loss = ev;
    if (run.rank == 0 && opt.progress)
      log_info("anchored eval after step {}: the reference's state {}: eval loss {:.6f}", s, s + 1, ev);
  }
  return run.on_rank0([&] {
    const nlohmann::json doc = {{"format_version", evidence::kAnchorsFormatVersion},
                                {"reference", opt.anchor_from},
                                {"warmup", opt.anchor_warmup},
                                {"anchors", anchors}};
    return write_file_atomic(run.paths.anchors(), doc.dump(2) + "\n");
  });
}

// 5. The training loop: a step, its evidence records, the evaluation when due, a checkpoint when due.
//    Stops with an error on diverged replicas or non-finite gradients (evidence.stop_on_divergence).
Status train_loop(Run& run, TrainSummary& summary) {
  const config::RunConfig& config = run.config;
  Engine& engine = *run.engine;
  CheckpointOptions ckpt_options;
  ckpt_options.keep_last = config.evidence.keep_last;
  ckpt_options.fault = run.opt.ckpt_fault;
  const int64_t first_step = run.resume.step;
  const int64_t steps = config.train.steps;
  const int64_t last_step = run.opt.stop_after > 0 ? std::min(run.opt.stop_after, steps) : steps;
  const double tokens_per_step = static_cast<double>(config.train.global_batch * config.train.seq_len);
  const auto checkpoint_due = [&](int64_t steps_done) {
    return (config.evidence.checkpoint_every > 0 && steps_done % config.evidence.checkpoint_every == 0) ||
           std::find(run.opt.checkpoint_at.begin(), run.opt.checkpoint_at.end(), steps_done) !=
               run.opt.checkpoint_at.end();
  };
  if (first_step == 0 &&
      std::find(run.opt.checkpoint_at.begin(), run.opt.checkpoint_at.end(), 0) != run.opt.checkpoint_at.end())
    SP_RETURN_IF_ERROR(save_at(run, 0, ckpt_options));  // the initial state (an anchored replay's step 0)
  const evidence::StepSchedule schedule = plan::step_schedule(config);  // the rule comm_predicted.json follows
  Stopwatch run_clock;
  double tokens_seen = 0;
  comm::StalenessHistogram staleness;  // SSP: applied gradients by staleness, so far
  for (int64_t s = first_step; s < last_step; ++s) {
    const bool take = schedule.checksums(s);
    StepResult r = engine.step(s, take);
    tokens_seen += tokens_per_step;
    finish_step(run, r, take, /*records=*/true);
    nlohmann::json m = step_metrics(r, tokens_per_step);
    if (!r.versions.empty()) {
      comm::add_staleness(staleness, s, r.versions);
      m["staleness_histogram"] = comm::staleness_json(staleness);
    }
    if (schedule.eval_after(s)) {
      const double ev = engine.evaluate(s);
      m["eval_loss"] = ev;
      if (config.train.eval_batches > 0) summary.final_eval_loss = ev;
    }
    run.write_metrics(m);
    summary.final_loss = r.loss;
    summary.steps = s + 1;
    if (run.rank == 0 && run.opt.progress) {
      const double elapsed = run_clock.seconds();
      // Steps are numbered as in the evidence (metrics.jsonl, checksums.jsonl): 0 .. steps − 1.
      log_info("step {} of 0..{} loss {:.4f} lr {:.2e} norm {:.3f} | {:.0f} tok/s | ETA {}", s, steps - 1, r.loss, r.lr,
               r.grad_norm, tokens_seen / elapsed,
               eta_string(elapsed / static_cast<double>(s + 1 - first_step) * static_cast<double>(steps - s - 1)));
    }
    if (!r.diverging_ranks.empty() && config.evidence.stop_on_divergence && config.parallel.staleness > 0)
      return failed_precondition(
          "step {}: worker(s) {} computed this step or hold parameters for the next beyond the staleness bound "
          "{} (versions computed on: {}), or differ from a worker holding the same version",
          s, fmt::join(r.diverging_ranks, ", "), config.parallel.staleness, fmt::join(r.versions, ", "));
    if (!r.diverging_ranks.empty() && config.evidence.stop_on_divergence)
      return failed_precondition(
          "step {}: dp replicas diverged: world rank(s) {} hold parameters that differ "
          "from their dp group's rank 0",
          s, fmt::join(r.diverging_ranks, ", "));
    SP_RETURN_IF_ERROR(r.status);  // fp16: an overflow at the minimum loss scale
    // fp16: an overflowing step is the loss scaler's to handle (skipped, scale lowered), not a divergence.
    if (!r.finite && r.loss_scale == 0 && config.evidence.stop_on_divergence)
      return failed_precondition("step {}: non-finite gradients (norm {}); no update was applied", s, r.grad_norm);
    if (checkpoint_due(s + 1)) SP_RETURN_IF_ERROR(save_at(run, s + 1, ckpt_options));
  }
  summary.tokens_per_second = tokens_seen / run_clock.seconds();
  return Status();
}

}  // namespace sp::parallel::train_detail
