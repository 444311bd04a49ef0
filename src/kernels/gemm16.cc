// Gemm16 selection (gemm16.h): names, the capability probe (cached once per process) and the pure
// resolution rule. The implementations live in gemm16_onednn.cc and gemm16_fallback.cc.
#include "kernels/gemm16.h"

#include "core/check.h"
#include "tensor/float16.h"

namespace sp::kernels {

Result<Gemm16Kind> gemm16_kind_from_name(std::string_view name) {
  if (name == "auto") return Gemm16Kind::kAuto;
  if (name == "onednn") return Gemm16Kind::kOneDnn;
  if (name == "fallback") return Gemm16Kind::kFallback;
  return invalid_argument("16-bit GEMM backend '{}' is unknown", name)
      .with_hint(
          "use \"auto\" (oneDNN where the CPU multiplies 16-bit natively, else the fallback), \"onednn\" or "
          "\"fallback\" (widen to fp32, then sgemm)");
}

std::string_view gemm16_kind_name(Gemm16Kind kind) {
  switch (kind) {
    case Gemm16Kind::kAuto:
      return "auto";
    case Gemm16Kind::kOneDnn:
      return "onednn";
    case Gemm16Kind::kFallback:
      return "fallback";
  }
  return "?";
}

const Gemm16Capability& gemm16_capability() {
  static const Gemm16Capability cap = onednn_capability();
  return cap;
}

Result<Gemm16Kind> gemm16_resolve(Gemm16Kind kind, DType dtype, const Gemm16Capability& cap) {
  if (!is_float16(dtype))
    return invalid_argument("16-bit GEMM for dtype {}: only BF16 and F16 have a 16-bit GEMM", dtype_name(dtype));
  const bool native = dtype == DType::kBF16 ? cap.onednn_bf16 : cap.onednn_f16;
  switch (kind) {
    case Gemm16Kind::kFallback:
      return Gemm16Kind::kFallback;
    case Gemm16Kind::kAuto:
      return native ? Gemm16Kind::kOneDnn : Gemm16Kind::kFallback;
    case Gemm16Kind::kOneDnn:
      if (native) return Gemm16Kind::kOneDnn;
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("16-bit GEMM backend 'onednn' cannot multiply {} on this CPU (oneDNN's ISA: {})",
                                dtype_name(dtype), cap.onednn_isa.empty() ? "unknown" : cap.onednn_isa),
                    dtype == DType::kBF16
                        ? "bf16 needs AVX512-BF16 or AMX; use gemm16 = \"auto\" or \"fallback\" on this CPU"
                        : "oneDNN multiplies fp16 only with AVX512-FP16; use gemm16 = \"auto\" or \"fallback\"");
  }
  return internal_error("unreachable Gemm16Kind");
}

Result<std::unique_ptr<Gemm16>> make_gemm16(Gemm16Kind kind, DType dtype) {
  auto resolved = gemm16_resolve(kind, dtype, gemm16_capability());
  if (!resolved.ok()) return resolved.status();
  if (*resolved == Gemm16Kind::kOneDnn) return make_gemm16_onednn(dtype);
  return make_gemm16_fallback(dtype);
}

int64_t gemm16_workspace_floats(Gemm16Kind resolved, int64_t M, int64_t N, int64_t K) {
  SP_CHECK(resolved != Gemm16Kind::kAuto, "gemm16_workspace_floats needs a resolved backend kind");
  return resolved == Gemm16Kind::kFallback ? M * K + K * N : 0;
}

}  // namespace sp::kernels
