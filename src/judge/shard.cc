// The pieces of a logical tensor (judge/shard.h): the one parser, the local → logical index rule and the tiling check.
#include "judge/shard.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace sp::judge {
using json = nlohmann::json;
namespace {

// The integers of a JSON array of `n` of them, or nullopt.
std::optional<std::vector<int64_t>> ints(const json& v, size_t n) {
  if (!v.is_array() || v.size() != n) return std::nullopt;
  std::vector<int64_t> out;
  for (const json& x : v) {
    if (!x.is_number_integer()) return std::nullopt;
    out.push_back(x.get<int64_t>());
  }
  return out;
}

std::string dim_name(const Shape& shape, size_t d) {
  if (shape.size() == 2) return d == 0 ? "rows" : "columns";
  return fmt::format("elements of dim {}", d);
}

Result<std::optional<Shard>> even(const json& v, const Shape& shape) {
  const auto x = ints(v, 3);
  if (!x)
    return invalid_argument(
        "must be null, [dim, index, parts], {{\"offsets\", \"sizes\"}} or {{\"start\", \"numel\"}}");
  Shard s{.form = Shard::Form::kEven,
          .dim = static_cast<int>((*x)[0]),
          .index = static_cast<int>((*x)[1]),
          .parts = static_cast<int>((*x)[2])};
  if ((s.dim != 0 && s.dim != 1) || s.parts < 1 || s.index < 0 || s.index >= s.parts || (*x)[0] != s.dim ||
      (*x)[2] != s.parts)
    return invalid_argument("= {}: dim must be 0 or 1 and 0 <= index < parts", v.dump());
  const auto d = static_cast<size_t>(s.dim);
  if (d >= shape.size() || shape[d] % s.parts != 0)
    return invalid_argument("= {}: a tensor of shape {} has no {} even pieces along dim {}", v.dump(),
                            shape_string(shape), s.parts, s.dim);
  s.offsets.assign(shape.size(), 0);
  s.sizes = shape;
  s.sizes[d] = shape[d] / s.parts;
  s.offsets[d] = s.index * s.sizes[d];
  return std::optional<Shard>(s);
}

Result<std::optional<Shard>> box(const json& v, const Shape& shape) {
  const auto offsets = ints(v.at("offsets"), shape.size()), sizes = ints(v.at("sizes"), shape.size());
  if (!offsets || !sizes)
    return invalid_argument("= {}: offsets and sizes must be {} integers each, one per dim of the tensor's shape {}",
                            v.dump().substr(0, 120), shape.size(), shape_string(shape));
  for (size_t d = 0; d < shape.size(); ++d) {
    if ((*sizes)[d] < 0 || (*offsets)[d] < 0)
      return invalid_argument("= {}: dim {} has {} {}: a box's offsets and sizes are not negative", v.dump(), d,
                              (*sizes)[d] < 0 ? "size" : "offset", (*sizes)[d] < 0 ? (*sizes)[d] : (*offsets)[d]);
    if ((*offsets)[d] > shape[d] - (*sizes)[d])
      return invalid_argument("= {}: dim {} spans [{}, {}), outside the tensor's {} {} (shape {})", v.dump(), d,
                              (*offsets)[d], (*offsets)[d] + (*sizes)[d], shape[d], dim_name(shape, d),
                              shape_string(shape));
  }
  return std::optional<Shard>(Shard{.form = Shard::Form::kBox, .offsets = *offsets, .sizes = *sizes});
}

Result<std::optional<Shard>> fragment(const json& v, const Shape& shape) {
  const json &a = v.at("start"), &b = v.at("numel");
  if (!a.is_number_integer() || !b.is_number_integer())
    return invalid_argument("= {}: start and numel must be integers", v.dump().substr(0, 120));
  const int64_t start = a.get<int64_t>(), numel = b.get<int64_t>(), total = shape_numel(shape);
  if (start < 0 || numel < 0) return invalid_argument("= {}: a fragment's start and numel are not negative", v.dump());
  if (start > total - numel)
    return invalid_argument("= {}: elements [{}, {}) pass the tensor's {} elements (shape {})", v.dump(), start,
                            start + numel, total, shape_string(shape));
  return std::optional<Shard>(Shard{.form = Shard::Form::kFragment, .offsets = {start}, .sizes = {numel}});
}

}  // namespace

