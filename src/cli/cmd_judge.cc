// `shardproof judge DIR`: judges a PyTorch run recorded with python/shardproof_torch against the single-device
// reference (docs/judge.md). Reads the recording strictly (judge/recording.h: a recording that is
// incomplete, from another model or edited is refused, exit 2), runs the engine at dp = tp = pp = 1 on every
// anchor (judge/reference.h), derives the gate (judge/criteria.h) and writes the assembled
// checksums.jsonl, gate.json, summary.md, first_divergence.json and report.html into DIR.
// Exit 0 PASS, 1 FAIL, 2 usage or a refused recording.
// `shardproof judge --summarize FILE.safetensors` prints the engine's checksum record of every F32 tensor in
// the file: the recorder's digest is tested against it (tests/judge/).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "ckpt/safetensors.h"
#include "cli/command.h"
#include "comm/mpi_scope.h"
#include "core/file_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/compare.h"
#include "evidence/tensor_summary.h"
#include "judge/criteria.h"
#include "judge/reference.h"
#include "report/render.h"

namespace sp::cli {
namespace {

int summarize(const std::string& file) {
  auto f = ckpt::SafetensorsReader::open(file);
  if (!f.ok()) return report_status(f.status());
  for (const ckpt::SafetensorsEntry& e : f->tensors()) {
    if (e.dtype != DType::kF32) continue;
    std::vector<float> x(static_cast<size_t>(shape_numel(e.shape)));
    if (Status s = f->read(e, x.data()); !s.ok()) return report_status(s);
    evidence::TensorSummary s;
    s.add_contiguous(x.data(), static_cast<int64_t>(x.size()), 0);
    nlohmann::json j = s.to_json();
    j["tensor"] = e.name;
    j["numel"] = shape_numel(e.shape);
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

Result<bool> judge(const std::string& dir) {
  SP_ASSIGN_OR_RETURN(const judge::Recording rec, judge::Recording::open(dir));
  SP_ASSIGN_OR_RETURN(std::unique_ptr<judge::JudgeReference> reference, judge::JudgeReference::make(rec));
  SP_RETURN_IF_ERROR(reference->check_batches());
  SP_ASSIGN_OR_RETURN(
      const judge::JudgeContext context,
      judge::JudgeContext::make(rec, [&](int64_t step, const judge::AnchorState& a) { return (*reference)(step, a); }));
  // The assembled records first: they must be what the engine's strict reader accepts
  // (docs/formats/checksums.md), or nothing is judged.
  const std::string checksums = rec.path(evidence::kChecksumsFile);
  SP_RETURN_IF_ERROR(write_file_atomic(checksums, context.assembly.checksums_jsonl));
  if (auto read = evidence::read_checksums(checksums); !read.ok()) {
    std::remove(checksums.c_str());
    return invalid_argument("recording '{}' refused: its assembled checksums are not valid records: {}", rec.dir(),
                            read.status().message());
  }
  const judge::JudgeVerdict verdict = judge::derive_judgement(context);
  for (const auto& [name, bytes] : judge::judge_derived_files(verdict, context))
    if (name != evidence::kChecksumsFile) SP_RETURN_IF_ERROR(write_file_atomic(rec.path(name), bytes));
  auto problems = report::write_report(rec.dir());
  if (!problems.ok()) return problems.status();
  std::printf(
      "%s\n%s\n", verdict.gate.summary_markdown(verdict.title, verdict.notes).c_str(),
      fmt::format("judge: {} ({}, {}, {})", verdict.gate.passed() ? "PASS" : "FAIL", rec.path(evidence::kSummaryFile),
                  rec.path(evidence::kGateFile), rec.path(evidence::kReportFile))
          .c_str());
  return verdict.gate.passed();
}

}  // namespace

void register_judge(CLI::App& app, CommandResult& result) {
  struct Opts {
    std::string dir, summarize;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "judge",
      "Judge a PyTorch run recorded with shardproof_torch against the single-device reference (docs/judge.md)");
  cmd->add_option("DIR", o->dir, "The recording (shardproof_torch.Recorder's out directory)");
  cmd->add_option("--summarize", o->summarize,
                  "Print the engine's checksum record of every F32 tensor of a safetensors file, and exit");
  cmd->callback([o, &result] {
    if (!o->summarize.empty()) {
      result.exit_code = summarize(o->summarize);
      return;
    }
    if (o->dir.empty()) {
      result.exit_code = report_status(invalid_argument("judge needs DIR, the recording to judge"));
      return;
    }
    comm::MpiScope mpi(nullptr, nullptr);
    if (mpi.world_size() != 1) {
      result.exit_code = report_status(invalid_argument("shardproof judge runs on one rank, got {}", mpi.world_size()));
      return;
    }
    auto passed = judge(o->dir);
    result.exit_code = passed.ok() ? (*passed ? 0 : 1) : report_status(passed.status());
  });
}

}  // namespace sp::cli
