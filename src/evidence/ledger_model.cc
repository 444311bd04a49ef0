#include "evidence/ledger_model.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "comm/deterministic.h"
#include "kernels/attention.h"
#include "kernels/reduce.h"
#include "model/weights.h"

namespace sp::evidence {
namespace {

// A ledger that only counts: the same bookkeeping rules as MemoryLedger, no memory.
class Simulator {
 public:
  void alloc(const std::string& name, Category c, int64_t bytes) { bump(name, c, bytes); }
  void free(const std::string& name, Category c, int64_t bytes) { bump(name, c, -bytes, false); }
  LedgerPrediction result() const { return p_; }

 private:
  void bump(const std::string& name, Category c, int64_t b, bool count = true) {
    auto up = [b](MemoryLedger::Bytes& x) {
      x.live += b;
      x.peak = std::max(x.peak, x.live);
    };
    up(p_.total);
    up(p_.by_category[static_cast<size_t>(c)]);
    auto& e = p_.entries[name];
    e.category = c;
    e.live += b;
    e.peak = std::max(e.peak, e.live);
    if (count) ++e.allocations;
  }
  LedgerPrediction p_;
};

constexpr int64_t kF = 4;  // bytes per fp32 / int32

}  // namespace

LedgerPrediction predict_ledger(const LedgerModelInput& in) {
  Simulator sim;
  const model::LlamaConfig& m = in.model;
  const int64_t B = in.micro_batch_size, T = in.seq_len, N = B * T, C = m.dim, D = m.head_dim();
  const int64_t Hl = m.n_heads / in.tp, KVl = m.n_kv_heads / in.tp, Fl = m.ffn_dim / in.tp, Vl = m.vocab_size / in.tp;
  const int64_t Wqkv = (Hl + 2 * KVl) * D;
  const int embed = model::embed_unit(), head = model::head_unit(m);
  const auto W = Category::kWorkspace, A = Category::kActivation;

  // --- Setup, in construction order -------------------------------------------------------------
  std::vector<std::vector<int>> chunk_units;  // unit ids per virtual stage, forward order
  std::map<int, int64_t> unit_numel;
  auto block_set = [&](const std::string& p, bool allocate) {
    const std::vector<std::pair<std::string, int64_t>> t = {
        {".xn1", N * C}, {".rstd1", N}, {".qkv", N * Wqkv}, {".probs", B * Hl * T * T}, {".attn", N * Hl * D},
        {".mid", N * C}, {".xn2", N * C}, {".rstd2", N}, {".gu", N * 2 * Fl}, {".h", N * Fl}};
    for (const auto& [s, n] : t)
      if (allocate) sim.alloc(p + s, A, n * kF);
  };
  for (const auto& ch : in.chunks) {
    const int n_local = ch.layer_end - ch.layer_begin;
    sim.alloc("rope.cos", W, T * (D / 2) * kF);
    sim.alloc("rope.sin", W, T * (D / 2) * kF);
    sim.alloc("scratch.tmp", W, N * C * kF);
    sim.alloc("scratch.dres", W, N * C * kF);
    if (n_local > 0 || ch.last) sim.alloc("scratch.dxn", W, N * C * kF);
    if (n_local > 0) {
      sim.alloc("scratch.dqkv", W, N * Wqkv * kF);
      sim.alloc("scratch.dattn", W, N * Hl * D * kF);
      sim.alloc("scratch.dgu", W, N * 2 * Fl * kF);
      sim.alloc("scratch.dh", W, N * Fl * kF);
      sim.alloc("scratch.attention", W, kernels::attention_scratch_floats(T) * kF);
      if (in.recompute == model::Recompute::kFull) block_set("recompute", true);
    }
    const std::vector<int> ids = model::chunk_units(m, ch.layer_begin, ch.layer_end, ch.first, ch.last);
    for (int id : ids) unit_numel[id] = model::unit_layout(m, id, in.tp_rank, in.tp).numel;
    chunk_units.push_back(ids);
  }
  auto name_of = [&](int id) { return model::unit_name(m, id); };
  auto shard_of = [&](int id) { return comm::even_split_counts(unit_numel[id], in.dp)[static_cast<size_t>(in.dp_rank)]; };
  int64_t max_unit = 0, max_shard = 0;
  for (const auto& [id, n] : unit_numel) {
    max_unit = std::max(max_unit, n);
    max_shard = std::max(max_shard, shard_of(id));
  }
  if (in.deterministic && in.dp > 1)
    sim.alloc("comm.dp_staging", Category::kComm, comm::deterministic_all_reduce_scratch(max_unit, in.dp) * kF);
  if (in.deterministic && in.tp > 1)
    sim.alloc("comm.tp_staging", Category::kComm, comm::deterministic_all_reduce_scratch(N * C, in.tp) * kF);
  std::vector<int> all_units;
  for (const auto& ids : chunk_units) all_units.insert(all_units.end(), ids.begin(), ids.end());
  for (int id : all_units) {
    if (in.zero < 3)
      sim.alloc("param." + name_of(id), Category::kParam, unit_numel[id] * kF);
    else
      sim.alloc("param." + name_of(id) + ".shard", Category::kParam, shard_of(id) * kF);
  }
  if ((in.zero == 1 || in.zero == 2) && in.dp > 1) sim.alloc("comm.param_shard", Category::kComm, max_shard * kF);
  if (in.zero >= 1)
    for (int id : all_units) sim.alloc("grad." + name_of(id) + ".shard", Category::kGrad, shard_of(id) * kF);
  for (int id : all_units) {
    const int64_t owned = in.zero == 0 ? unit_numel[id] : shard_of(id);
    sim.alloc("optim.exp_avg." + name_of(id), Category::kOptim, owned * kF);
    sim.alloc("optim.exp_avg_sq." + name_of(id), Category::kOptim, owned * kF);
  }
  sim.alloc("io.tokens", Category::kIo, B * (T + 1) * kF);

  // --- Dynamic state ----------------------------------------------------------------------------
  // Activation slots: a pool per virtual stage, indices numbered across the rank in allocation order.
  std::vector<int64_t> pool_size(in.chunks.size(), 0), pool_free(in.chunks.size(), 0);
  int next_slot = 0;
  auto slot_alloc = [&](int v) {
    const auto& ch = in.chunks[static_cast<size_t>(v)];
    const std::string p = fmt::format("act.s{}", next_slot++);
    if (ch.first) sim.alloc(p + ".inputs", Category::kIo, N * kF);
    if (ch.last) sim.alloc(p + ".targets", Category::kIo, N * kF);
    for (int i = 0; i <= ch.layer_end - ch.layer_begin; ++i) sim.alloc(fmt::format("{}.res{}", p, i), A, N * C * kF);
    if (in.recompute == model::Recompute::kNone)
      for (int l = ch.layer_begin; l < ch.layer_end; ++l) block_set(fmt::format("{}.layers.{}", p, l), true);
    if (ch.last) {
      sim.alloc(p + ".xf", A, N * C * kF);
      sim.alloc(p + ".rstdf", A, N * kF);
      sim.alloc(p + ".logits", A, N * Vl * kF);
      for (const char* s : {".rowmax", ".sumexp", ".tlogit", ".losses"}) sim.alloc(p + s, A, N * kF);
    }
    ++pool_size[static_cast<size_t>(v)];
  };
  auto take_slot = [&](int v) {
    if (pool_free[static_cast<size_t>(v)] == 0) slot_alloc(v); else --pool_free[static_cast<size_t>(v)];
  };
  // ZeRO-3 gathers with nesting.
  std::map<int, int> refs;
  auto acquire = [&](int id) {
    if (in.zero < 3 || in.dp == 1) return;
    if (refs[id]++ == 0) sim.alloc("param.gather." + name_of(id), Category::kParam, unit_numel[id] * kF);
  };
  auto release = [&](int id) {
    if (in.zero < 3 || in.dp == 1) return;
    if (--refs[id] == 0) sim.free("param.gather." + name_of(id), Category::kParam, unit_numel[id] * kF);
  };
  // Gradient leaves: per unit, buffers allocated when the stack needs more than exist.
  struct GradUnit {
    int64_t allocated = 0, in_use = 0, leaves = 0;
    std::vector<int64_t> stack;  // sizes of the canonical partial sums
    bool current = false;
  };
  std::map<int, GradUnit> g;
  auto leaf = [&](int id) {
    GradUnit& u = g[id];
    if (u.current) return;
    u.current = true;
    if (u.in_use == u.allocated)
      sim.alloc(fmt::format("grad.{}.b{}", name_of(id), u.allocated++), Category::kGrad, unit_numel[id] * kF);
    ++u.in_use;
  };
  auto done = [&](int id) {
    GradUnit& u = g[id];
    u.current = false;
    u.stack.push_back(1);
    while (u.stack.size() >= 2 && u.stack.back() == u.stack[u.stack.size() - 2]) {
      u.stack.pop_back();
      u.stack.back() *= 2;
      --u.in_use;
    }
    if (++u.leaves == in.local_micro_batches) {
      u.in_use = 1;  // the fold leaves one buffer holding the total
      u.stack.clear();
      if (in.zero >= 2) {
        for (int64_t i = 0; i < u.allocated; ++i)
          sim.free(fmt::format("grad.{}.b{}", name_of(id), i), Category::kGrad, unit_numel[id] * kF);
        u.allocated = 0;
      }
      u.in_use = 0;
      u.leaves = 0;
    }
  };
  auto forward = [&](const LedgerModelInput::Action& a, bool train) {
    const auto& ch = in.chunks[static_cast<size_t>(a.virtual_stage)];
    take_slot(a.virtual_stage);
    if (ch.first) { acquire(embed); release(embed); }
    for (int l = ch.layer_begin; l < ch.layer_end; ++l) { acquire(model::block_unit(l)); release(model::block_unit(l)); }
    if (ch.last) {
      acquire(head);
      if (m.tie_embeddings) acquire(embed);
      release(head);
      if (m.tie_embeddings) release(embed);
    }
    if (!train) ++pool_free[static_cast<size_t>(a.virtual_stage)];  // forward only frees at once
  };
  auto backward = [&](const LedgerModelInput::Action& a) {
    const auto& ch = in.chunks[static_cast<size_t>(a.virtual_stage)];
    if (ch.last) {
      acquire(head);
      leaf(head);
      if (m.tie_embeddings) { acquire(embed); leaf(embed); }
      release(head);
      if (m.tie_embeddings) release(embed);
      done(head);
    }
    for (int l = ch.layer_end - 1; l >= ch.layer_begin; --l) {
      acquire(model::block_unit(l));
      leaf(model::block_unit(l));
      release(model::block_unit(l));
      done(model::block_unit(l));
    }
    if (ch.first) { leaf(embed); done(embed); }
    ++pool_free[static_cast<size_t>(a.virtual_stage)];
  };

  // The run, event by event: an evaluation before training, then every step with its evaluations.
  for (const auto& a : in.eval_actions) forward(a, false);
  for (int64_t s = 0; s < in.steps; ++s) {
    for (const auto& a : in.train_actions) a.forward ? forward(a, true) : backward(a);
    if ((in.eval_every > 0 && (s + 1) % in.eval_every == 0) || s + 1 == in.steps)
      for (const auto& a : in.eval_actions) forward(a, false);
  }
  return sim.result();
}

nlohmann::json compare_ledger(const MemoryLedger& measured, const LedgerPrediction& predicted) {
  bool all_equal = true;
  auto row = [&](const MemoryLedger::Bytes& got, const MemoryLedger::Bytes& want) {
    const bool eq = got.peak == want.peak && got.live == want.live;
    all_equal = all_equal && eq;
    return nlohmann::json{{"measured_live", got.live}, {"measured_peak", got.peak}, {"predicted_live", want.live},
                          {"predicted_peak", want.peak}, {"equal", eq}};
  };
  nlohmann::json j;
  j["total"] = row(measured.total(), predicted.total);
  for (size_t c = 0; c < kCategoryCount; ++c)
    j["categories"][std::string(category_name(static_cast<Category>(c)))] =
        row(measured.category(static_cast<Category>(c)), predicted.by_category[c]);
  std::map<std::string, std::pair<MemoryLedger::Entry, MemoryLedger::Entry>> names;
  for (const auto& [n, e] : measured.entries()) names[n].first = e;
  for (const auto& [n, e] : predicted.entries) names[n].second = e;
  for (const auto& [n, pr] : names) {
    const auto& [got, want] = pr;
    const bool eq = got.peak == want.peak && got.live == want.live && got.allocations == want.allocations &&
                    got.category == want.category;
    all_equal = all_equal && eq;
    j["tensors"][n] = {{"category", category_name(eq ? got.category : (got.allocations ? got.category : want.category))},
                       {"measured_peak", got.peak},   {"predicted_peak", want.peak},
                       {"measured_live", got.live},   {"predicted_live", want.live},
                       {"allocations", got.allocations}, {"predicted_allocations", want.allocations},
                       {"equal", eq}};
  }
  j["equal"] = all_equal;
  return j;
}

}  // namespace sp::evidence
