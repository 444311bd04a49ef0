// The replay of one rank's memory events on a counting ledger (the ledger model's core, ledger_model.h):
// setup in construction order, then every action of an evaluation or a training step, allocating and freeing
// as the engine does (activations, pooled gathers, the canonical gradient tree's leaves). Internal to
// plan/ledger_model.cc; not an API.
// Invariant: every piece of state lives in the Replay object, so a copy can try a step without touching the
// original (predict_ledger's steady-state test).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "comm/deterministic.h"
#include "kernels/attention.h"
#include "kernels/attention16.h"
#include "kernels/reduce.h"
#include "model/weights.h"
#include "plan/block_shapes.h"
#include "plan/counting_ledger.h"
#include "plan/ledger_model.h"

namespace sp::plan::ledger_detail {

constexpr int64_t kF = 4;  // bytes per fp32 / int32

// The run's memory events replayed on a counting ledger. Every piece of state lives in this object,
// so a copy can try a step without touching the original (predict_ledger's steady-state test).
class Replay {
 public:
  explicit Replay(const LedgerModelInput& in) : in_(in), m_(in.model) {
    sim_.named = in.named;
    setup();
  }

  void evaluation() {
    for (const auto& a : in_.eval_actions) forward(a, false);
  }
  void step(bool eval_after) {
    for (const auto& a : in_.train_actions) a.forward ? forward(a, true) : backward(a);  // B, W or both
    finish_sync();
    if (eval_after) evaluation();
  }
  // Same live bytes, peaks, pools, gathers and gradient buffers: only allocation counts may differ.
  bool same_state(const Replay& o) const {
    auto same_bytes = [](const MemoryLedger::Bytes& a, const MemoryLedger::Bytes& b) {
      return a.live == b.live && a.peak == b.peak;
    };
    const LedgerPrediction &a = sim_.p, &b = o.sim_.p;
    if (!same_bytes(a.total, b.total) || a.entries.size() != b.entries.size()) return false;
    for (size_t c = 0; c < kCategoryCount; ++c)
      if (!same_bytes(a.by_category[c], b.by_category[c])) return false;
    for (auto i = a.entries.begin(), j = b.entries.begin(); i != a.entries.end(); ++i, ++j)
      if (i->first != j->first || i->second.live != j->second.live || i->second.peak != j->second.peak ||
          i->second.category != j->second.category)
        return false;
    return pool_size_ == o.pool_size_ && pool_free_ == o.pool_free_ && next_slot_ == o.next_slot_ && refs_ == o.refs_ &&
           fb_free_ == o.fb_free_ && next_fb_ == o.next_fb_ && grads_ == o.grads_ && in_flight_ == o.in_flight_;
  }
  int64_t allocations(const std::string& name) const { return sim_.p.entries.at(name).allocations; }
  LedgerPrediction result() const { return sim_.p; }

 private:
  // Gradient leaves of one unit: buffers allocated when the canonical tree's stack needs more than exist.
  struct GradUnit {
    int64_t allocated = 0, in_use = 0, leaves = 0;
    std::vector<int64_t> stack;  // sizes of the canonical partial sums
    bool current = false;
    bool operator==(const GradUnit&) const = default;
  };

  int64_t N() const { return in_.micro_batch_size * in_.seq_len; }
  // Token rows of the residual stream on this rank: N/tp under sequence parallelism (sp_rows).
  int64_t Ns() const { return sp_rows(N(), in_.tp, in_.sequence_parallel); }
  std::string name_of(int id) const { return model::unit_name(m_, id); }
  // An entry's name, built only when the entries are kept (a search asks for totals: named = false).
  std::string key(std::string_view pre, int id, std::string_view post = {}) const {
    return sim_.named ? fmt::format("{}{}{}", pre, name_of(id), post) : std::string();
  }
  std::string key(const std::string& p, std::string_view post) const {
    return sim_.named ? p + std::string(post) : std::string();
  }
  int64_t shard_of(int id) const {
    return comm::even_split_counts(unit_numel_.at(id), in_.dp)[static_cast<size_t>(in_.dp_rank)];
  }

