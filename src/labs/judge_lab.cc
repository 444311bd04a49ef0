// Running a judge lab (labs/judge_lab.h): the script recorded twice, each recording judged by this binary's
// `shardproof judge` in a child process (the host's run_job), the lab written next to them.
#include "labs/judge_lab.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/file_io.h"
#include "evidence/bundle_paths.h"
#include "labs/lab_run.h"

namespace sp::labs {
namespace {

// Progress for the learner, in order with the children's output (named apart from cmd_lab.cc's print: unity build).
void say(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The first divergence's line of a judged recording ("first divergence: ..." of first_divergence.json).
std::string first_divergence_line(const std::string& dir) {
  Result<std::string> text = read_file(dir + "/judge/" + std::string(evidence::kFirstDivergenceFile));
  if (!text.ok()) return "no " + std::string(evidence::kFirstDivergenceFile);
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_object() && j.contains("line") && j["line"].is_string() ? j["line"].get<std::string>()
                                                                      : "first divergence: (no line)";
}

}  // namespace

std::vector<std::string> judge_lab_command(const std::string& python, const Lab& lab, const std::string& root,
                                           const std::string& out, const std::string& bug) {
  std::vector<std::string> argv = {python, root + "/" + lab.script};
  argv.insert(argv.end(), lab.script_args.begin(), lab.script_args.end());
  argv.insert(argv.end(), {"--world", std::to_string(lab.world), "--out", out, "--quiet"});
  if (!bug.empty()) argv.insert(argv.end(), {"--bug", bug});
  return argv;
}

Status validate_judge_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets) {
  if (!extra_sets.empty())
    return invalid_argument("lab {} is a judge lab: --set applies to a proof lab's run configuration", lab.key)
        .with_hint("vary the recording with the script's own flags (the commands `lab show " + lab.key + "` prints)");
  return check_input_file(fmt::format("lab {}: script", lab.key), root + "/" + lab.script);
}

Result<bool> run_judge_lab(const Lab& lab, const std::string& root, const std::string& out, const JudgeLabHost& host) {
  SP_RETURN_IF_ERROR(validate_judge_lab(lab, root, {}));
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_empty(out, ec))
    return invalid_argument("--out '{}' already holds files", out)
        .with_hint("a lab writes into a new or empty directory; choose another --out");
  if (host.run_job({host.python, "-c", "import torch"}, "/dev/null") != 0)
    return invalid_argument("lab {} records a PyTorch run, and {} cannot import torch", lab.key, host.python)
        .with_hint(
            "install PyTorch for Debian's Python 3: apt-get install python3-torch (scripts/install-deps.sh "
            "installs it), or set SHARDPROOF_PYTHON to a Python that imports torch");
  SP_RETURN_IF_ERROR(make_directories(out));
  const nlohmann::json lab_json = lab_bundle_json(lab);
  SP_RETURN_IF_ERROR(write_file_atomic(out + "/" + std::string(evidence::kLabFile), lab_json.dump(2) + "\n"));
  say(
      fmt::format("{} §{} {}: {} on {} processes, recorded as it is ({}/run) and with the bug {} planted "
                  "({}/fault), each judged by `shardproof judge`\n",
                  lab.key, lab.section, lab.title, lab.script, lab.world, out, lab.fault, out));
  int judged[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    const std::string name = i == 0 ? "run" : "fault", dir = out + "/" + name;
    const std::vector<std::string> record = judge_lab_command(host.python, lab, root, dir, i == 0 ? "" : lab.fault);
    say(fmt::format("\n== {}: {}\n", name, fmt::join(record, " ")));
    auto t0 = std::chrono::steady_clock::now();
    if (const int rc = host.run_job(record, ""); rc != 0) {
      say(fmt::format("{}: the script exited {}: nothing to judge\n", name, rc));
      return false;
    }
    say(fmt::format("{}: recorded in {:.1f} s; shardproof judge {}\n", name, seconds_since(t0), dir));
    t0 = std::chrono::steady_clock::now();
    judged[i] = host.run_job({host.self, "judge", dir}, "");
    say(fmt::format("{}: judged in {:.1f} s, exit {} ({}); {}\n", name, seconds_since(t0), judged[i],
                    judged[i] == 0 ? "PASS" : (judged[i] == 1 ? "FAIL" : "refused"), first_divergence_line(dir)));
  }
  const bool ok = judged[0] == 0 && judged[1] == 1;
  say(fmt::format("\nverdict: {} (the run as it is must PASS, the run with {} must FAIL)\n", ok ? "PASS" : "FAIL",
                  lab.fault));
  // The observations follow, each with its claims checked (cmd_lab.cc).
  say("\nwhat to observe in " + out + " (shardproof lab show " + lab.key + "):\n");
  return ok;
}

}  // namespace sp::labs
