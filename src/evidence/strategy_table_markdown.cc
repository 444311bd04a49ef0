// The strategy table as Markdown (strategy_table.h): one section per view of the rows, each a table whose
// columns say what was measured and where it comes from.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "evidence/strategy_table.h"

namespace sp::evidence {
namespace {

std::string human_bytes(int64_t b) {
  if (b < 0) return "–";
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024.0);
  return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1024.0 * 1024.0));
}

// Text safe inside one Markdown table cell: no line breaks, no unescaped '|'.
std::string cell_text(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') {
      while (i + 1 < s.size() && (s[i + 1] == ' ' || s[i + 1] == '-')) ++i;  // "\n  - " list items
      out += !out.empty() && out.back() == ':' ? " " : "; ";
    } else if (s[i] == '|') {
      out += "\\|";
    } else {
      out += s[i];
    }
  }
  return out;
}

// The schedule cell's recompute note: ", recompute" (full, as the compare token) or ", selective".
std::string recompute_note(const std::string& r) {
  if (r == "full") return ", recompute";
  if (r == "selective") return ", selective";
  return "";
}

std::string mib(int64_t b) { return fmt::format("{:.2f}", static_cast<double>(b) / (1024.0 * 1024.0)); }

// Equivalence against the dp1 reference, the losses and the verdict per row.
std::string equivalence_section(const std::vector<StrategyRow>& rows) {
  std::string out = "\n## Equivalence against dp1 and losses\n\n";
  out +=
      "| strategy | world | dp | tp | pp | zero | schedule | equivalence | max rel diff loss / param / grad | "
      "final loss | eval loss | verdict |\n|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---|\n";
  for (const StrategyRow& r : rows) {
    if (!r.error.empty()) {
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | – | – | – | – | ERROR: {} |\n", r.label, r.world, r.dp,
                         r.tp, r.pp, r.zero, r.schedule.empty() ? "–" : r.schedule, cell_text(r.error));
      continue;
    }
    const std::string sched =
        r.pp > 1 ? (r.schedule == "interleaved" ? fmt::format("interleaved v{}", r.virtual_stages) : r.schedule) : "–";
    const std::string diffs = r.equivalence == "reference"
                                  ? "–"
                                  : fmt::format("{:.2g} / {:.2g} / {:.2g}", r.max_rel_loss, r.max_rel_param,
                                                std::max(r.max_rel_grad_first, r.max_rel_grad_later));
    const std::string eval = r.has_eval_loss ? fmt::format("{:.4f}", r.final_eval_loss) : "–";
    std::string verdict = r.ok() ? "ok" : "FAIL";
    if (!r.ok()) {
      if (r.equivalence == "divergent")
        verdict += ": divergent, " + r.first_divergence;
      else if (!r.trace_consistent || (r.prediction_found && !r.traced_equals_predicted))
        verdict += ": trace, " + r.first_trace_problem;
      else if (!r.ledger_equal)
        verdict += ": ledger measured ≠ predicted";
      else if (r.exit_code != 0)
        verdict += fmt::format(": exit code {}", r.exit_code);
    }
    out +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {}{}{} | {} | {} | {:.4f} | {} | {} |\n", r.label, r.world, r.dp,
                    r.tp, r.pp, r.zero, sched, recompute_note(r.recompute), r.reduction == "fast" ? ", fast" : "",
                    r.equivalence, diffs, r.final_loss, eval, cell_text(verdict));
  }

  return out;
}

// Step time and its split from the timeline, with the pipeline bubble against its theory.
std::string timing_section(const std::vector<StrategyRow>& rows) {
  std::string out;
  out += "\n## Step time and its split (timeline; bubble = 1 − compute / pipeline span)\n\n";
  out +=
      "| strategy | step s (median) | × dp1 | fwd+bwd s (rank 0) | pipeline span ms | compute | p2p | "
      "bubble measured (stage min–max) | bubble theory |\n|---|---:|---:|---:|---:|---:|---:|---|---:|\n";
  for (const StrategyRow& r : rows) {
    if (!r.error.empty()) continue;
    const BubbleReport& b = r.bubble;
    out += fmt::format(
        "| {} | {:.3f} | {} | {:.3f} | {} | {} | {} | {} | {} |\n", r.label, r.step_s,
        r.ratio_vs_ref > 0 ? fmt::format("{:.2f}", r.ratio_vs_ref) : "–", r.compute_s,
        r.has_bubble ? fmt::format("{:.1f}", b.span_ms) : "–",
        r.has_bubble ? fmt::format("{:.0f}%", 100 * b.compute_fraction) : "–",
        r.has_bubble ? fmt::format("{:.0f}%", 100 * b.comm_fraction) : "–",
        r.has_bubble ? fmt::format("{:.3f} ({:.3f}–{:.3f})", b.measured, b.measured_min, b.measured_max) : "–",
        r.has_bubble ? fmt::format("{:.3f}", b.theory) : "–");
  }

  return out;
}