  // One block's saved activations (model::BlockActivations); under recompute = selective without the
  // probabilities, which live once per chunk (selective_probs).
  // Under ZB-H1's split backward (`split`) without rstd1, rstd2 and probs, which live in the F → B pool
  // (forward_set).
  void block_set(const std::string& p, bool split = false) {
    const BlockShapes sh = block_shapes(m_, in_.tp, in_.micro_batch_size, in_.seq_len);
    const int64_t B = sh.B, T = sh.T, C = sh.C, D = sh.D, Hl = sh.Hl, Fl = sh.Fl, Wqkv = sh.Wqkv;
    const int64_t h = in_.param_bytes;  // the activations saved in 16 bits in mixed precision
    const std::tuple<std::string_view, int64_t, int64_t> t[] = {
        {".xn1", Ns() * C, h},      {".rstd1", Ns(), kF},
        {".qkv", N() * Wqkv, h},    {".probs", B * Hl * T * T, h},
        {".attn", N() * Hl * D, h}, {".mid", Ns() * C, in_.stream_bytes},
        {".xn2", Ns() * C, h},      {".rstd2", Ns(), kF},
        {".gu", N() * 2 * Fl, h},   {".h", N() * Fl, h}};
    for (const auto& [s, n, bytes] : t)
      if ((s != ".probs" || in_.recompute != model::Recompute::kSelective) && !(split && f_to_b(s)))
        sim_.alloc(key(p, s), Category::kActivation, n * bytes);
  }
  static bool f_to_b(std::string_view s) { return s == ".rstd1" || s == ".rstd2" || s == ".probs"; }
  // ZB-H1: what only F → B reads (LlamaStage::attach_forward_set), one set per micro-batch between its F and
  // its B, pooled per chunk ("act.fb<j>"): each block's rstd1, rstd2 and probs, and res0 of a non-first chunk
  // with layers (pools_res0).
  bool pools_res0(const LedgerModelInput::Chunk& ch) const {
    return in_.split_backward && !ch.first && ch.layer_end > ch.layer_begin;
  }
  void take_forward_set(int v) {
    auto& free = fb_free_[static_cast<size_t>(v)];
    if (free > 0) {
      --free;
      return;
    }
    const auto& ch = in_.chunks[static_cast<size_t>(v)];
    const BlockShapes sh = block_shapes(m_, in_.tp, in_.micro_batch_size, in_.seq_len);
    const auto A = Category::kActivation;
    const std::string p = sim_.named ? fmt::format("act.fb{}", next_fb_) : std::string();
    ++next_fb_;
    if (pools_res0(ch)) sim_.alloc(key(p, ".res0"), A, Ns() * sh.C * in_.stream_bytes);
    for (int l = ch.layer_begin; l < ch.layer_end && in_.recompute != model::Recompute::kFull; ++l) {
      const std::string q = sim_.named ? fmt::format("{}.layers.{}", p, l) : std::string();
      sim_.alloc(key(q, ".rstd1"), A, Ns() * kF);
      sim_.alloc(key(q, ".rstd2"), A, Ns() * kF);
      if (in_.recompute == model::Recompute::kNone)
        sim_.alloc(key(q, ".probs"), A, sh.B * sh.Hl * sh.T * sh.T * in_.param_bytes);
    }
  }
  // The final norm's, LM head's and loss's activations (model::HeadActivations): per slot, or under ZB-H1's
  // split backward once per last chunk ("act.head.*", allocated with the stage), reused by each F after the B,
  // and without xf, which B recomputes (LlamaStage::head_xf).
  void head_set(const std::string& p, bool with_xf = true) {
    const int64_t C = m_.dim, Vl = m_.vocab_size / in_.tp;
    const auto A = Category::kActivation;
    if (with_xf) sim_.alloc(key(p, ".xf"), A, Ns() * C * in_.param_bytes);
    sim_.alloc(key(p, ".rstdf"), A, Ns() * kF);
    sim_.alloc(key(p, ".logits"), A, N() * Vl * in_.param_bytes);  // 16-bit in mixed precision
    for (const char* s : {".rowmax", ".sumexp", ".tlogit", ".losses"}) sim_.alloc(key(p, s), A, N() * kF);
  }
  // Selective recomputation: the chunk's one probabilities buffer, refilled before each block's backward.
  void selective_probs() {
    const BlockShapes sh = block_shapes(m_, in_.tp, in_.micro_batch_size, in_.seq_len);
    sim_.alloc("recompute.probs", Category::kActivation, sh.B * sh.Hl * sh.T * sh.T * in_.param_bytes);
  }

