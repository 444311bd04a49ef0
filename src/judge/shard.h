// The piece of a logical tensor a rank holds, in every form a recording writes (docs/formats/torch_recording.md
// §Shards): an even split `[dim, index, parts]` (Megatron's splits, FSDP2 on sizes that divide), a box
// `{"offsets", "sizes"}` (torch's distributed-checkpoint form: FSDP2's torch.chunk rows, FSDP2 + TP's 2-D boxes, an
// empty box) or a flat fragment `{"start", "numel"}` of the row-major tensor (DeepSpeed's ZeRO partitions). Every
// reader and gatherer of the judge (records, gradients, state, square roots, replay) maps local element k to its
// logical index through logical_index()/for_each_run() alone — the rule python's checksum.box_indices states.
// Not the tiling of one tensor's summaries (judge/assemble.h) — but its check, tiling_problem(), lives here.
// Invariant: a Shard that parse_shard() returned lies inside the shape it was given, with sizes ≥ 0.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tensor/tensor.h"

namespace sp::judge {

struct Shard {
  // How the recording wrote it; the box below is what every reader uses.
  enum class Form { kEven, kBox, kFragment };
  Form form = Form::kEven;
  int dim = 0, index = 0, parts = 1;  // kEven as written: piece `index` of `parts` along `dim`
  // The box: per dim the first index and the extent (kEven: resolved from the shape); kFragment: {start}, {numel}
  // of the row-major flattened tensor.
  std::vector<int64_t> offsets = {}, sizes = {};
  bool operator==(const Shard&) const = default;
  std::string to_string() const;  // "rows 1/2", "box [86, 0]+[42, 64]", "elements [4096, 6144)"
  int64_t numel() const;          // local elements (0: an empty box)
  Shape local_shape() const;      // the piece's shape in the step files (sizes; a fragment: {numel})
  // Logical (row-major) index of local element k of this piece of a tensor of `shape`.
  int64_t logical_index(const Shape& shape, int64_t k) const;
  // The piece as contiguous runs of logical elements, in local order: fn(logical first, local first, count).
  void for_each_run(const Shape& shape, const std::function<void(int64_t, int64_t, int64_t)>& fn) const;
  // The dims of `shape` the piece cuts (empty: the whole tensor); a fragment cuts the flattened tensor: {-1}.
  std::vector<int> cut_dims(const Shape& shape) const;
};

// The one parser of a shard field (records' "shard", the step files' metadata "shards"): null, [dim, index, parts],
// {"offsets", "sizes"} or {"start", "numel"}, checked against `shape`. The error is the text after the field's
// name ("= {...}: ... outside ..."); the caller names the file, line and field and adds the hint below.
Result<std::optional<Shard>> parse_shard(const nlohmann::json& v, const Shape& shape);
inline constexpr const char* kShardHint =
    "a shard is written by shardproof_torch's Recorder from the framework's own layout (DTensor placements, "
    "DeepSpeed's partitions; docs/formats/torch_recording.md §Shards): this one was edited or written by another "
    "tool — record the run again";

// (fragment?, offsets, sizes) of a piece, the whole tensor's for none: the same elements have the same key whatever
// form wrote them (a replica set, one piece of a gather).
using PieceKey = std::tuple<bool, std::vector<int64_t>, std::vector<int64_t>>;
PieceKey piece_key(const std::optional<Shard>& s, const Shape& shape);
// "rows 1/2" or "whole" (the names the even form always had), else Shard::to_string().
std::string piece_name(const std::optional<Shard>& s);

// What is wrong with distinct pieces (each with the rank that holds it) as a tiling of a tensor of `shape` — every
// logical element in exactly one piece — or "" when they tile it: the first elements in no piece, or in two (with
// both pieces and their ranks), as logical indices and, for a matrix, their row and column.
std::string tiling_problem(const Shape& shape, const std::vector<std::pair<std::optional<Shard>, int>>& pieces);

}  // namespace sp::judge
