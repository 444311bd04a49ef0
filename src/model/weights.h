// The weight table: every parameter of the model, by its canonical Hugging Face name, grouped in
// units (embed, layers.i, head) that are the granularity of storage, pipeline placement, ZeRO
// gathering and gradient buckets. A unit is one flat fp32 buffer; tensors are views at offsets.
// Within a block, q/k/v are adjacent rows of one (Hl+2KVl)·D × C matrix and gate/up adjacent rows of
// one 2Fl × C matrix, so each family is one GEMM.
// Tensor parallelism shards a tensor along one storage dim (HF (out, in) layout):
//   dim 0 (Megatron "column parallel", Y = X·Aᵀ with A = [A_1; …; A_p] by rows): q, k, v, gate, up, embed, lm_head
//   dim 1 ("row parallel", A = [A_1 … A_p] by columns, partial sums all-reduced): o_proj, down_proj
//   none (replicated): the RMSNorm weights.
// Initialization is shard-invariant: logical element j of tensor `name` is a pure function of
// (seed, name, j), so every topology starts from the same bits (docs/equivalence.md §2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/llama_config.h"
#include "tensor/tensor.h"

namespace sp::model {

enum class InitKind { kNormal, kOnes };

struct WeightSpec {
  std::string name;  // canonical HF name, e.g. "model.layers.3.self_attn.q_proj.weight"
  Shape shape;       // logical, (out, in) for matrices
  int tp_dim = -1;   // storage dim split by tensor parallelism, −1 = replicated
  InitKind init = InitKind::kNormal;
  bool decay = true;  // AdamW weight decay applies (matrices); not for norm weights
};

// A contiguous run [begin, begin + length) of a logical tensor along `dim`; dim −1 = the whole tensor.
struct Slice {
  int dim = -1;
  int64_t begin = 0;
  int64_t length = 0;
};

struct TensorSlot {
  WeightSpec spec;
  Shape local_shape;   // this rank's shard
  Slice slice;         // which part of the logical tensor the shard is
  int64_t offset = 0;  // in floats, within the unit's flat buffer
  int64_t numel = 0;   // of the shard
  // Logical flat index of local element k (row-major in both): the shard-invariant identity of a value.
  int64_t logical_index(int64_t k) const;
};

enum class UnitKind { kEmbed, kBlock, kHead };

struct UnitLayout {
  int id = 0;  // global unit id: 0 = embed, 1 + l = layer l, L + 1 = head
  UnitKind kind = UnitKind::kBlock;
  int layer = -1;    // for blocks
  std::string name;  // "embed", "layers.3", "head"
  std::vector<TensorSlot> tensors;
  int64_t numel = 0;                                        // flat size of the local shard of the whole unit
  const TensorSlot& tensor(std::string_view suffix) const;  // by name suffix, e.g. "q_proj.weight"
};

// Unit ids: 0 = embed, 1 + l = layer l, L + 1 = head; unit_count = L + 2. The only place this
// numbering is spelled out: everything else asks these.
int unit_count(const LlamaConfig& c);
constexpr int embed_unit() { return 0; }
constexpr int block_unit(int layer) { return 1 + layer; }
int head_unit(const LlamaConfig& c);
UnitKind unit_kind(const LlamaConfig& c, int id);
int unit_layer(int id);                               // the layer of a block unit
std::string unit_name(const LlamaConfig& c, int id);  // "embed", "layers.3", "head"
// The units of a pipeline chunk of layers [layer_begin, layer_end), in forward order: the embedding
// first if it holds it, then its blocks, then the head if it holds it.
std::vector<int> chunk_units(const LlamaConfig& c, int layer_begin, int layer_end, bool first, bool last);
// The layout of unit `id` as held by tensor-parallel rank `tp_rank` of `tp_size`.
// Requires the TP divisibility rules (checked by parallel/plan before anything is built).
UnitLayout unit_layout(const LlamaConfig& c, int id, int tp_rank, int tp_size);
// unit_layout(c, id, r, tp_size).numel, the same for every rank r, without naming the tensors (the planner's
// search asks for it millions of times).
int64_t unit_numel(const LlamaConfig& c, int id, int tp_size);
// All logical weights in canonical order (embed, layers, norm, lm_head), unsharded.
std::vector<WeightSpec> weight_table(const LlamaConfig& c);
// weight_table(c).size(), without building it.
int64_t weight_count(const LlamaConfig& c);

// A contiguous piece [begin, end) of a unit's flat buffer held at `data` (pointing at element `begin`):
// what a rank owns of a unit under ZeRO sharding, contributes to evidence or writes to a checkpoint.
// fp32, except the synchronized gradients of train.grad_dtype bf16/fp16 (GradStore::evidence_pieces),
// which stay 16-bit: the evidence widens them exactly as it reads them (TensorSummary::add_shard).
struct UnitPiece {
  const UnitLayout* unit = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t size() const { return end - begin; }
  float* f32() const { return view().f32(); }
  BufView view() const { return {data, size(), dtype}; }
};

// Fills the unit's flat buffer with its shard of the shard-invariant initialization.
void init_unit(float* flat, const UnitLayout& unit, uint64_t seed, float init_std);
// The same for the flat elements [begin, end) only, written to out[0, end - begin): the same values
// init_unit gives there (each element is a function of its logical index), so a ZeRO-3 rank draws only
// the shard it holds.
void init_unit_range(float* out, const UnitLayout& unit, uint64_t seed, float init_std, int64_t begin, int64_t end);

}  // namespace sp::model
