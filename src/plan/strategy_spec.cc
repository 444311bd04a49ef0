// Strategy spec grammar (plan/strategy_spec.h): a token table, one parser, one override builder.
#include "plan/strategy_spec.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace sp::plan {
namespace {

constexpr const char* kValidTokens =
    "dpN, tpN, ppN (N ≥ 1), zeroN (N = 0..3), gpipe, 1f1b, interleaved or interleavedV (V ≥ 2), zbh1 (ZB-H1), "
    "recompute, "
    "selective, "
    "fast, sp (sequence parallelism, with tpN), ps with wN (N ≥ 1 workers) and sN (N ≥ 1 servers)";

// The digits after `prefix` in `tok`, or -1 when `tok` is not prefix + a decimal number.
int number_after(const std::string& tok, const std::string& prefix) {
  if (tok.size() <= prefix.size() || tok.compare(0, prefix.size(), prefix) != 0) return -1;
  int v = -1;
  const char* b = tok.data() + prefix.size();
  const char* e = tok.data() + tok.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || v < 0 || v > 1 << 16) return -1;
  return v;
}

Status bad_token(const std::string& spec, const std::string& tok, const std::string& why) {
  return invalid_argument("strategy '{}': {} '{}'", spec, why, tok)
      .with_hint(fmt::format("valid tokens: {}", kValidTokens));
}

}  // namespace

std::vector<std::string> StrategySpec::overrides() const {
  std::vector<std::string> o = {fmt::format("parallel.dp={}", dp), fmt::format("parallel.tp={}", tp),
                                fmt::format("parallel.pp={}", pp), fmt::format("parallel.zero={}", zero)};
  if (!schedule.empty()) {
    o.push_back("parallel.schedule=" + schedule);
    o.push_back(fmt::format("parallel.virtual_stages={}", virtual_stages > 0 ? virtual_stages : 1));
  }
  if (!recompute.empty()) o.push_back("train.recompute=" + recompute);
  if (fast) o.push_back("parallel.reduction=fast");
  if (sequence_parallel) o.push_back("parallel.sequence_parallel=true");
  if (servers > 0) {
    o.push_back("parallel.architecture=ps");
    o.push_back(fmt::format("parallel.servers={}", servers));
  }
  return o;
}

bool StrategySpec::is_reference() const {
  return dp == 1 && tp == 1 && pp == 1 && zero == 0 && schedule.empty() && recompute.empty() && !fast &&
         !sequence_parallel && servers == 0;
}

Result<StrategySpec> parse_strategy(const std::string& spec) {
  StrategySpec s;
  s.label = spec;
  if (spec.empty())
    return invalid_argument("empty strategy in --strategies").with_hint(fmt::format("valid tokens: {}", kValidTokens));
  std::set<std::string> seen;  // token kinds
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find('-', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string tok = spec.substr(pos, end - pos);
    pos = end + 1;
    if (tok.empty()) return bad_token(spec, tok, "empty token (two '-' in a row or a trailing '-')");
    std::string kind;
    int n = -1;
    if ((n = number_after(tok, "dp")) >= 1) {
      kind = "dp";
      s.dp = n;
    } else if ((n = number_after(tok, "tp")) >= 1) {
      kind = "tp";
      s.tp = n;
    } else if ((n = number_after(tok, "pp")) >= 1) {
      kind = "pp";
      s.pp = n;
    } else if ((n = number_after(tok, "zero")) >= 0 && n <= 3) {
      kind = "zero";
      s.zero = n;
    } else if (tok == "gpipe" || tok == "1f1b" || tok == "zbh1") {
      kind = "schedule";
      s.schedule = tok == "zbh1" ? "zb-h1" : tok;
      s.virtual_stages = 1;
    } else if (tok == "interleaved" || (n = number_after(tok, "interleaved")) >= 2) {
      kind = "schedule";
      s.schedule = "interleaved";
      s.virtual_stages = tok == "interleaved" ? 2 : n;
    } else if (tok == "recompute" || tok == "selective") {
      kind = "recompute";
      s.recompute = tok == "recompute" ? "full" : "selective";
    } else if (tok == "fast") {
      kind = "fast";
      s.fast = true;
    } else if (tok == "sp") {
      kind = "sp";
      s.sequence_parallel = true;
    } else if (tok == "ps") {
      kind = "ps";
    } else if ((n = number_after(tok, "w")) >= 1) {
      kind = "workers";
      s.dp = n;
    } else if ((n = number_after(tok, "s")) >= 1) {
      kind = "servers";
      s.servers = n;
    } else {
      return bad_token(spec, tok, "unknown token");
    }
    if (!seen.insert(kind).second) return bad_token(spec, tok, fmt::format("a second {} token", kind));
  }
  // The parameter server: "ps" with its servers and workers, the workers instead of a dp token.
  const bool ps = seen.contains("ps");
  if (ps != seen.contains("servers") || (seen.contains("workers") && !ps))
    return invalid_argument("strategy '{}': the parameter server is spelled ps-wW-sS (W workers, S servers)", spec)
        .with_hint("e.g. ps-w4-s1");
  if (ps && seen.contains("dp"))
    return invalid_argument("strategy '{}': a parameter-server strategy counts its workers with wN, not dpN", spec)
        .with_hint("e.g. ps-w4-s1");
  return s;
}

Result<std::vector<StrategySpec>> parse_strategy_list(const std::string& list) {
  std::vector<StrategySpec> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(pos, end - pos);
    pos = end + 1;
    // Tolerate spaces after commas ("dp1, dp2").
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    SP_ASSIGN_OR_RETURN(StrategySpec s, parse_strategy(item));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<StrategySpec> with_reference_first(std::vector<StrategySpec> specs) {
  std::vector<StrategySpec> out;
  StrategySpec ref;
  ref.label = "dp1";
  for (const StrategySpec& s : specs)
    if (s.is_reference()) {
      ref = s;  // keep the user's spelling ("dp1-tp1" stays as written)
      break;
    }
  out.push_back(ref);
  std::set<std::string> labels = {ref.label};
  for (StrategySpec& s : specs)
    if (!s.is_reference() && labels.insert(s.label).second) out.push_back(std::move(s));
  return out;
}

}  // namespace sp::plan