  // Setup, in construction order.
  void setup() {
    const int64_t T = in_.seq_len, C = m_.dim, D = m_.head_dim();
    const int64_t Hl = m_.n_heads / in_.tp, KVl = m_.n_kv_heads / in_.tp, Fl = m_.ffn_dim / in_.tp;
    const int64_t Wqkv = (Hl + 2 * KVl) * D;
    const auto W = Category::kWorkspace;
    std::vector<std::vector<int>> chunk_units;  // unit ids per virtual stage, forward order
    for (const auto& ch : in_.chunks) {
      const int n_local = ch.layer_end - ch.layer_begin;
      sim_.alloc("rope.cos", W, T * (D / 2) * kF);
      sim_.alloc("rope.sin", W, T * (D / 2) * kF);
      sim_.alloc("scratch.tmp", W, N() * C * kF);
      sim_.alloc("scratch.dres", W, Ns() * C * kF);
      if (n_local > 0 || ch.last) sim_.alloc("scratch.dxn", W, N() * C * kF);
      if (n_local > 0) {
        sim_.alloc("scratch.dqkv", W, N() * Wqkv * kF);
        sim_.alloc("scratch.dattn", W, N() * Hl * D * kF);
        sim_.alloc("scratch.dgu", W, N() * 2 * Fl * kF);
        sim_.alloc("scratch.dh", W, N() * Fl * kF);
        sim_.alloc(
            "scratch.attention", W,
            (in_.mixed() ? kernels::attention16_scratch_floats(T, D) : kernels::attention_scratch_floats(T)) * kF);
        if (in_.recompute == model::Recompute::kFull) block_set("recompute");
        if (in_.recompute == model::Recompute::kSelective) selective_probs();
      }
      if (in_.mixed()) {
        const model::Stage16Workspace w =
            model::stage16_workspace(m_, n_local, ch.last, in_.tp, in_.micro_batch_size, T, in_.gemm16);
        if (w.norm_weight > 0) sim_.alloc("scratch.norm_weight", W, w.norm_weight * kF);
        if (w.grad16 > 0) sim_.alloc("scratch.grad16", W, w.grad16 * in_.param_bytes);
        if (w.gemm16 > 0) sim_.alloc("scratch.gemm16", W, w.gemm16 * kF);
      }
      if (in_.sequence_parallel && (n_local > 0 || ch.last))  // the gathered norm output
        sim_.alloc("scratch.xn_full", W, N() * C * in_.param_bytes);
      if (in_.split_backward && ch.last) head_set("act.head", /*with_xf=*/false);
      const std::vector<int> ids = model::chunk_units(m_, ch.layer_begin, ch.layer_end, ch.first, ch.last);
      for (int id : ids) unit_numel_[id] = model::unit_numel(m_, id, in_.tp);
      chunk_units.push_back(ids);
    }
    int64_t max_unit = 0, max_shard = 0;
    for (const auto& [id, n] : unit_numel_) {
      max_unit = std::max(max_unit, n);
      max_shard = std::max(max_shard, shard_of(id));
    }
    for (int i = 0; in_.deterministic && in_.dp > 1 && i < std::max(1, in_.overlap_buckets); ++i)
      sim_.alloc(i == 0 ? std::string("comm.dp_staging") : fmt::format("comm.dp_staging.{}", i), Category::kComm,
                 comm::deterministic_all_reduce_scratch(max_unit, in_.dp) * kF);
    if (in_.sequence_parallel && in_.tp > 1)  // the rank-major copy and the reduce-scatter's scratch
      sim_.alloc("comm.tp_staging", Category::kComm, 2 * N() * C * in_.stream_bytes);
    else if (in_.deterministic && in_.tp > 1)
      sim_.alloc("comm.tp_staging", Category::kComm,
                 comm::deterministic_all_reduce_scratch(N() * C, in_.tp) * in_.stream_bytes);
    std::vector<int> all_units;
    for (const auto& ids : chunk_units) all_units.insert(all_units.end(), ids.begin(), ids.end());
    const int64_t wb = in_.param_bytes, gb = in_.grad_bytes;
    for (int id : all_units) {
      if (in_.zero < 3)
        sim_.alloc(key("param.", id), Category::kParam, unit_numel_[id] * wb);
      else
        sim_.alloc(key("param.", id, ".shard"), Category::kParam, shard_of(id) * wb);
      if (in_.mixed())  // the fp32 master weights of the owned piece (ParamStore)
        sim_.alloc(key("optim.master.", id), Category::kOptim, (in_.zero == 0 ? unit_numel_[id] : shard_of(id)) * kF);
    }
    if ((in_.zero == 1 || in_.zero == 2) && in_.dp > 1) sim_.alloc("comm.param_shard", Category::kComm, max_shard * wb);
    if (in_.zero >= 1)
      for (int id : all_units) sim_.alloc(key("grad.", id, ".shard"), Category::kGrad, shard_of(id) * gb);
    for (int id : all_units) {
      if (!in_.owns_optimizer) break;
      const int64_t owned = in_.zero == 0 ? unit_numel_[id] : shard_of(id);
      sim_.alloc(key("optim.exp_avg.", id), Category::kOptim, owned * kF);
      sim_.alloc(key("optim.exp_avg_sq.", id), Category::kOptim, owned * kF);
    }
    sim_.alloc("io.tokens", Category::kIo, in_.micro_batch_size * (T + 1) * kF);
    pool_size_.assign(in_.chunks.size(), 0);
    pool_free_.assign(in_.chunks.size(), 0);
    fb_free_.assign(in_.chunks.size(), 0);
  }

