// Tensor: an owning, ledger-accounted buffer with a name, a shape, a dtype and a category.
// Row-major and contiguous; move-only. view() / cview() hand out its elements as a typed, non-owning
// BufView (tensor/buf_view.h: pointer, count, dtype), which is what crosses the layers; a view carries
// no name and no shape.
// The name is the canonical logical name (docs/glossary.md) or, for activations and
// scratch, a descriptive one ("act.layers.3.attn_probs"); the ledger accounts bytes under it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "tensor/buf_view.h"
#include "tensor/dtype.h"
#include "tensor/memory_ledger.h"

namespace sp {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "(4, 256)"

class Tensor {
 public:
  Tensor() = default;
  Tensor(MemoryLedger& ledger, std::string name, Category category, Shape shape, DType dtype = DType::kF32);
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  bool defined() const { return data_ != nullptr; }
  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Category category() const { return category_; }

  float* f32() {
    SP_CHECK(dtype_ == DType::kF32, "tensor '{}' is {}, not F32", name_, dtype_name(dtype_));
    return static_cast<float*>(data_);
  }
  const float* f32() const { return const_cast<Tensor*>(this)->f32(); }
  // The bit patterns of a 16-bit float tensor, BF16 or F16 (tensor/float16.h).
  uint16_t* float16() {
    SP_CHECK(dtype_ == DType::kBF16 || dtype_ == DType::kF16, "tensor '{}' is {}, not a 16-bit float", name_,
             dtype_name(dtype_));
    return static_cast<uint16_t*>(data_);
  }
  const uint16_t* float16() const { return const_cast<Tensor*>(this)->float16(); }
  void* raw() { return data_; }
  const void* raw() const { return data_; }
  // Every element, typed (numel() elements of dtype()).
  BufView view() { return {data_, numel_, dtype_}; }
  ConstBufView view() const { return {data_, numel_, dtype_}; }
  ConstBufView cview() const { return view(); }

  void zero();
  // Frees the buffer now (the ledger's live bytes drop); the tensor becomes undefined.
  void reset();

 private:
  MemoryLedger* ledger_ = nullptr;
  void* data_ = nullptr;
  std::string name_;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  Category category_ = Category::kWorkspace;
};

}  // namespace sp