Result<std::optional<Shard>> parse_shard(const json& v, const Shape& shape) {
  if (v.is_null()) return std::optional<Shard>();
  if (v.is_object() && v.size() == 2 && v.contains("offsets") && v.contains("sizes")) return box(v, shape);
  if (v.is_object() && v.size() == 2 && v.contains("start") && v.contains("numel")) return fragment(v, shape);
  return even(v, shape);
}

std::string Shard::to_string() const {
  switch (form) {
    case Form::kEven:
      return fmt::format("{} {}/{}", dim == 0 ? "rows" : "columns", index, parts);
    case Form::kBox:
      return fmt::format("box [{}]+[{}]", fmt::join(offsets, ", "), fmt::join(sizes, ", "));
    case Form::kFragment:
      return fmt::format("elements [{}, {})", offsets[0], offsets[0] + sizes[0]);
  }
  return "";
}

int64_t Shard::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Shape Shard::local_shape() const { return sizes; }

int64_t Shard::logical_index(const Shape& shape, int64_t k) const {
  if (form == Form::kFragment) return offsets[0] + k;
  // Row-major: peel the local coordinates off k from the last dim, add the offsets, recompose in the shape.
  int64_t logical = 0, stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t local = sizes[d] > 0 ? k % sizes[d] : 0;
    k = sizes[d] > 0 ? k / sizes[d] : 0;
    logical += (offsets[d] + local) * stride;
    stride *= shape[d];
  }
  return logical;
}

void Shard::for_each_run(const Shape& shape, const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  const int64_t n = numel();
  if (n == 0) return;
  if (form == Form::kFragment) return fn(offsets[0], 0, n);
  // A run: the last dim the box cuts, times every whole dim after it (contiguous in the logical tensor).
  int64_t run = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    run *= sizes[d];
    if (sizes[d] != shape[d]) break;
  }
  for (int64_t k = 0; k < n; k += run) fn(logical_index(shape, k), k, run);
}

std::vector<int> Shard::cut_dims(const Shape& shape) const {
  if (form == Form::kFragment) return numel() == shape_numel(shape) ? std::vector<int>{} : std::vector<int>{-1};
  std::vector<int> out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (sizes[d] != shape[d]) out.push_back(static_cast<int>(d));
  return out;
}

PieceKey piece_key(const std::optional<Shard>& s, const Shape& shape) {
  if (!s) return {false, std::vector<int64_t>(shape.size(), 0), shape};
  return {s->form == Shard::Form::kFragment, s->offsets, s->sizes};
}

std::string piece_name(const std::optional<Shard>& s) { return s ? s->to_string() : "whole"; }

namespace {

// "logical elements [a, b)", and for a matrix where the first of them is.
std::string elements(const Shape& shape, int64_t a, int64_t b) {
  std::string out = fmt::format("logical elements [{}, {})", a, b);
  if (shape.size() == 2 && shape[1] > 0) out += fmt::format(" (from row {}, column {})", a / shape[1], a % shape[1]);
  return out;
}

std::string holder(const std::optional<Shard>& s, int rank) { return fmt::format("rank {}'s {}", rank, piece_name(s)); }

}  // namespace

std::string tiling_problem(const Shape& shape, const std::vector<std::pair<std::optional<Shard>, int>>& pieces) {
  struct Run {
    int64_t first, count;
    size_t piece;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].first) {
      runs.push_back({0, shape_numel(shape), i});
      continue;
    }
    pieces[i].first->for_each_run(shape, [&](int64_t logical, int64_t, int64_t count) {
      runs.push_back({logical, count, i});
    });
  }
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.first != b.first ? a.first < b.first : a.count < b.count; });
  int64_t at = 0;
  size_t last = 0;
  for (const Run& r : runs) {
    if (r.first > at) return elements(shape, at, r.first) + " are in no piece";
    if (r.first < at)
      return fmt::format("{} are in two pieces: {} and {}", elements(shape, r.first, std::min(at, r.first + r.count)),
                         holder(pieces[last].first, pieces[last].second),
                         holder(pieces[r.piece].first, pieces[r.piece].second));
    at = r.first + r.count;
    last = r.piece;
  }
  if (at != shape_numel(shape)) return elements(shape, at, shape_numel(shape)) + " are in no piece";
  return "";
}

}  // namespace sp::judge
