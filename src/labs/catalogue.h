// The lab catalogue as data: configs/labs/catalogue.toml (format: docs/formats/labs.md) read into
// `Lab` records. Strict: an unknown key, a missing or mistyped field, a duplicate lab key, a lab that
// is unavailable without a reason, or a `closest` that names no runnable lab is an error naming the
// file, the line, the lab and the field (exit 2 from `lab list` / `lab show` / `lab run`).
// Two kinds of lab: a proof lab (kind "prove", the default) runs the proof protocol on a preset with one
// fault; a plan lab (kind "plan") evaluates one strategy with the planner on clusters × placements; a judge
// lab (kind "judge") records a PyTorch training script twice, as it is and with one planted bug, and judges
// both (`shardproof judge`, docs/judge.md). Each kind has its own fields; a field of another kind is an error.
// Not the labs' meaning: whether a lab's run and fault are valid is labs/lab_run.h (validate_lab), checked by
// tests/unit/labs_test.cc for every lab of the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "labs/plan_lab_case.h"

namespace sp::labs {

enum class LabKind { kProve, kPlan, kJudge };

// One "what to observe" line: its prose and the claims that make it checkable against the lab's bundle
// (labs/claims.h evaluates them; `shardproof lab check KEY DIR`). At least one claim per observation.
struct Observation {
  std::string text{};
  std::vector<std::string> checks{};
};

// A variation of a proof lab: more --set overrides on the lab's run and the observations of that run, with
// claims of their own (`lab run KEY --variation NAME`, or --set equal to its sets; `lab check KEY DIR
// --variation NAME`). Its world and fault are the lab's unless it names its own.
struct Variation {
  std::string name{};                  // "sp": lowercase letters, digits and '-', unique in its lab
  std::vector<std::string> sets{};     // applied after the lab's sets
  int world = 0;                       // ranks of the varied run (0: the lab's)
  std::string fault{};                 // the varied run's fault (empty: the lab's)
  std::vector<Observation> observe{};  // what the varied bundle shows, with its claims
};

// One lab: a run (preset + --set overrides), one catalogue fault, and what a learner reads next to the
// bundle; or, for a plan lab, the planner's contrast (`plan`). Unavailable labs (a section this engine cannot
// demonstrate) have no run, a reason and the closest runnable labs.
struct Lab {
  std::string key{};        // "LSL-D"
  std::string section{};    // "4.2.1"
  std::string title{};      // "Data parallelism"
  std::string mechanism{};  // what the section teaches and how this run shows it (one paragraph)
  LabKind kind = LabKind::kProve;
  std::string preset = "tiny";
  std::string model_config{};                     // a Hugging Face config.json relative to the root, or ""
  std::string deepspeed{};                        // a DeepSpeed ds_config.json relative to the root, or ""
  std::vector<std::string> sets{};                // --set overrides, in order, applied to the preset
  int world = 0;                                  // ranks: dp·tp·pp of the run (0 when unavailable)
  std::string fault{};                            // catalogue fault NAME@step:rank; a judge lab: the script's bug
  PlanLabSpec plan{};                             // plan labs only (its grid parsed from its strategy)
  std::string script{};                           // judge labs: the recording script, relative to the root
  std::vector<std::string> script_args{};         // judge labs: its arguments in both runs (`args`)
  std::vector<Observation> observe{};             // which evidence to read, what it shows, its claims
  std::vector<std::string> cannot_extrapolate{};  // lab-specific limits (common_limits hold for all)
  bool available = true;
  bool is_plan() const { return kind == LabKind::kPlan; }
  bool is_judge() const { return kind == LabKind::kJudge; }
  std::string unavailable_reason{};     // why the section cannot be demonstrated here
  std::vector<std::string> closest{};   // unavailable labs: the runnable labs nearest to the section
  std::vector<Variation> variations{};  // proof labs: variations with their own claims
  std::string variation{};              // the variation this record is (lab_variation), empty for the lab itself

  // The variation called `name`; kNotFound listing the lab's variations.
  Result<const Variation*> find_variation(std::string_view name) const;
  // The variation whose sets are exactly `sets` (any order), or null.
  const Variation* variation_of_sets(const std::vector<std::string>& sets) const;
};

// The lab as the variation runs it: its sets appended, its world and fault if it names them, its observations
// in place of the lab's, `variation` set to its name and no variations of its own.
Lab lab_variation(const Lab& lab, const Variation& v);

struct LabCatalogue {
  std::string path{};                        // the file it was read from
  std::vector<Lab> labs{};                   // in file order (the book's section order, A … O)
  std::vector<std::string> common_limits{};  // limits that hold for every lab (CPU, one host, fp32, ...)
  std::string evaluation{};                  // the independent evaluation every lab's gate applies

  // "LSL-D", "lsl-d" or "D". Unknown keys: kNotFound listing every key.
  Result<const Lab*> find(std::string_view key) const;
};

// The catalogue file's format name and version (docs/formats/labs.md).
inline constexpr std::string_view kLabCatalogueFormat = "shardproof-labs";
inline constexpr int kLabCatalogueVersion = 1;

// `root`/configs/labs/catalogue.toml: the catalogue of a source tree (cli/run_setup.h default_root()).
std::string lab_catalogue_path(const std::string& root);
// Reads and validates a catalogue file. Errors are kInvalidArgument (kNotFound for a missing file),
// each naming the file and, where there is one, the line, the lab and the field, with a hint.
Result<LabCatalogue> load_lab_catalogue(const std::string& path);

}  // namespace sp::labs
