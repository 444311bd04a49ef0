// The oneDNN 16-bit GEMM (gemm16.h): a oneDNN matmul primitive with bf16 (or f16) source and weights,
// strided plain layouts for the row-major operands and their transposes, f32 destination, alpha as
// the output scale and beta as a sum post-op. Primitives are cached per (shape, strides, alpha, beta,
// threads): building a primitive descriptor costs ~0.1 ms, about a 64×256×64 product.
// Not thread-safe (one backend object per rank, used from the training thread). oneDNN's own
// scratchpad is library-internal memory like OpenBLAS's buffers, outside the ledger (docs/memory.md).
// Threads: oneDNN (Debian's build uses OpenMP) runs with kernels::blas_threads() threads, the same
// pinned count as OpenBLAS (parallel.blas_threads); it is part of the cache key.
// Reference: oneDNN Developer Guide, Matrix Multiplication primitive; docs/kernels.md §16-bit GEMM.
#include <omp.h>

#include <bit>
#include <dnnl.hpp>
#include <map>
#include <optional>
#include <tuple>

#include "core/check.h"
#include "kernels/gemm16.h"
#include "kernels/matmul.h"
#include "tensor/float16.h"

namespace sp::kernels {
namespace {

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return fmt::format("isa-0x{:x}", static_cast<unsigned>(isa));
  }
}

dnnl::memory::data_type dnnl_type(DType t) {
  return t == DType::kBF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f16;
}

// The operand descriptors of C (M, N) = op(A) (M, K) · op(B) (K, N) over row-major storage.
struct Descs {
  dnnl::memory::desc a, b, c;
};
Descs descs_of(DType t, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, int64_t lda, int64_t ldb,
               int64_t ldc) {
  using dims = dnnl::memory::dims;
  // Logical dims are those of op(X); strides say where element (i, j) of op(X) lives.
  return {dnnl::memory::desc({M, K}, dnnl_type(t), trans_a ? dims{1, lda} : dims{lda, 1}),
          dnnl::memory::desc({K, N}, dnnl_type(t), trans_b ? dims{1, ldb} : dims{ldb, 1}),
          dnnl::memory::desc({M, N}, dnnl::memory::data_type::f32, dims{ldc, 1})};
}

// A primitive descriptor for the product, or none if oneDNN has no implementation (dnnl::error caught here:
// oneDNN's C++ API reports "unimplemented" by exception, which never leaves this file).
std::optional<dnnl::matmul::primitive_desc> try_matmul(const dnnl::engine& eng, const Descs& d, float alpha,
                                                       float beta) {
  try {
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops po;
      po.append_sum(beta);
      attr.set_post_ops(po);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(d.a, d.b, d.c), attr, eng);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

class OneDnnGemm16 final : public Gemm16 {
 public:
  explicit OneDnnGemm16(DType dtype) : dtype_(dtype), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    SP_CHECK(is_float16(dtype), "oneDNN 16-bit GEMM for {}", dtype_name(dtype));
    name_ = onednn_name();
  }
  const std::string& name() const override { return name_; }
  DType dtype() const override { return dtype_; }
  Gemm16Kind kind() const override { return Gemm16Kind::kOneDnn; }
  int64_t workspace_floats(int64_t M, int64_t N, int64_t K) const override {
    return gemm16_workspace_floats(Gemm16Kind::kOneDnn, M, N, K);
  }

  void gemm(float* c, const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
            int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta, float*) override {
    if (M == 0 || N == 0) return;
    SP_CHECK_GE(lda, trans_a ? M : K, "gemm16: lda smaller than a row of A");
    SP_CHECK_GE(ldb, trans_b ? K : N, "gemm16: ldb smaller than a row of B");
    SP_CHECK_GE(ldc, N, "gemm16: ldc smaller than a row of C");
    if (K == 0) {  // as kernels::gemm: C scaled by beta; beta = 0 overwrites, even NaN
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
      return;
    }
    const int threads = blas_threads();
    if (threads != omp_threads_) {
      omp_set_num_threads(threads);
      omp_threads_ = threads;
    }
    const Key key{
        M,      N, K, trans_a, trans_b, lda, ldb, ldc, std::bit_cast<uint32_t>(alpha), std::bit_cast<uint32_t>(beta),
        threads};
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      const Descs d = descs_of(dtype_, M, N, K, trans_a, trans_b, lda, ldb, ldc);
      auto pd = try_matmul(engine_, d, alpha, beta);
      SP_CHECK(pd.has_value(), "oneDNN has no {} matmul for ({}, {}, {}) on ISA {} although it had at selection",
               dtype_name(dtype_), M, N, K, isa_name(dnnl::get_effective_cpu_isa()));
      Entry e{dnnl::matmul(*pd), dnnl::memory(d.a, engine_, DNNL_MEMORY_NONE),
              dnnl::memory(d.b, engine_, DNNL_MEMORY_NONE), dnnl::memory(d.c, engine_, DNNL_MEMORY_NONE)};
      it = cache_.emplace(key, std::move(e)).first;
    }
    Entry& e = it->second;
    e.a.set_data_handle(const_cast<uint16_t*>(a));
    e.b.set_data_handle(const_cast<uint16_t*>(b));
    e.c.set_data_handle(c);
    e.prim.execute(stream_, {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
    stream_.wait();
  }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, uint32_t, uint32_t, int>;
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory a, b, c;
  };
  DType dtype_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::string name_;
  std::map<Key, Entry> cache_;
  int omp_threads_ = -1;
};

}  // namespace

std::unique_ptr<Gemm16> make_gemm16_onednn(DType dtype) { return std::make_unique<OneDnnGemm16>(dtype); }

std::string onednn_name() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("onednn-{}.{}.{}/{}", v->major, v->minor, v->patch, isa_name(dnnl::get_effective_cpu_isa()));
}

Gemm16Capability onednn_capability() {
  Gemm16Capability cap;
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  cap.onednn_isa = isa_name(isa);
  const auto bf16_bits = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  const bool native_bf16 = (static_cast<unsigned>(isa) & bf16_bits) == bf16_bits;
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  auto probe = [&](DType t) { return try_matmul(eng, descs_of(t, 16, 16, 16, false, true, 16, 16, 16), 1.0f, 0.0f); };
  cap.onednn_bf16 = native_bf16 && probe(DType::kBF16).has_value();
  cap.onednn_f16 = probe(DType::kF16).has_value();
  return cap;
}

}  // namespace sp::kernels
