#include "model/weights.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/rng.h"

namespace sp::model {

int64_t TensorSlot::logical_index(int64_t k) const {
  if (slice.dim != 1) return (slice.dim == 0 ? slice.begin * (spec.shape.size() > 1 ? spec.shape[1] : 1) : 0) + k;
  // Column shard of a matrix (R, K): local (i, c) with local width w is logical (i, begin + c).
  const int64_t w = local_shape[1];
  const int64_t i = k / w;
  const int64_t c = k % w;
  return i * spec.shape[1] + slice.begin + c;
}

const TensorSlot& UnitLayout::tensor(std::string_view suffix) const {
  for (const auto& t : tensors)
    if (t.spec.name.size() >= suffix.size() &&
        t.spec.name.compare(t.spec.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return t;
  SP_CHECK(false, "unit {} has no tensor ending in '{}'", name, suffix);
  __builtin_unreachable();
}

int unit_count(const LlamaConfig& c) { return static_cast<int>(c.n_layers) + 2; }
int head_unit(const LlamaConfig& c) { return static_cast<int>(c.n_layers) + 1; }
int unit_layer(int id) { return id - 1; }
UnitKind unit_kind(const LlamaConfig& c, int id) {
  return id == embed_unit() ? UnitKind::kEmbed : (id == head_unit(c) ? UnitKind::kHead : UnitKind::kBlock);
}
std::vector<int> chunk_units(const LlamaConfig& c, int layer_begin, int layer_end, bool first, bool last) {
  std::vector<int> ids;
  if (first) ids.push_back(embed_unit());
  for (int l = layer_begin; l < layer_end; ++l) ids.push_back(block_unit(l));
  if (last) ids.push_back(head_unit(c));
  return ids;
}

std::string unit_name(const LlamaConfig& c, int id) {
  switch (unit_kind(c, id)) {
    case UnitKind::kEmbed:
      return "embed";
    case UnitKind::kHead:
      return "head";
    case UnitKind::kBlock:
      break;
  }
  return fmt::format("layers.{}", unit_layer(id));
}

// named = false leaves the block tensors' names empty (unit_numel, weight_count: only shapes are needed).
static std::vector<WeightSpec> unit_specs(const LlamaConfig& c, int id, bool named = true) {
  const int64_t C = c.dim, D = c.head_dim(), H = c.n_heads, KV = c.n_kv_heads, F = c.ffn_dim, V = c.vocab_size;
  if (unit_kind(c, id) == UnitKind::kEmbed) return {{"model.embed_tokens.weight", {V, C}, 0, InitKind::kNormal, true}};
  if (unit_kind(c, id) == UnitKind::kHead) {
    std::vector<WeightSpec> s = {{"model.norm.weight", {C}, -1, InitKind::kOnes, false}};
    if (!c.tie_embeddings) s.push_back({"lm_head.weight", {V, C}, 0, InitKind::kNormal, true});
    return s;
  }
  const std::string p = named ? fmt::format("model.layers.{}.", unit_layer(id)) : std::string();
  return {
      {p + "input_layernorm.weight", {C}, -1, InitKind::kOnes, false},
      {p + "self_attn.q_proj.weight", {H * D, C}, 0, InitKind::kNormal, true},
      {p + "self_attn.k_proj.weight", {KV * D, C}, 0, InitKind::kNormal, true},
      {p + "self_attn.v_proj.weight", {KV * D, C}, 0, InitKind::kNormal, true},
      {p + "self_attn.o_proj.weight", {C, H * D}, 1, InitKind::kNormal, true},
      {p + "post_attention_layernorm.weight", {C}, -1, InitKind::kOnes, false},
      {p + "mlp.gate_proj.weight", {F, C}, 0, InitKind::kNormal, true},
      {p + "mlp.up_proj.weight", {F, C}, 0, InitKind::kNormal, true},
      {p + "mlp.down_proj.weight", {C, F}, 1, InitKind::kNormal, true},
  };
}

UnitLayout unit_layout(const LlamaConfig& c, int id, int tp_rank, int tp_size) {
  SP_CHECK(id >= embed_unit() && id <= head_unit(c), "unit id {} out of range [0, {}]", id, head_unit(c));
  UnitLayout u;
  u.id = id;
  u.kind = unit_kind(c, id);
  u.layer = u.kind == UnitKind::kBlock ? unit_layer(id) : -1;
  u.name = unit_name(c, id);
  for (WeightSpec& spec : unit_specs(c, id)) {
    TensorSlot t;
    t.local_shape = spec.shape;
    if (spec.tp_dim >= 0) {
      const int64_t full = spec.shape[static_cast<size_t>(spec.tp_dim)];
      SP_CHECK(full % tp_size == 0, "{} dim {} = {} is not divisible by tp = {}", spec.name, spec.tp_dim, full,
               tp_size);
      const int64_t part = full / tp_size;
      t.local_shape[static_cast<size_t>(spec.tp_dim)] = part;
      t.slice = {spec.tp_dim, part * tp_rank, part};
    } else {
      t.slice = {-1, 0, spec.shape[0]};
    }
    t.numel = shape_numel(t.local_shape);
    t.offset = u.numel;
    u.numel += t.numel;
    t.spec = std::move(spec);
    u.tensors.push_back(std::move(t));
  }
  return u;
}

int64_t unit_numel(const LlamaConfig& c, int id, int tp_size) {
  SP_CHECK(id >= embed_unit() && id <= head_unit(c), "unit id {} out of range [0, {}]", id, head_unit(c));
  int64_t n = 0;
  for (const WeightSpec& spec : unit_specs(c, id, false)) {
    const int64_t numel = shape_numel(spec.shape);
    if (spec.tp_dim < 0) {
      n += numel;
      continue;
    }
    const int64_t full = spec.shape[static_cast<size_t>(spec.tp_dim)];
    n += numel / full * (full / tp_size);  // unit_layout's local shape (it checks divisibility)
  }
  return n;
}

int64_t weight_count(const LlamaConfig& c) {
  const int64_t per_block = c.n_layers > 0 ? static_cast<int64_t>(unit_specs(c, embed_unit() + 1, false).size()) : 0;
  return static_cast<int64_t>(unit_specs(c, embed_unit(), false).size() + unit_specs(c, head_unit(c), false).size()) +
         per_block * c.n_layers;
}

std::vector<WeightSpec> weight_table(const LlamaConfig& c) {
  std::vector<WeightSpec> all;
  for (int id = 0; id < unit_count(c); ++id)
    for (WeightSpec& s : unit_specs(c, id)) all.push_back(std::move(s));
  return all;
}

void init_unit_range(float* out, const UnitLayout& unit, uint64_t seed, float init_std, int64_t begin, int64_t end) {
  for (const TensorSlot& t : unit.tensors) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    float* dst = out + (lo - begin);
    if (t.spec.init == InitKind::kOnes) {
      std::fill(dst, dst + (hi - lo), 1.0f);
      continue;
    }
    const PhiloxKey key = philox_key(seed, t.spec.name);
    for (int64_t k = lo - t.offset; k < hi - t.offset; ++k)
      *dst++ = static_cast<float>(random_normal(key, static_cast<uint64_t>(t.logical_index(k))) * init_std);
  }
}

void init_unit(float* flat, const UnitLayout& unit, uint64_t seed, float init_std) {
  init_unit_range(flat, unit, seed, init_std, 0, unit.numel);
}

}  // namespace sp::model
