// The strategy's grammar (plan/strategy.h): a token table, one parser, one printer, and the two maps to and from a
// run configuration.
#include "plan/strategy.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace sp::plan {
namespace {

constexpr const char* kValidTokens =
    "dpN, tpN, ppN (N ≥ 1), zeroN (N = 0..3), gpipe, 1f1b, interleaved or interleavedV (V ≥ 2), zbh1 (ZB-H1), "
    "recompute, selective, fast, sp (sequence parallelism, with tpN), mbN (N ≥ 1 sequences per micro-batch), "
    "ps with wN (N ≥ 1 workers) and sN (N ≥ 1 servers)";

// The digits after `prefix` in `tok`, or -1 when `tok` is not prefix + a decimal number.
int number_after(std::string_view tok, std::string_view prefix) {
  if (tok.size() <= prefix.size() || tok.substr(0, prefix.size()) != prefix) return -1;
  int v = -1;
  const char* b = tok.data() + prefix.size();
  const char* e = tok.data() + tok.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || v < 0 || v > 1 << 16) return -1;
  return v;
}

Status bad_token(std::string_view name, std::string_view tok, const std::string& why) {
  return invalid_argument("strategy '{}': {} '{}'", name, why, tok)
      .with_hint(fmt::format("valid tokens: {}", kValidTokens));
}

// One token into `s`; its kind ("dp", "schedule", ...), or empty when it is no token.
std::string read_token(std::string_view tok, Strategy& s) {
  int n = -1;
  if ((n = number_after(tok, "dp")) >= 1) return s.dp = n, "dp";
  if ((n = number_after(tok, "tp")) >= 1) return s.tp = n, "tp";
  if ((n = number_after(tok, "pp")) >= 1) return s.pp = n, "pp";
  if ((n = number_after(tok, "mb")) >= 1) return s.micro_batch_size = n, "mb";
  if ((n = number_after(tok, "zero")) >= 0 && n <= 3) return s.zero = n, "zero";
  if (tok == "gpipe" || tok == "1f1b" || tok == "zbh1") {
    s.schedule = tok == "gpipe"  ? config::Schedule::kGpipe
                 : tok == "zbh1" ? config::Schedule::kZbH1
                                 : config::Schedule::k1F1B;
    s.virtual_stages = 1;
    return "schedule";
  }
  if (tok == "interleaved" || (n = number_after(tok, "interleaved")) >= 2) {
    s.schedule = config::Schedule::kInterleaved;
    s.virtual_stages = tok == "interleaved" ? 2 : n;
    return "schedule";
  }
  if (tok == "recompute" || tok == "selective") {
    s.recompute = tok == "recompute" ? model::Recompute::kFull : model::Recompute::kSelective;
    return "recompute";
  }
  if (tok == "fast") return s.reduction = config::Reduction::kFast, "fast";
  if (tok == "sp") return s.sequence_parallel = true, "sp";
  if (tok == "ps") return "ps";
  if ((n = number_after(tok, "w")) >= 1) return s.dp = n, "workers";
  if ((n = number_after(tok, "s")) >= 1) return s.servers = n, "servers";
  return "";
}

}  // namespace

Strategy strategy_of(const config::RunConfig& c) {
  const config::ParallelConfig& p = c.parallel;
  return Strategy{.dp = p.dp,
                  .tp = p.tp,
                  .pp = p.pp,
                  .zero = p.zero,
                  .schedule = p.schedule,
                  .virtual_stages = p.virtual_stages,
                  .recompute = c.train.recompute,
                  .sequence_parallel = p.sequence_parallel,
                  .reduction = p.reduction,
                  .servers = p.parameter_server() ? p.servers : 0,
                  .micro_batch_size = c.train.micro_batch_size};
}

void apply(const Strategy& s, config::RunConfig& c) {
  config::ParallelConfig& p = c.parallel;
  p.dp = s.dp;
  p.tp = s.tp;
  p.pp = s.pp;
  p.zero = s.zero;
  p.schedule = s.schedule;
  p.virtual_stages = s.virtual_stages;
  p.sequence_parallel = s.sequence_parallel;
  p.reduction = s.reduction;
  p.architecture = s.servers > 0 ? config::Architecture::kParameterServer : config::Architecture::kAllReduce;
  p.servers = s.servers;
  c.train.recompute = s.recompute;
  c.train.micro_batch_size = s.micro_batch_size;
}

Strategy single_device(const Strategy& s) {
  Strategy one = s;
  one.dp = one.tp = one.pp = one.virtual_stages = 1;
  one.zero = one.servers = 0;
  one.schedule = config::Schedule::k1F1B;
  one.sequence_parallel = false;
  return one;
}

