// `shardproof judge DIR`: judges a PyTorch run recorded with python/shardproof_torch against the single-device
// reference (docs/judge.md). Reads the recording strictly (judge/recording.h: a recording that is
// incomplete, from another model or edited is refused, exit 2), runs the engine at dp = tp = pp = 1 on every
// step (judge/reference.h, judge/replay.h), derives the gate (judge/criteria.h) and writes, under DIR/judge/ and
// nowhere else, the assembled checksums.jsonl, gate.json, summary.md, first_divergence.json, steps.jsonl and
// report.html. Exit 0 PASS, 1 FAIL, 2 usage or a refused recording, 3 UNVERIFIED (a step not checked).
// `shardproof judge --follow DIR` judges each step while the run records it (cli/judge_run.h).
// `shardproof judge --summarize FILE.safetensors` prints the engine's checksum record of every F32 tensor in
// the file: the recorder's digest is tested against it (tests/judge/).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "ckpt/safetensors.h"
#include "cli/command.h"
#include "cli/judge_run.h"
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

}  // namespace

void register_judge(CLI::App& app, CommandResult& result) {
  struct Opts {
    std::string dir, summarize;
    bool follow = false, keep = false;
    double timeout_s = 600;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "judge",
      "Judge a PyTorch run recorded with shardproof_torch against the single-device reference (docs/judge.md); exit 0 "
      "PASS, 1 FAIL, 2 refused, 3 UNVERIFIED");
  cmd->add_option("DIR", o->dir, "The recording (shardproof_torch.Recorder's out directory)");
  cmd->add_flag(
      "--follow", o->follow,
      "Judge each step as the running recorder completes it, then discard its gradients (judge/consumed.jsonl "
      "says what was discarded); the last judgement when every rank has sealed (docs/judge.md §5)");
  cmd->add_flag("--keep", o->keep, "With --follow: keep the gradients of the steps judged");
  cmd->add_option("--follow-timeout", o->timeout_s, "With --follow: give up after this many seconds without a step")
      ->check(CLI::PositiveNumber);
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
    auto code = o->follow ? judge_follow(o->dir, o->keep, o->timeout_s) : judge_finished(o->dir, nullptr);
    result.exit_code = code.ok() ? *code : report_status(code.status());
  });
}

}  // namespace sp::cli
