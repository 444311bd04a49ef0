// The lab catalogue as a learner reads it (docs/labs.md): `lab list`, `lab show KEY` (what a lab runs, the
// command that runs it and the `prove`/`plan`/script commands it is the same as, what to observe with its
// claims, what it cannot be extrapolated to) and why an unavailable lab cannot run. Text only, from the
// catalogue's data (labs/catalogue.h); nothing here validates or runs a lab (labs/lab_run.h does).
#pragma once

#include <string>

#include "labs/catalogue.h"

namespace sp::labs {

// Text for `lab list`: one line per lab (key, section, ranks, fault or "unavailable", title).
std::string lab_list_text(const LabCatalogue& catalogue);
// Text for `lab show KEY`: everything about one lab of `catalogue`, including the command that runs it,
// the catalogue's evaluation and common limits. `python` is the Python a judge lab's script runs under
// (labs/judge_lab.h JudgeLabHost), shown in its commands.
std::string lab_show_text(const LabCatalogue& catalogue, const Lab& lab, const std::string& python);
// What `lab run` prints for an unavailable lab (reason and the closest runnable labs).
std::string lab_unavailable_text(const LabCatalogue& catalogue, const Lab& lab);

}  // namespace sp::labs
