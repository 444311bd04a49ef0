#include "judge/assemble.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>

namespace sp::judge {
namespace {

// "piece 1/2" (the even form's names, "piece 0/1" for a whole tensor), "piece box [43, 0]+[43, 64]".
std::string piece_label(const std::optional<Shard>& s) {
  if (!s) return "piece 0/1";
  if (s->form == Shard::Form::kEven) return fmt::format("piece {}/{}", s->index, s->parts);
  return "piece " + s->to_string();
}

// Shares of one (step, phase, tensor) of `shape` → its logical summary: the pieces must tile the tensor (each
// logical element in exactly one piece, judge/shard.h) and each piece's shares its local elements (the cover ranges).
Result<evidence::TensorSummary> merge_shares(const std::vector<const TensorRecord*>& shares, const Shape& shape,
                                             const std::string& what) {
  const auto refuse = [&](const std::string& why) {
    return invalid_argument("recording refused: {}: {}", what, why)
        .with_hint("each element must be summarized by exactly one rank (the recorder's cover ranges)");
  };
  const TensorRecord& first = *shares.front();
  bool even = true;  // the even form alone keeps the messages it always had
  for (const TensorRecord* t : shares) even = even && (!t->shard || t->shard->form == Shard::Form::kEven);
  std::map<PieceKey, std::vector<const TensorRecord*>> by_piece;
  for (const TensorRecord* t : shares) by_piece[piece_key(t->shard, shape)].push_back(t);
  if (even) {
    const int parts = first.shard ? first.shard->parts : 1;
    std::set<int> indices;
    for (const TensorRecord* t : shares) {
      if ((t->shard.has_value() != first.shard.has_value()) ||
          (t->shard && (t->shard->dim != first.shard->dim || t->shard->parts != parts)))
        return refuse(fmt::format("rank {} records it as {}, rank {} as {}", first.rank, piece_name(first.shard),
                                  t->rank, piece_name(t->shard)));
      indices.insert(t->shard ? t->shard->index : 0);
    }
    for (int i = 0; i < parts; ++i)
      if (!indices.count(i)) return refuse(fmt::format("piece {}/{} is recorded by no rank", i, parts));
  } else {
    std::vector<std::pair<std::optional<Shard>, int>> pieces;
    for (const auto& [key, holders] : by_piece) pieces.push_back({holders.front()->shard, holders.front()->rank});
    if (const std::string problem = tiling_problem(shape, pieces); !problem.empty())
      return refuse(problem).with_hint(
          "the pieces of a tensor must hold each of its elements exactly once (replicas hold the same box): a "
          "record was edited, or a rank's pieces were not all recorded");
  }
  evidence::TensorSummary sum;
  for (const auto& [key, holders] : by_piece) {
    std::vector<const TensorRecord*> v = holders;
    const std::string label = piece_label(v.front()->shard);
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->k0 != b->k0 ? a->k0 < b->k0 : a->k1 < b->k1; });
    int64_t at = 0;
    for (const TensorRecord* t : v) {
      if (t->k0 == t->k1) continue;
      if (t->k0 != at)
        return refuse(fmt::format("{}: local elements [{}, {}) {} (rank {} covers from {})", label, std::min(at, t->k0),
                                  std::max(at, t->k0), t->k0 > at ? "are covered by no rank" : "are covered twice",
                                  t->rank, t->k0));
      at = t->k1;
      evidence::TensorSummary part;
      part.lane0 = t->lane0;
      part.lane1 = t->lane1;
      part.stats = ExactSum::from_words(t->exact_words);
      sum.merge(part);
    }
    if (at != v.front()->local)
      return refuse(fmt::format("{}: local elements [{}, {}) are covered by no rank", label, at, v.front()->local));
  }
  return sum;
}

void compare_replicas(const std::vector<const TensorRecord*>& shares, const Shape& shape, const Recording& rec,
                      Assembly& out) {
  std::map<PieceKey, std::vector<const TensorRecord*>> by_piece;
  for (const TensorRecord* t : shares) by_piece[piece_key(t->shard, shape)].push_back(t);
  for (const auto& [key, holders] : by_piece) {
    if (holders.size() < 2) continue;
    ++out.replica_sets;
    out.replica_holders += static_cast<int64_t>(holders.size());
    std::map<std::string, std::vector<int>> values;
    for (const TensorRecord* t : holders) values[t->sha256].push_back(t->rank);
    if (values.size() == 1) continue;
    size_t best = 0;
    int ties = 0;
    for (const auto& [v, ranks] : values) {
      if (ranks.size() > best) best = ranks.size(), ties = 0;
      if (ranks.size() == best) ++ties;
    }
    ReplicaMismatch m{.step = holders[0]->step,
                      .phase = holders[0]->phase,
                      .tensor = holders[0]->tensor,
                      .piece = piece_name(holders[0]->shard)};
    for (const auto& [v, ranks] : values)
      if (ties > 1 || ranks.size() != best) m.ranks.insert(m.ranks.end(), ranks.begin(), ranks.end());
    for (const TensorRecord* t : holders) m.all.push_back(t->rank);
    std::sort(m.ranks.begin(), m.ranks.end());
    std::sort(m.all.begin(), m.all.end());
    const bool tp_rep = !holders[0]->shard && rec.contract().strategy.tp > 1;
    m.kind = tp_rep ? (rec.contract().strategy.dp > 1 ? "dp × tp replicas" : "tp-replicated") : "dp replicas";
    out.replica_mismatches.push_back(std::move(m));
  }
}