std::string strategy_name(const Strategy& s) {
  std::string n = s.servers > 0 ? fmt::format("ps-w{}-s{}", s.dp, s.servers) : fmt::format("dp{}", s.dp);
  if (s.tp != 1) n += fmt::format("-tp{}", s.tp);
  if (s.pp != 1) n += fmt::format("-pp{}", s.pp);
  if (s.zero != 0) n += fmt::format("-zero{}", s.zero);
  if (s.schedule == config::Schedule::kInterleaved) n += fmt::format("-interleaved{}", s.virtual_stages);
  if (s.schedule == config::Schedule::kGpipe) n += "-gpipe";
  if (s.schedule == config::Schedule::kZbH1) n += "-zbh1";
  if (s.recompute != model::Recompute::kNone) n += s.recompute == model::Recompute::kFull ? "-recompute" : "-selective";
  if (s.reduction == config::Reduction::kFast) n += "-fast";
  if (s.sequence_parallel) n += "-sp";
  if (s.micro_batch_size != 1) n += fmt::format("-mb{}", s.micro_batch_size);
  return n;
}

Result<Strategy> parse_strategy(std::string_view name, const Strategy& base) {
  Strategy s = base;
  s.dp = s.tp = s.pp = 1;
  s.zero = s.servers = 0;
  s.sequence_parallel = false;
  if (name.empty())
    return invalid_argument("empty strategy name").with_hint(fmt::format("valid tokens: {}", kValidTokens));
  std::set<std::string> seen;  // token kinds
  size_t pos = 0;
  while (pos <= name.size()) {
    const size_t end = std::min(name.find('-', pos), name.size());
    const std::string_view tok = name.substr(pos, end - pos);
    pos = end + 1;
    if (tok.empty()) return bad_token(name, tok, "empty token (two '-' in a row or a trailing '-')");
    const std::string kind = read_token(tok, s);
    if (kind.empty()) return bad_token(name, tok, "unknown token");
    if (!seen.insert(kind).second) return bad_token(name, tok, fmt::format("a second {} token", kind));
  }
  // The parameter server: "ps" with its servers and workers, the workers instead of a dp token.
  const bool ps = seen.contains("ps");
  if (ps != seen.contains("servers") || (seen.contains("workers") && !ps))
    return invalid_argument("strategy '{}': the parameter server is spelled ps-wW-sS (W workers, S servers)", name)
        .with_hint("e.g. ps-w4-s1");
  if (ps && seen.contains("dp"))
    return invalid_argument("strategy '{}': a parameter-server strategy counts its workers with wN, not dpN", name)
        .with_hint("e.g. ps-w4-s1");
  return s;
}

Result<std::vector<NamedStrategy>> parse_strategy_list(std::string_view list, const Strategy& base) {
  std::vector<NamedStrategy> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    std::string_view item = list.substr(pos, end - pos);
    pos = end + 1;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    SP_ASSIGN_OR_RETURN(Strategy s, parse_strategy(item, base));
    out.push_back({std::string(item), s});
  }
  return out;
}

std::vector<NamedStrategy> with_reference_first(const std::vector<NamedStrategy>& list, const Strategy& reference) {
  std::vector<NamedStrategy> out = {{"dp1", reference}};
  for (const NamedStrategy& n : list)
    if (n.strategy == reference) {
      out.front().label = n.label;  // the user's spelling ("dp1-tp1" stays as written)
      break;
    }
  std::set<std::string> labels = {out.front().label};
  for (const NamedStrategy& n : list)
    if (n.strategy != reference && labels.insert(n.label).second) out.push_back(n);
  return out;
}

nlohmann::json strategy_to_json(const Strategy& s) {
  return {{"name", strategy_name(s)},
          {"dp", s.dp},
          {"tp", s.tp},
          {"pp", s.pp},
          {"virtual_stages", s.virtual_stages},
          {"schedule", config::schedule_name(s.schedule)},
          {"zero", s.zero},
          {"recompute", model::recompute_name(s.recompute)},
          {"micro_batch_size", s.micro_batch_size},
          {"sequence_parallel", s.sequence_parallel},
          {"reduction", config::reduction_name(s.reduction)},
          {"servers", s.servers}};
}

std::vector<std::string> strategy_sets(const Strategy& s, const Strategy& base) {
  std::vector<std::string> o = {fmt::format("parallel.dp={}", s.dp), fmt::format("parallel.tp={}", s.tp),
                                fmt::format("parallel.pp={}", s.pp), fmt::format("parallel.zero={}", s.zero)};
  if (s.schedule != base.schedule || s.virtual_stages != base.virtual_stages) {
    o.push_back("parallel.schedule=" + config::schedule_name(s.schedule));
    o.push_back(fmt::format("parallel.virtual_stages={}", s.virtual_stages));
  }
  if (s.recompute != base.recompute) o.push_back(fmt::format("train.recompute={}", model::recompute_name(s.recompute)));
  if (s.reduction != base.reduction) o.push_back("parallel.reduction=" + config::reduction_name(s.reduction));
  if (s.sequence_parallel != base.sequence_parallel)
    o.push_back(fmt::format("parallel.sequence_parallel={}", s.sequence_parallel));
  if (s.servers != base.servers) {
    o.push_back("parallel.architecture=" + config::architecture_name(s.servers > 0
                                                                         ? config::Architecture::kParameterServer
                                                                         : config::Architecture::kAllReduce));
    o.push_back(fmt::format("parallel.servers={}", s.servers));
  }
  if (s.micro_batch_size != base.micro_batch_size)
    o.push_back(fmt::format("train.micro_batch_size={}", s.micro_batch_size));
  return o;
}

}  // namespace sp::plan
