#include "ckpt/shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "core/check.h"
#include "core/hash.h"
#include "core/json_io.h"
#include "core/threads.h"

namespace sp::ckpt {
using nlohmann::json;

Geometry geometry_of(const Shape& shape, const model::Slice& slice) {
  SP_CHECK(shape.size() == 1 || shape.size() == 2, "checkpoint tensors are 1-D or 2-D, got {} dims", shape.size());
  Geometry g;
  g.cols = shape.back();
  g.width = g.cols;
  if (slice.dim == 0 && shape.size() == 2) g.row0 = slice.begin;
  if ((slice.dim == 1 && shape.size() == 2) || (slice.dim == 0 && shape.size() == 1)) {
    g.col0 = slice.begin;
    g.width = slice.length;
  }
  return g;
}

WeightIndex weight_index(const model::LlamaConfig& config) {
  WeightIndex index;
  for (model::WeightSpec& s : model::weight_table(config)) {
    std::string name = s.name;
    index.emplace(std::move(name), std::move(s));
  }
  return index;
}

ShardImage build_shard(int rank, const std::string& coords, int tp_rank, int64_t step,
                       const std::vector<StateSpan>& spans, bool digests, const nlohmann::json& state) {
  ShardImage img;
  // Fragments: each span cut at tensor boundaries; the same cut for every kind.
  struct Cut {
    const StateSpan* span;
    const model::TensorSlot* slot;
    int64_t lo, hi;  // elements of the tensor's local shard
  };
  std::vector<Cut> cuts;
  for (const StateSpan& s : spans) {
    SP_CHECK(s.unit != nullptr && 0 <= s.begin && s.begin <= s.end && s.end <= s.unit->numel,
             "state span [{}, {}) outside its unit", s.begin, s.end);
    for (const model::TensorSlot& t : s.unit->tensors) {
      const int64_t lo = std::max(s.begin, t.offset), hi = std::min(s.end, t.offset + t.numel);
      if (lo < hi) cuts.push_back({&s, &t, lo - t.offset, hi - t.offset});
    }
  }
  json meta = json::array();
  for (StateKind kind : kStateKinds) {
    for (const Cut& c : cuts) {
      const model::TensorSlot& t = *c.slot;
      Fragment f;
      f.tensor = t.spec.name;
      f.kind = kind;
      f.shape = t.spec.shape;
      f.slice = t.slice;
      f.tp_rank = tp_rank;
      f.local_shape = t.local_shape;
      f.begin = c.lo;
      f.end = c.hi;
      f.stored = fmt::format("{}/{}/tp{}/{}-{}", state_kind_name(kind), f.tensor, tp_rank, f.begin, f.end);
      const float* src = c.span->data[static_cast<size_t>(kind)];
      SP_CHECK(src != nullptr, "state span of unit {} has no {} data", c.span->unit->name, state_kind_name(kind));
      const bool whole = f.begin == 0 && f.end == t.numel;
      const float* first = src + (t.offset + f.begin - c.span->begin);
      f.xxh3 = xxh3_64(first, sizeof(float) * static_cast<size_t>(f.size()));
      img.writer.add(f.stored, DType::kF32, whole ? f.local_shape : Shape{f.size()}, first);
      meta.push_back({{"name", f.stored},
                      {"tensor", f.tensor},
                      {"kind", state_kind_name(kind)},
                      {"shape", f.shape},
                      {"slice", {f.slice.dim, f.slice.begin, f.slice.length}},
                      {"tp_rank", f.tp_rank},
                      {"range", {f.begin, f.end}},
                      {"xxh3", fmt::format("{:016x}", f.xxh3)}});
      img.fragments.push_back(std::move(f));
    }
  }
  img.writer.set_metadata(std::string(kMetaFormat), std::string(kShardFormat));
  img.writer.set_metadata(std::string(kMetaVersion), std::to_string(kFormatVersion));
  img.writer.set_metadata(std::string(kMetaRank), std::to_string(rank));
  img.writer.set_metadata(std::string(kMetaCoords), coords);
  img.writer.set_metadata(std::string(kMetaStep), std::to_string(step));
  img.writer.set_metadata(std::string(kMetaFragments), meta.dump());
  if (!state.is_null()) img.writer.set_metadata(std::string(kMetaState), state.dump());
  // The file is the header followed by the tensors in insertion order (safetensors.h): hash that.
  img.header = img.writer.header_bytes();
  uint64_t bytes = img.header.size();
  for (size_t i = 0; i < img.fragments.size(); ++i) {
    const Fragment& f = img.fragments[i];
    const Cut& c = cuts[i % cuts.size()];
    const float* src = c.span->data[static_cast<size_t>(f.kind)] + (c.slot->offset + f.begin - c.span->begin);
    img.tensors.push_back({src, sizeof(float) * static_cast<size_t>(f.size())});
    bytes += sizeof(float) * static_cast<uint64_t>(f.size());
  }
  img.bytes = bytes;
  SP_CHECK_EQ(img.bytes, img.writer.file_size(), "shard image size");
  if (digests) digest_shard(img);
  return img;
}

void digest_shard(ShardImage& img) {
  std::vector<ByteSpan> file = {{img.header.data(), img.header.size()}};
  file.insert(file.end(), img.tensors.begin(), img.tensors.end());
  StreamDigests d = sha256_stream(file, kShaChunkBytes, usable_cpus());
  img.sha256 = std::move(d.sha256);
  img.sha256_chunks = std::move(d.chunks);
}

namespace {

Result<int64_t> parse_decimal(const std::map<std::string, std::string>& meta, std::string_view key,
                              const std::string& label, int64_t lo, int64_t hi) {
  const auto it = meta.find(std::string(key));
  if (it == meta.end()) return corrupt("shard '{}': metadata has no {:?}", label, key);
  const std::string& s = it->second;
  int64_t v = 0;
  const bool canonical = !s.empty() && s.size() <= 12 && (s == "0" || s[0] != '0') &&
                         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (canonical)
    for (char c : s) v = v * 10 + (c - '0');
  if (!canonical || v < lo || v > hi)
    return corrupt("shard '{}': metadata {:?} = {:?} is not an integer in [{}, {}]", label, key, s.substr(0, 40), lo,
                   hi);
  return v;
}

Result<Fragment> parse_fragment(const json& j, size_t i, const std::string& label, const WeightIndex& weights,
                                int tp_size) {
  JsonFields f(j, "shard '" + label + "'", fmt::format("fragments[{}]", i));
  SP_RETURN_IF_ERROR(f.expect_keys({"name", "tensor", "kind", "shape", "slice", "tp_rank", "range", "xxh3"}));
  Fragment fr;
  SP_ASSIGN_OR_RETURN(fr.stored, f.string("name"));
  SP_ASSIGN_OR_RETURN(fr.tensor, f.string("tensor"));
  const auto spec_it = weights.find(fr.tensor);
  if (spec_it == weights.end())
    return corrupt("shard '{}': fragment {:?} is of tensor {:?}, which this model does not have", label,
                   fr.stored.substr(0, 160), fr.tensor.substr(0, 160))
        .with_hint("the checkpoint was saved for a different model configuration");
  const model::WeightSpec& spec = spec_it->second;
  SP_ASSIGN_OR_RETURN(const std::string kind, f.string("kind"));
  const auto kind_it = std::find(kStateKindNames.begin(), kStateKindNames.end(), kind);
  if (kind_it == kStateKindNames.end())
    return f.error("kind", fmt::format("= {:?} is not a state kind", kind.substr(0, 40)));
  fr.kind = static_cast<StateKind>(kind_it - kStateKindNames.begin());
  auto int_list = [&](std::string_view key, size_t n_min, size_t n_max) -> Result<std::vector<int64_t>> {
    SP_ASSIGN_OR_RETURN(const json* a, f.array(key));
    if (a->size() < n_min || a->size() > n_max) return f.error(key, fmt::format("has {} entries", a->size()));
    std::vector<int64_t> out;
    for (const json& v : *a) {
      if (!v.is_number_integer()) return f.error(key, "holds a value that is not an integer");
      if (v.is_number_unsigned() ? v.get<uint64_t>() > (uint64_t{1} << 62) : (v.get<int64_t>() < -1))
        return f.error(key, "holds an out-of-range value");
      out.push_back(v.get<int64_t>());
    }
    return out;
  };
  SP_ASSIGN_OR_RETURN(fr.shape, int_list("shape", 1, 2));
  if (fr.shape != spec.shape)
    return corrupt("shard '{}': tensor {:?} has logical shape {} in the checkpoint but {} in this model", label,
                   fr.tensor, shape_string(fr.shape), shape_string(spec.shape))
        .with_hint("the checkpoint was saved for a different model configuration");
  SP_ASSIGN_OR_RETURN(const std::vector<int64_t> slice, int_list("slice", 3, 3));
  fr.slice = {static_cast<int>(slice[0]), slice[1], slice[2]};
  SP_ASSIGN_OR_RETURN(const int64_t tp_rank, f.integer("tp_rank", 0, tp_size - 1));
  fr.tp_rank = static_cast<int>(tp_rank);
  // The slice must be the one model::unit_layout gives tp rank `tp_rank` of `tp_size`.
  model::Slice want{-1, 0, spec.shape[0]};
  if (spec.tp_dim >= 0) {
    const int64_t full = spec.shape[static_cast<size_t>(spec.tp_dim)];
    if (full % tp_size != 0)
      return f.error("slice", fmt::format("cannot split dim {} = {} over tp = {}", spec.tp_dim, full, tp_size));
    want = {spec.tp_dim, full / tp_size * tp_rank, full / tp_size};
  }
  if (fr.slice.dim != want.dim || fr.slice.begin != want.begin || fr.slice.length != want.length)
    return f.error(
        "slice", fmt::format("= [{}, {}, {}] is not tp rank {} of {}'s slice [{}, {}, {}] of {:?}", slice[0], slice[1],
                             slice[2], tp_rank, tp_size, want.dim, want.begin, want.length, fr.tensor));
  fr.local_shape = fr.shape;
  if (want.dim >= 0) fr.local_shape[static_cast<size_t>(want.dim)] = want.length;
  SP_ASSIGN_OR_RETURN(const std::vector<int64_t> range, int_list("range", 2, 2));
  fr.begin = range[0];
  fr.end = range[1];
  const int64_t local = shape_numel(fr.local_shape);
  if (!(0 <= fr.begin && fr.begin < fr.end && fr.end <= local))
    return f.error("range", fmt::format("= [{}, {}) is not a non-empty range inside the {} local elements of {:?}",
                                        fr.begin, fr.end, local, fr.tensor));
  SP_ASSIGN_OR_RETURN(const std::string xxh, f.string("xxh3"));
  bool hex = xxh.size() == 16;
  for (char c : xxh) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) return f.error("xxh3", "is not 16 lowercase hex digits");
  fr.xxh3 = std::stoull(xxh, nullptr, 16);
  return fr;
}

}  // namespace

