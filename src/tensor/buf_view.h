// BufView / ConstBufView: a typed, non-owning view of a flat buffer (pointer, element count, dtype).
// Precision is a property of the buffer (STYLE.md habit 16): code above kernels/ passes views and never
// picks between an fp32 and a 16-bit twin of an API; the per-dtype loop is chosen inside, in kernels/
// (or here, for element conversions). Not a Tensor: no name, no shape, no ledger account, no ownership;
// a view is valid while the buffer it points into is.
// Invariant: `data` points at `count` elements of `dtype` (count ≥ 0; data may be null when count is 0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "tensor/dtype.h"

namespace sp {

struct BufView {
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kF32;

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
  // Elements [begin, begin + n) of this view.
  BufView slice(int64_t begin, int64_t n) const {
    SP_CHECK(begin >= 0 && n >= 0 && begin + n <= count, "slice [{}, {}) of a view of {} elements", begin, begin + n,
             count);
    return {static_cast<char*>(data) + static_cast<size_t>(begin) * dtype_size(dtype), n, dtype};
  }
  // The elements as fp32 / as the bit patterns of a 16-bit float (BF16 or F16); SP_CHECK on another dtype.
  float* f32() const {
    SP_CHECK(dtype == DType::kF32, "a {} buffer used as F32", dtype_name(dtype));
    return static_cast<float*>(data);
  }
  uint16_t* float16() const {
    SP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "a {} buffer used as a 16-bit float", dtype_name(dtype));
    return static_cast<uint16_t*>(data);
  }
};

struct ConstBufView {
  const void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kF32;

  ConstBufView() = default;
  ConstBufView(const void* d, int64_t n, DType t) : data(d), count(n), dtype(t) {}
  ConstBufView(const BufView& v) : data(v.data), count(v.count), dtype(v.dtype) {}  // NOLINT: implicit by design

  size_t bytes() const { return static_cast<size_t>(count) * dtype_size(dtype); }
  ConstBufView slice(int64_t begin, int64_t n) const {
    SP_CHECK(begin >= 0 && n >= 0 && begin + n <= count, "slice [{}, {}) of a view of {} elements", begin, begin + n,
             count);
    return {static_cast<const char*>(data) + static_cast<size_t>(begin) * dtype_size(dtype), n, dtype};
  }
  const float* f32() const {
    SP_CHECK(dtype == DType::kF32, "a {} buffer read as F32", dtype_name(dtype));
    return static_cast<const float*>(data);
  }
  const uint16_t* float16() const {
    SP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "a {} buffer read as a 16-bit float", dtype_name(dtype));
    return static_cast<const uint16_t*>(data);
  }
};

// Views of plain fp32 arrays (tests, the parameter server's fp32 pieces).
inline BufView f32_view(float* p, int64_t n) { return {p, n, DType::kF32}; }
inline ConstBufView f32_view(const float* p, int64_t n) { return {p, n, DType::kF32}; }

// dst := src element by element, converted to dst.dtype: the same dtype is copied; fp32 → BF16/F16 rounds
// to nearest even and BF16/F16 → fp32 widens exactly (tensor/float16.h). Counts must be equal; other
// dtype pairs are refused (SP_CHECK). dst and src may be the same buffer only when the dtypes are equal.
void convert(BufView dst, ConstBufView src);

// Reads x as fp32 values: f(const float* values, int64_t offset, int64_t n) over consecutive pieces of x, an
// fp32 view in one piece, a BF16/F16 one widened exactly (convert) into an on-stack block of kWidenBlock
// values (32 KiB, L1/L2-resident while f reads it) at a time, so no fp32 copy of x is ever held.
inline constexpr int64_t kWidenBlock = 8192;
template <class F>
void for_each_f32_block(ConstBufView x, F&& f) {
  if (x.dtype == DType::kF32) {
    f(x.f32(), int64_t{0}, x.count);
    return;
  }
  alignas(64) float block[kWidenBlock];
  for (int64_t k = 0; k < x.count; k += kWidenBlock) {
    const int64_t n = x.count - k < kWidenBlock ? x.count - k : kWidenBlock;
    convert(f32_view(block, n), x.slice(k, n));
    f(static_cast<const float*>(block), k, n);
  }
}

}  // namespace sp
