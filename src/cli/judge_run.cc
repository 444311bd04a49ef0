// `shardproof judge` on a finished recording, and `--follow` on one being recorded (cli/judge_run.h).
#include "cli/judge_run.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/compare.h"
#include "judge/criteria.h"
#include "judge/reference.h"
#include "judge/replay.h"
#include "report/render.h"

namespace sp::cli {
namespace {

// The steps a judge following the run judged and whose gradients it discarded: their rows of judge/steps.jsonl.
Result<std::map<int64_t, judge::StepResult>> judged_steps(const judge::Recording& rec) {
  std::map<int64_t, judge::StepResult> out;
  if (rec.consumed().empty()) return out;
  const std::string rel = judge::judge_file("steps.jsonl");
  auto doc = read_jsonl_file(rec.path(rel));
  if (!doc.ok())
    return invalid_argument("recording '{}': files were judged and discarded ({}), but {} cannot be read: {}",
                            rec.dir(), judge::judge_file("consumed.jsonl"), rel, doc.status().message());
  for (size_t i = 0; i < doc->records.size(); ++i) {
    SP_ASSIGN_OR_RETURN(judge::StepResult r,
                        judge::step_result_from_json(doc->records[i], fmt::format("{}:{}", rel, doc->line_numbers[i])));
    for (int rank = 0; rank < rec.contract().world; ++rank)
      if (rec.consumed().count(rec.grads_file(r.step, rank))) out[r.step] = r;
  }
  for (int64_t s = 0; s < rec.contract().steps; ++s)
    for (int rank = 0; rank < rec.contract().world; ++rank)
      if (rec.consumed().count(rec.grads_file(s, rank)) && !out.count(s))
        return invalid_argument("recording '{}': step {}'s gradients were discarded but {} holds no row of it",
                                rec.dir(), s, rel);
  return out;
}

// The judgement of a finished recording: every view, the files under DIR/judge/, the summary printed.
}  // namespace

Result<int> judge_finished(const std::string& dir, const std::map<int64_t, judge::StepResult>* judged) {
  SP_ASSIGN_OR_RETURN(const judge::Recording rec, judge::Recording::open(dir));
  SP_ASSIGN_OR_RETURN(std::unique_ptr<judge::JudgeReference> own, judge::JudgeReference::make(rec));
  judge::JudgeReference& reference = *own;
  SP_RETURN_IF_ERROR(reference.check_batches());
  std::map<int64_t, judge::StepResult> kept;
  if (judged == nullptr) {
    SP_ASSIGN_OR_RETURN(kept, judged_steps(rec));
    judged = &kept;
  }
  SP_ASSIGN_OR_RETURN(
      const judge::JudgeContext context,
      judge::JudgeContext::make(
          rec, [&](int64_t step, const judge::ParamsFn& p, int64_t skip) { return reference(step, p, skip); }, judged));
  // The assembled records first: they must be what the engine's strict reader accepts
  // (docs/formats/checksums.md), or nothing is judged. Every file goes under DIR/judge/, the judge's own.
  SP_RETURN_IF_ERROR(make_directories(rec.path(judge::kJudgeDir)));
  const std::string checksums = rec.path(judge::judge_file(evidence::kChecksumsFile));
  SP_RETURN_IF_ERROR(write_file_atomic(checksums, context.assembly.checksums_jsonl));
  if (auto read = evidence::read_checksums(checksums); !read.ok()) {
    std::remove(checksums.c_str());
    return invalid_argument("recording '{}' refused: its assembled checksums are not valid records: {}", rec.dir(),
                            read.status().message());
  }
  const judge::JudgeVerdict verdict = judge::derive_judgement(context);
  std::string summary;
  for (const auto& [name, bytes] : judge::judge_derived_files(verdict, context)) {
    if (name == judge::judge_file(evidence::kSummaryFile)) summary = bytes;
    if (name != judge::judge_file(evidence::kChecksumsFile))
      SP_RETURN_IF_ERROR(write_file_atomic(rec.path(name), bytes));
  }
  auto problems = report::write_report(rec.dir());
  if (!problems.ok()) return problems.status();
  std::printf(
      "%s\n%s\n", summary.c_str(),
      fmt::format("judge: {} ({}, {}, {})", verdict.verdict(), rec.path(judge::judge_file(evidence::kSummaryFile)),
                  rec.path(judge::judge_file(evidence::kGateFile)), rec.path(judge::judge_file(evidence::kReportFile)))
          .c_str());
  return verdict.exit_code();
}

namespace {

// One line of the step just judged: what each view saw, and the seconds its judgement took.
std::string step_line(const judge::StepResult& r, double seconds) {
  if (!r.checked) return fmt::format("step {} ({:.2f} s): not checked: {}", r.step, seconds, r.unchecked);
  double worst = 0;
  int64_t bitwise = 0;
  for (const judge::TensorError& e : r.grads) worst = std::max(worst, e.nonfinite ? INFINITY : e.rel / r.tol.grad);
  for (const judge::TensorError& e : r.update) bitwise += e.bitwise ? 1 : 0;
  return fmt::format(
      "step {} ({:.2f} s): gradients worst {:.3g} of the tolerance, update {} of {} tensors bit for "
      "bit{}{}",
      r.step, seconds, worst, bitwise, r.update.size(), r.grad_pattern.empty() ? "" : "; " + r.grad_pattern,
      r.update_pattern.empty() ? "" : "; " + r.update_pattern);
}

}  // namespace

Result<int> judge_follow(const std::string& dir, bool keep, double timeout_s) {
  using clock = std::chrono::steady_clock;
  auto last = clock::now();
  const auto waited = [&] { return std::chrono::duration<double>(clock::now() - last).count(); };
  // The recorder's rank 0 writes contract.json and topology.json when the run starts.
  while (!path_exists(dir + "/contract.json") || !path_exists(dir + "/topology.json")) {
    if (waited() > timeout_s)
      return invalid_argument("'{}': no contract.json and topology.json after {:.0f} s: no recording started there",
                              dir, timeout_s)
          .with_hint("start the run with shardproof_torch.Recorder(out=DIR), then follow it");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  SP_ASSIGN_OR_RETURN(judge::Recording rec, judge::Recording::follow(dir));
  const judge::RecordingContract& c = rec.contract();
  SP_ASSIGN_OR_RETURN(std::unique_ptr<judge::JudgeReference> reference, judge::JudgeReference::make(rec));
  auto steps = std::make_unique<judge::StepJudge>(
      rec, [&](int64_t step, const judge::ParamsFn& p, int64_t skip) { return (*reference)(step, p, skip); });
  SP_RETURN_IF_ERROR(make_directories(rec.path(judge::kJudgeDir)));
  const std::string rows_path = rec.path(judge::judge_file("steps.jsonl")),
                    consumed_path = rec.path(judge::judge_file("consumed.jsonl"));
  SP_RETURN_IF_ERROR(write_file(rows_path, ""));
  SP_RETURN_IF_ERROR(write_file(consumed_path, ""));
  // Appended line by line, flushed: a follower killed mid-run leaves whole lines behind.
  const auto append = [](const std::string& path, const std::string& line) -> Status {
    std::FILE* f = std::fopen(path.c_str(), "ab");
    if (f == nullptr) return internal_error("cannot append to {}", path);
    const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fflush(f) == 0;
    return std::fclose(f) == 0 && ok ? Status() : internal_error("cannot append to {}", path);
  };
  judge::Assembly as;
  std::map<int64_t, judge::StepResult> judged;
  int64_t s = 0;
  last = clock::now();
  for (;;) {
    // The seal is looked at before the steps: a rank seals after its last step, so a seal seen here means that
    // refresh() sees every step. The other order lost the last step when it completed and was sealed between the
    // two looks (the 105.8 M-parameter run of docs/performance.md: step 49 of 50 left to the last judgement,
    // which cannot judge it without the replay's state, so UNVERIFIED).
    const bool sealed = rec.sealed();
    SP_ASSIGN_OR_RETURN(const int64_t complete, rec.refresh());
    if (s < complete) {
      const auto t0 = clock::now();
      SP_RETURN_IF_ERROR(judge::assemble_step(rec, s, as));
      judge::StepResult r;
      SP_RETURN_IF_ERROR(steps->step(as, s, r));
      SP_RETURN_IF_ERROR(append(rows_path, judge::step_result_json(r).dump() + "\n"));
      // The step's gradients (and square roots) are judged: their SHA-256 goes on record, the files go.
      for (int rank = 0; rank < c.world; ++rank)
        for (const std::string& rel : {rec.grads_file(s, rank), judge::recording_step_file(judge::kSqrtDir, s, rank)}) {
          if (!path_exists(rec.path(rel))) continue;
          SP_ASSIGN_OR_RETURN(const std::string sha, sha256_file(rec.path(rel)));
          SP_RETURN_IF_ERROR(append(consumed_path, nlohmann::json{{"file", rel}, {"sha256", sha}}.dump() + "\n"));
          if (!keep) std::remove(rec.path(rel).c_str());
        }
      std::printf("%s\n", step_line(r, std::chrono::duration<double>(clock::now() - t0).count()).c_str());
      std::fflush(stdout);
      judged[s] = std::move(r);
      ++s;
      last = clock::now();
      continue;
    }
    if (sealed) break;  // every rank finished: the last judgement reads the sealed recording
    if (waited() > timeout_s)
      return invalid_argument("'{}': no new step for {:.0f} s after step {} (of {}), and not every rank has sealed",
                              dir, timeout_s, s - 1, c.steps)
          .with_hint("the run stopped or hangs; `shardproof judge DIR` judges what was sealed once it finishes");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (keep) judged.clear();  // the gradients are still there: the last judgement reads them
  steps.reset();             // the replay's state and the engine go before the last judgement makes its own
  reference.reset();
  return judge_finished(dir, keep ? nullptr : &judged);
}

}  // namespace sp::cli