// Σx² of each piece (its shares merged), credited to every rank that holds it.
void piece_squares(const std::vector<const TensorRecord*>& shares, const Shape& shape,
                   std::map<std::pair<std::string, int>, double>& out) {
  std::map<PieceKey, ExactSum> piece;
  for (const TensorRecord* t : shares) piece[piece_key(t->shard, shape)].merge(ExactSum::from_words(t->exact_words));
  for (const TensorRecord* t : shares) out[{t->tensor, t->rank}] = piece.at(piece_key(t->shard, shape)).sum_squares();
}

std::string loss_line(int64_t step, double value) {
  return nlohmann::json{{"bits", fmt::format("{:016x}", std::bit_cast<uint64_t>(value))},
                        {"phase", "loss"},
                        {"step", step},
                        {"tensor", "loss"},
                        {"value", value}}
      .dump();
}

}  // namespace

const AssembledTensor* Assembly::find(int64_t step, const std::string& phase, const std::string& tensor) const {
  const auto it = index.find({step, phase, tensor});
  return it == index.end() ? nullptr : &tensors[it->second];
}

namespace {

using StepShares = std::map<std::pair<std::string, std::string>, std::vector<const TensorRecord*>>;

// One step's loss and its tensors' logical records, from its shares ((phase, tensor) → every rank's share).
Status assemble_one(const Recording& rec, int64_t s, const StepShares& shares, Assembly& out) {
  const RecordingContract& c = rec.contract();
  double sum = 0;
  int64_t targets = 0;
  for (const auto& [l, rank] : rec.losses(s)) {
    sum += l.loss_sum;
    targets += l.targets;
  }
  if (targets == 0)
    return invalid_argument("recording refused: step {} has no target token: its loss is a mean over nothing", s);
  out.loss[s] = sum / static_cast<double>(targets);
  out.targets[s] = targets;
  out.checksums_jsonl += loss_line(s, out.loss[s]) + "\n";
  if (!c.checksums_at(s)) return Status();
  for (const char* phase : {"grad", "param"})
    for (const model::WeightSpec& w : rec.weights()) {
      const std::string what = fmt::format("step {} {} {}", s, phase, w.name);
      const auto it = shares.find({phase, w.name});
      if (it == shares.end())
        return invalid_argument("recording refused: {}: no rank recorded it (the model has it)", what);
      SP_ASSIGN_OR_RETURN(evidence::TensorSummary summary, merge_shares(it->second, w.shape, what));
      compare_replicas(it->second, w.shape, rec, out);
      if (std::string_view(phase) == "grad") piece_squares(it->second, w.shape, out.piece_squares[s]);
      nlohmann::json j = summary.to_json();
      j["step"] = s;
      j["phase"] = phase;
      j["tensor"] = w.name;
      j["numel"] = shape_numel(w.shape);
      out.checksums_jsonl += j.dump() + "\n";
      out.index[{s, phase, w.name}] = out.tensors.size();
      out.tensors.push_back({s, phase, w.name, shape_numel(w.shape), summary});
    }
  return Status();
}

}  // namespace

Result<Assembly> assemble_checksums(const Recording& rec) {
  Assembly out;
  std::map<int64_t, StepShares> shares;  // step → (phase, tensor) → every rank's share
  for (const RankRecords& rr : rec.ranks())
    for (const TensorRecord& t : rr.tensors) shares[t.step][{t.phase, t.tensor}].push_back(&t);
  for (int64_t s = 0; s < rec.contract().steps; ++s) SP_RETURN_IF_ERROR(assemble_one(rec, s, shares[s], out));
  return out;
}

Status assemble_step(const Recording& rec, int64_t step, Assembly& out) {
  StepShares shares;
  for (const RankRecords& rr : rec.ranks())
    for (const TensorRecord& t : rr.tensors)
      if (t.step == step) shares[{t.phase, t.tensor}].push_back(&t);
  return assemble_one(rec, step, shares, out);
}

}  // namespace sp::judge
