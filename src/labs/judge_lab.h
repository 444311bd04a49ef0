// Judge labs (kind = "judge" in configs/labs/catalogue.toml, docs/labs.md §LSL-P): a PyTorch training script
// recorded with python/shardproof_torch is run twice, as it is into DIR/run/ and with one of its planted bugs
// (`--bug FAULT`) into DIR/fault/, and each recording is judged by this binary's own `shardproof judge`
// (docs/judge.md; a child process, nothing of the judge is repeated here). The lab's claims are then evaluated
// on DIR by cli/cmd_lab.cc as any lab's. The script's command line is the catalogue's: SCRIPT ARGS --world W
// --out DIR/run --quiet [--bug FAULT], run by the host's Python (JudgeLabHost: the CLI chooses it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "labs/catalogue.h"

namespace sp::labs {

// What a judge lab needs from the process that runs it: the CLI owns the environment and child processes
// (cli/cmd_lab.cc fills this in).
struct JudgeLabHost {
  std::string python;  // the Python that runs the script ($SHARDPROOF_PYTHON, else /usr/bin/python3, else python3)
  std::string self;    // this binary: `self judge DIR` judges each recording
  // Runs argv as a job with stdout and stderr to the log file (inherited when empty); its exit code, 127 when
  // it cannot start (cli/run_setup.h run_job).
  std::function<int(std::vector<std::string>, const std::string&)> run_job;
};

// The script's command for one recording into `out` under `python`, with `bug` planted unless it is empty.
std::vector<std::string> judge_lab_command(const std::string& python, const Lab& lab, const std::string& root,
                                           const std::string& out, const std::string& bug);

// What `lab run` checks before running anything: the script exists under `root`, the lab has no --set.
Status validate_judge_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets);

// `lab run KEY --out DIR` for a judge lab: checks that the Python imports torch (else kInvalidArgument naming the
// package and how to install it), records and judges DIR/run and DIR/fault, writes DIR/lab.json (the lab, as a
// proof lab's prove.json carries it). True when the run PASSes and the fault run FAILs; an error (exit 2) for a
// lab that does not validate, a missing torch or a DIR that already holds files.
Result<bool> run_judge_lab(const Lab& lab, const std::string& root, const std::string& out, const JudgeLabHost& host);

}  // namespace sp::labs