// Bytes per training step by axis: traced, and the prediction where it differs.
std::string axis_bytes_section(const std::vector<StrategyRow>& rows) {
  std::string out;
  std::set<std::string> axes;
  for (const StrategyRow& r : rows)
    for (const auto& [a, b] : r.axis_bytes) axes.insert(a);
  out += "\n## Bytes per training step by axis (traced; \"≠ P\" where the prediction differs)\n\n| strategy | trace |";
  for (const std::string& a : axes) out += " " + a + " |";
  out += " traced = predicted |\n|---|---|";
  for (size_t i = 0; i < axes.size(); ++i) out += "---:|";
  out += "---|\n";
  for (const StrategyRow& r : rows) {
    if (!r.error.empty()) continue;
    out += fmt::format("| {} | {} |", r.label,
                       !r.trace_found       ? "missing"
                       : r.trace_consistent ? "consistent"
                                            : "MISMATCH");
    for (const std::string& a : axes) {
      auto it = r.axis_bytes.find(a);
      if (it == r.axis_bytes.end()) {
        out += " – |";
        continue;
      }
      const StepBytes& b = it->second;
      out += " " + human_bytes(b.traced);
      if (b.predicted >= 0 && b.predicted != b.traced) out += " ≠ P " + human_bytes(b.predicted);
      out += " |";
    }
    out += r.prediction_found
               ? (r.traced_equals_predicted ? " yes |" : fmt::format(" NO ({} cells) |", r.prediction_mismatches))
               : " no prediction |";
    out += "\n";
  }

  return out;
}

// Bytes per rank: the busiest and the least busy rank of each row.
std::string rank_bytes_section(const std::vector<StrategyRow>& rows) {
  std::string out;
  // Per rank: the busiest and the least busy (a parameter server against its workers, docs/ps.md).
  out +=
      "\n## Bytes per rank per training step (comm_predicted.json, equal to the trace where the column above says "
      "yes)\n\n| strategy | busiest rank | its bytes | least busy rank | its bytes | busiest / least |\n"
      "|---|---|---:|---|---:|---:|\n";
  for (const StrategyRow& r : rows) {
    if (!r.error.empty() || r.rank_bytes.empty()) continue;
    auto label = [&](int rank) {
      for (const RankMemory& m : r.memory)
        if (m.rank == rank) return fmt::format("{} ({})", rank, m.coords);
      return std::to_string(rank);
    };
    auto [lo, hi] = std::minmax_element(r.rank_bytes.begin(), r.rank_bytes.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", r.label, label(hi->first), human_bytes(hi->second),
                       label(lo->first), human_bytes(lo->second),
                       lo->second > 0 ? fmt::format("{:.2f}", static_cast<double>(hi->second) / lo->second) : "–");
  }

  return out;
}

// Peak memory per rank and category, and whether the ledger's measurement equals its prediction.
std::string memory_section(const std::vector<StrategyRow>& rows) {
  std::string out;
  static const char* kCats[] = {"param", "grad", "optim", "activation", "comm", "workspace", "io"};
  out +=
      "\n## Peak memory per rank, MiB (largest rank per category; measured = predicted checked on every rank)\n\n"
      "| strategy | param | grad | optim | activation | comm | workspace | io | total | measured = predicted |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const StrategyRow& r : rows) {
    if (!r.error.empty()) continue;
    out += "| " + r.label + " |";
    for (const char* c : kCats) {
      int64_t peak = -1;
      for (const RankMemory& m : r.memory) {
        auto it = m.categories.find(c);
        if (it != m.categories.end()) peak = std::max(peak, it->second.measured_peak);
      }
      out += peak < 0 ? " – |" : " " + mib(peak) + " |";
    }
    int64_t total = 0;
    for (const RankMemory& m : r.memory) total = std::max(total, m.total.measured_peak);
    out += " " + mib(total) + " | " + (!r.ledger_found ? "no ledger" : r.ledger_equal ? "yes" : "NO") + " |\n";
  }
  return out;
}

}  // namespace

std::string strategy_table_markdown(const std::vector<StrategyRow>& rows, const std::string& title) {
  return "# " + title + "\n\n" + equivalence_section(rows).substr(1) + timing_section(rows) + axis_bytes_section(rows) +
         rank_bytes_section(rows) + memory_section(rows);
}

}  // namespace sp::evidence
