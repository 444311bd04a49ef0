// Judge labs (kind = "judge" in configs/labs/catalogue.toml, docs/labs.md §LSL-P): a PyTorch training script
// recorded with python/shardproof_torch is run twice, as it is into DIR/run/ and with one of its planted bugs
// (`--bug FAULT`) into DIR/fault/, and each recording is judged by this binary's own `shardproof judge`
// (docs/judge.md; a child process, nothing of the judge is repeated here). The lab's claims are then evaluated
// on DIR by cmd_lab.cc as any lab's. The script's command line is the catalogue's: SCRIPT ARGS --world W
// --out DIR/run --quiet [--bug FAULT], run by $SHARDPROOF_PYTHON, else /usr/bin/python3 (Debian's, with
// python3-torch), else python3 on PATH.
#pragma once

#include <string>
#include <vector>

#include "cli/lab_catalogue.h"
#include "core/status.h"

namespace sp::cli {

// The Python that runs a judge lab's script (above).
std::string judge_lab_python();
// The script's command for one recording into `out`, with `bug` planted unless it is empty.
std::vector<std::string> judge_lab_command(const Lab& lab, const std::string& root, const std::string& out,
                                           const std::string& bug);

// What `lab run` checks before running anything: the script exists under `root`, the lab has no --set.
Status validate_judge_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets);

// `lab run KEY --out DIR` for a judge lab: checks that the Python imports torch (else exit 2 naming the package
// and how to install it), records and judges DIR/run and DIR/fault, writes DIR/lab.json (the lab, as a proof
// lab's prove.json carries it). Returns 0 when the run PASSes and the fault run FAILs, 1 otherwise, 2 for a lab
// that does not validate, a missing torch or a DIR that already holds files.
int run_judge_lab(const Lab& lab, const std::string& root, const std::string& out);

}  // namespace sp::cli
