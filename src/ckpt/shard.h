// One rank's checkpoint shard: a safetensors file whose tensors are fragments of logical tensors
// (a contiguous range of one rank's tensor-parallel shard of one parameter or AdamW moment), and
// whose "__metadata__" says, per stored tensor, what it is (docs/formats/checkpoint.md §Shard).
// Not the commit protocol (save.h) and not the assembly of logical tensors (reshard.h).
// Invariant: read_shard_metadata accepts only a shard whose every stored tensor is described exactly
// once, is F32 with the described element count, and names a tensor of the model with its logical
// shape and a tensor-parallel slice that lies inside it; geometry() then cannot index out of range.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/format.h"
#include "ckpt/safetensors.h"
#include "core/hash.h"
#include "model/weights.h"

namespace sp::ckpt {

// What a rank owns of one unit's flat buffer (parallel::Engine::StatePiece without the engine):
// elements [begin, end) of the unit's tensor-parallel local buffer, one pointer per StateKind, each
// pointing at element `begin`.
struct StateSpan {
  const model::UnitLayout* unit = nullptr;
  int64_t begin = 0, end = 0;
  std::array<float*, 3> data = {nullptr, nullptr, nullptr};  // indexed by StateKind
};

// A stored tensor: local elements [begin, end) (row-major) of the shard `slice` of logical tensor
// `tensor`, as held by tensor-parallel rank `tp_rank` of `tp_size`.
struct Fragment {
  std::string stored;  // the tensor's name in the shard file
  std::string tensor;  // canonical (HF) name
  StateKind kind = StateKind::kParam;
  Shape shape;         // logical shape
  model::Slice slice;  // dim −1: the whole tensor (replicated under TP)
  int tp_rank = 0;
  Shape local_shape;  // shape with the sliced dim replaced by slice.length
  int64_t begin = 0, end = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the stored bytes: locates damage that the file's SHA-256 found
  int64_t size() const { return end - begin; }
};

// Logical element of local element k of a (slice of a) matrix viewed as rows × cols:
//   L(k) = (row0 + k / width) · cols + col0 + k % width
// A 1-D tensor is one row; dim −1 and row slices have width == cols (contiguous in L).
struct Geometry {
  int64_t cols = 1, width = 1, row0 = 0, col0 = 0;
  int64_t logical(int64_t k) const { return (row0 + k / width) * cols + col0 + k % width; }
  bool full_rows() const { return width == cols; }
};
Geometry geometry_of(const Shape& shape, const model::Slice& slice);

// The image of one rank's shard, ready to write. Stored tensors point into the spans' memory (not
// copied): the spans must stay unchanged until the file is written. bytes and the digests describe
// the file write() will produce (hashed from memory, header included).
struct ShardImage {
  SafetensorsWriter writer;
  std::vector<Fragment> fragments;
  std::string header;             // writer.header_bytes(): the file's first bytes
  std::vector<ByteSpan> tensors;  // then these, in order (pointing into the spans)
  uint64_t bytes = 0;
  std::string sha256;                      // whole file      } filled by digest_shard()
  std::vector<std::string> sha256_chunks;  // per kShaChunkBytes (format.h)
};
// `tp_rank`: this rank's tensor-parallel coordinate (recorded for replicated tensors). With
// `digests`, the image is hashed at once; a saver may instead hash it while it writes the file.
// `state` (kMetaState): the training state the manifest records, {"optimizer_steps", "loader_cursor"}.
ShardImage build_shard(int rank, const std::string& coords, int tp_rank, int64_t step,
                       const std::vector<StateSpan>& spans, bool digests = true,
                       const nlohmann::json& state = nlohmann::json());
// img.sha256 and img.sha256_chunks from img.header and the memory img.tensors points to (on every usable CPU). Safe
// to run while img.writer.write() runs on another thread: both only read that memory.
void digest_shard(ShardImage& img);

struct ShardContent {
  int rank = 0;
  int64_t step = 0;
  std::string coords;
  nlohmann::json state;                   // kMetaState, null when the shard has none (format 2, tests)
  std::vector<Fragment> fragments;        // in the order of the metadata
  std::vector<SafetensorsEntry> entries;  // entries[i]: fragments[i]'s stored tensor in the file
};

using WeightIndex = std::map<std::string, model::WeightSpec, std::less<>>;
WeightIndex weight_index(const model::LlamaConfig& config);

// Validates the shard's metadata against its safetensors entries and the model's weight table
// (`tp_size`: the saving topology's tensor-parallel size). Errors name the file and the tensor.
Result<ShardContent> read_shard_metadata(const SafetensorsReader& reader, const WeightIndex& weights, int tp_size,
                                         int expected_rank, int64_t expected_step);

}  // namespace sp::ckpt