  // Activation slots: a pool per virtual stage, indices numbered across the rank in allocation order.
  void slot_alloc(int v) {
    const auto& ch = in_.chunks[static_cast<size_t>(v)];
    const int64_t C = m_.dim;
    const auto A = Category::kActivation;
    const int n_local = ch.layer_end - ch.layer_begin;
    const std::string p = sim_.named ? fmt::format("act.s{}", next_slot_) : std::string();
    ++next_slot_;
    if (ch.first) sim_.alloc(key(p, ".inputs"), Category::kIo, N() * kF);
    if (ch.last) sim_.alloc(key(p, ".targets"), Category::kIo, N() * kF);
    for (int i = pools_res0(ch) ? 1 : 0; i <= n_local; ++i)
      sim_.alloc(sim_.named ? fmt::format("{}.res{}", p, i) : std::string(), A, Ns() * C * in_.stream_bytes);
    if (in_.recompute != model::Recompute::kFull)
      for (int l = ch.layer_begin; l < ch.layer_end; ++l)
        block_set(sim_.named ? fmt::format("{}.layers.{}", p, l) : std::string(), in_.split_backward);
    if (ch.last && !in_.split_backward) head_set(p);
    if (in_.split_backward && n_local > 0) sim_.alloc(key(p, ".wnorm"), A, 2 * n_local * C * kF);
    ++pool_size_[static_cast<size_t>(v)];
  }
  void take_slot(int v) {
    if (pool_free_[static_cast<size_t>(v)] == 0)
      slot_alloc(v);
    else
      --pool_free_[static_cast<size_t>(v)];
  }
  // ZeRO-3 gathers with nesting.
  void acquire(int id) {
    if (in_.zero < 3 || in_.dp == 1) return;
    if (refs_[id]++ == 0) sim_.alloc(key("param.gather.", id), Category::kParam, unit_numel_[id] * in_.param_bytes);
  }
  void release(int id) {
    if (in_.zero < 3 || in_.dp == 1) return;
    if (--refs_[id] == 0) sim_.free(key("param.gather.", id), Category::kParam, unit_numel_[id] * in_.param_bytes);
  }
  // 16-bit gradients (grad_bytes 2): the fp32 leaf lives from leaf() to done(), where the 16-bit buffer is
  // taken; fp32: the leaf is the buffer, taken in leaf(). Fast reduction (fp32 only): one buffer per unit,
  // taken by the step's first leaf, into which every later micro-batch adds (GradStore).
  bool grad16() const { return in_.grad_bytes != kF; }
  bool one_buffer() const { return !in_.deterministic && !grad16(); }
  void take_buffer(int id, GradUnit& u) {
    if (u.in_use == u.allocated) {
      sim_.alloc(sim_.named ? fmt::format("grad.{}.b{}", name_of(id), u.allocated) : std::string(), Category::kGrad,
                 unit_numel_[id] * in_.grad_bytes);
      ++u.allocated;
    }
    ++u.in_use;
  }
  void leaf(int id) {
    GradUnit& u = grads_[id];
    if (u.current) return;
    u.current = true;
    if (grad16())
      sim_.alloc(key("grad.", id, ".leaf"), Category::kGrad, unit_numel_[id] * kF);
    else if (!one_buffer() || u.leaves == 0)
      take_buffer(id, u);
  }
  void done(int id) {
    GradUnit& u = grads_[id];
    if (grad16()) {
      take_buffer(id, u);
      sim_.free(key("grad.", id, ".leaf"), Category::kGrad, unit_numel_[id] * kF);
    }
    u.current = false;
    if (!one_buffer()) u.stack.push_back(1);
    while (u.stack.size() >= 2 && u.stack.back() == u.stack[u.stack.size() - 2]) {
      u.stack.pop_back();
      u.stack.back() *= 2;
      --u.in_use;
    }
    if (++u.leaves == in_.local_micro_batches) {
      u.stack.clear();
      u.in_use = 0;
      u.leaves = 0;
      if (in_.overlap_buckets == 0) {
        release_full(id);
        return;
      }
      // Overlap: the sync is started; the oldest of overlap_buckets in flight completes first (GradStore).
      if (static_cast<int>(in_flight_.size()) == in_.overlap_buckets) {
        release_full(in_flight_.front());
        in_flight_.erase(in_flight_.begin());
      }
      in_flight_.push_back(id);
    }
  }
  // A unit's sync completed: ZeRO-2/3 free its full-size buffers.
  void release_full(int id) {
    GradUnit& u = grads_[id];
    if (in_.zero < 2) return;
    for (int64_t i = 0; i < u.allocated; ++i)
      sim_.free(sim_.named ? fmt::format("grad.{}.b{}", name_of(id), i) : std::string(), Category::kGrad,
                unit_numel_[id] * in_.grad_bytes);
    u.allocated = 0;
  }
  // After the backward: the syncs still in flight complete in order (GradStore::finish_sync).
  void finish_sync() {
    for (int id : in_flight_) release_full(id);
    in_flight_.clear();
  }
  void forward(const LedgerModelInput::Action& a, bool train) {
    const auto& ch = in_.chunks[static_cast<size_t>(a.virtual_stage)];
    const int embed = model::embed_unit(), head = model::head_unit(m_);
    take_slot(a.virtual_stage);
    if (in_.split_backward) take_forward_set(a.virtual_stage);
    if (ch.first) {
      acquire(embed);
      release(embed);
    }
    for (int l = ch.layer_begin; l < ch.layer_end; ++l) {
      acquire(model::block_unit(l));
      release(model::block_unit(l));
    }
    if (ch.last) {
      acquire(head);
      if (m_.tie_embeddings) acquire(embed);
      release(head);
      if (m_.tie_embeddings) release(embed);
    }
    if (!train) ++pool_free_[static_cast<size_t>(a.virtual_stage)];  // forward only frees at once
    if (!train && in_.split_backward) ++fb_free_[static_cast<size_t>(a.virtual_stage)];
  }
  // A full backward (the weights' acquire/release and the leaves' leaf/done), or ZB-H1's B (the acquires,
  // and the head unit's leaves: B forms them as a full backward does) or W (the blocks'
  // leaves (a first chunk never splits, so never the embedding's), with the slot freed after it:
  // LlamaStage::backward_input / backward_weight).
  void backward(const LedgerModelInput::Action& a) {
    const auto& ch = in_.chunks[static_cast<size_t>(a.virtual_stage)];
    const int embed = model::embed_unit(), head = model::head_unit(m_);
    const bool weights = a.pass != BackwardPass::kWeight, grads = a.pass != BackwardPass::kInput;
    if (ch.last && weights) {
      acquire(head);
      leaf(head);
      if (m_.tie_embeddings) {
        acquire(embed);
        leaf(embed);
      }
      release(head);
      if (m_.tie_embeddings) release(embed);
      done(head);
    }
    for (int l = ch.layer_end - 1; l >= ch.layer_begin; --l) {
      if (weights) acquire(model::block_unit(l));
      if (grads) leaf(model::block_unit(l));
      if (weights) release(model::block_unit(l));
      if (grads) done(model::block_unit(l));
    }
    if (ch.first && grads) {
      leaf(embed);
      done(embed);
    }
    if (a.frees_slot()) ++pool_free_[static_cast<size_t>(a.virtual_stage)];
    if (a.pass == BackwardPass::kInput) ++fb_free_[static_cast<size_t>(a.virtual_stage)];  // after B
  }

  const LedgerModelInput& in_;
  const model::LlamaConfig& m_;
  CountingLedger sim_;
  std::map<int, int64_t> unit_numel_;
  std::vector<int64_t> pool_size_, pool_free_;
  std::vector<int64_t> fb_free_;  // ZB-H1: free F → B sets per chunk
  int next_slot_ = 0, next_fb_ = 0;
  std::map<int, int> refs_;
  std::map<int, GradUnit> grads_;
  std::vector<int> in_flight_;  // overlap: units whose sync is in flight, oldest first
};

}  // namespace sp::plan::ledger_detail