Result<ShardContent> read_shard_metadata(const SafetensorsReader& reader, const WeightIndex& weights, int tp_size,
                                         int expected_rank, int64_t expected_step) {
  const std::string& label = reader.label();
  const auto& meta = reader.metadata();
  for (const auto& [k, v] : meta) {
    const bool known = k == kMetaFormat || k == kMetaVersion || k == kMetaRank || k == kMetaCoords || k == kMetaStep ||
                       k == kMetaFragments || k == kMetaState;
    if (!known) return corrupt("shard '{}': unknown metadata key {:?}", label, k.substr(0, 80));
  }
  if (!meta.count(std::string(kMetaFormat)) || meta.at(std::string(kMetaFormat)) != kShardFormat)
    return corrupt("shard '{}': metadata {:?} is not {:?}: not a shardproof checkpoint shard", label, kMetaFormat,
                   kShardFormat);
  SP_ASSIGN_OR_RETURN(const int64_t version, parse_decimal(meta, kMetaVersion, label, 0, INT32_MAX));
  if (version < kOldestFormatVersion || version > kFormatVersion)
    return corrupt("shard '{}': format version {} is not supported (this build reads {} to {})", label, version,
                   kOldestFormatVersion, kFormatVersion);
  ShardContent out;
  SP_ASSIGN_OR_RETURN(const int64_t rank, parse_decimal(meta, kMetaRank, label, 0, kMaxWorld - 1));
  SP_ASSIGN_OR_RETURN(out.step, parse_decimal(meta, kMetaStep, label, 0, kMaxStep));
  if (rank != expected_rank || out.step != expected_step)
    return corrupt("shard '{}' says it is rank {} of step {}; the manifest lists it as rank {} of step {}", label, rank,
                   out.step, expected_rank, expected_step);
  out.rank = static_cast<int>(rank);
  if (!meta.count(std::string(kMetaCoords))) return corrupt("shard '{}': metadata has no {:?}", label, kMetaCoords);
  out.coords = meta.at(std::string(kMetaCoords));
  if (!meta.count(std::string(kMetaFragments)))
    return corrupt("shard '{}': metadata has no {:?}", label, kMetaFragments);
  if (meta.count(std::string(kMetaState))) {
    SP_ASSIGN_OR_RETURN(out.state,
                        parse_json_strict(meta.at(std::string(kMetaState)), "shard '" + label + "' state", 8));
    if (!out.state.is_object()) return corrupt("shard '{}': metadata state is not a JSON object", label);
  }
  SP_ASSIGN_OR_RETURN(const json list,
                      parse_json_strict(meta.at(std::string(kMetaFragments)), "shard '" + label + "' fragments", 3));
  if (!list.is_array()) return corrupt("shard '{}': metadata fragments is not a JSON array", label);
  if (list.size() != reader.tensors().size())
    return corrupt("shard '{}': {} fragments described for {} stored tensors", label, list.size(),
                   reader.tensors().size());
  std::set<std::string, std::less<>> seen;
  using Key = std::tuple<std::string, StateKind, int, int64_t, int64_t>;  // tensor, kind, tp rank, begin, end
  std::vector<Key> ranges;
  for (size_t i = 0; i < list.size(); ++i) {
    SP_ASSIGN_OR_RETURN(Fragment fr, parse_fragment(list[i], i, label, weights, tp_size));
    if (!seen.insert(fr.stored).second)
      return corrupt("shard '{}': fragment {:?} is described twice", label, fr.stored.substr(0, 160));
    const SafetensorsEntry* e = reader.find(fr.stored);
    if (e == nullptr) return corrupt("shard '{}': fragment {:?} has no stored tensor", label, fr.stored.substr(0, 160));
    if (e->dtype != DType::kF32)
      return corrupt("shard '{}': tensor {:?} is {}, expected F32", label, fr.stored.substr(0, 160),
                     dtype_name(e->dtype));
    const bool whole_shape = e->shape == fr.local_shape && fr.begin == 0 && fr.end == shape_numel(fr.local_shape);
    if (!whole_shape && e->shape != Shape{fr.size()})
      return corrupt("shard '{}': tensor {:?} has shape {}, but its fragment holds {} elements", label,
                     fr.stored.substr(0, 160), shape_string(e->shape), fr.size());
    ranges.emplace_back(fr.tensor, fr.kind, fr.tp_rank, fr.begin, fr.end);
    out.entries.push_back(*e);
    out.fragments.push_back(std::move(fr));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const auto& [t0, k0, r0, b0, e0] = ranges[i - 1];
    const auto& [t1, k1, r1, b1, e1] = ranges[i];
    if (t0 == t1 && k0 == k1 && r0 == r1 && b1 < e0)
      return corrupt("shard '{}': two {} fragments of {:?} overlap ([{}, {}) and [{}, {}))", label, state_kind_name(k0),
                     t0, b0, e0, b1, e1);
  }
  return out;
}

}  // namespace sp::ckpt
