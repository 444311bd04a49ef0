// The memory-bound families' calibration (calibrate_probe.h): each family's kernels at a range of bytes per
// call, timed as the other probes are, divided into the bytes kernel_costs.h says they move.
#include <memory>

#include "core/hash.h"
#include "evidence/tensor_summary.h"
#include "kernels/adamw.h"
#include "kernels/cross_entropy.h"
#include "kernels/reduce.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "planner/calibrate_probe.h"
#include "planner/kernel_costs.h"
#include "tensor/float16.h"

namespace sp::planner::calibration_detail {
namespace {

// One memory family at about `target` bytes per call: the kernel(s) run and the bytes they move by the
// formulas of kernel_costs.h.
struct MemoryProbe {
  double bytes = 0;
  std::function<void()> run;
  std::shared_ptr<void> keep;  // the buffers
};

MemoryProbe memory_probe(MemoryFamily f, double target) {
  struct Bufs {
    std::vector<float> a, b, c, d, e;
    std::vector<int32_t> targets;
    std::vector<uint16_t> h;
  };
  auto buf = std::make_shared<Bufs>();
  MemoryProbe p;
  p.keep = buf;
  const auto rows_for = [&](double per_row) { return std::max<int64_t>(1, static_cast<int64_t>(target / per_row)); };
  switch (f) {
    case MemoryFamily::kNorm: {  // forward and backward over (rows, 512)
      constexpr int64_t C = 512;
      const int64_t N = rows_for((rmsnorm_forward_bytes(1, C, 4) + rmsnorm_backward_bytes(1, C)));
      buf->a = filled(N * C, 0.5f), buf->b = filled(N * C, 0.f), buf->c = filled(N, 0.f), buf->d = filled(C, 1.f);
      buf->e = filled(N * C, 0.f);
      p.bytes = rmsnorm_forward_bytes(N, C, 4) + rmsnorm_backward_bytes(N, C);
      p.run = [b = buf.get(), N] {
        kernels::rmsnorm_forward(b->b.data(), b->c.data(), b->a.data(), b->d.data(), N, C, 1e-5f);
        kernels::rmsnorm_backward(b->e.data(), b->d.data(), b->b.data(), b->a.data(), b->d.data(), b->c.data(), N, C);
      };
      break;
    }
    case MemoryFamily::kSwiglu: {  // forward and backward over (rows, F = 1024)
      constexpr int64_t F = 1024;
      const int64_t N = rows_for(swiglu_forward_bytes(1, F, 4) + swiglu_backward_bytes(1, F, 4));
      buf->a = filled(N * 2 * F, 0.1f), buf->b = filled(N * F, 0.f), buf->c = filled(N * 2 * F, 0.f);
      p.bytes = swiglu_forward_bytes(N, F, 4) + swiglu_backward_bytes(N, F, 4);
      p.run = [b = buf.get(), N] {
        kernels::swiglu_forward(b->b.data(), b->a.data(), N, F);
        kernels::swiglu_backward(b->c.data(), b->b.data(), b->a.data(), N, F);
      };
      break;
    }
    case MemoryFamily::kRope: {  // 8 heads of D = 64, T = rows
      constexpr int64_t H = 8, D = 64;
      const int64_t T = rows_for(rope_bytes(1, H, D));
      buf->a = filled(T * H * D, 0.1f), buf->c = filled(T * D / 2, 1.f), buf->d = filled(T * D / 2, 0.f);
      p.bytes = rope_bytes(T, H, D);
      p.run = [b = buf.get(), T] {
        kernels::rope_forward(b->a.data(), b->a.data(), b->c.data(), b->d.data(), 1, T, H, D, H * D);
      };
      break;
    }
    case MemoryFamily::kCrossEntropy: {  // forward and backward over (rows, V = 8192)
      constexpr int64_t V = 8192;
      const int64_t N = rows_for(cross_entropy_forward_bytes(1, V) + cross_entropy_backward_bytes(1, V));
      buf->a = filled(N * V, 0.01f), buf->b = filled(N * V, 0.f), buf->c = filled(N, 0.f), buf->d = filled(N, 0.f);
      buf->e = filled(N, 0.f);
      buf->targets.assign(static_cast<size_t>(N), 7);
      p.bytes = cross_entropy_forward_bytes(N, V) + cross_entropy_backward_bytes(N, V);
      p.run = [b = buf.get(), N] {
        kernels::cross_entropy_forward(b->e.data(), b->c.data(), b->d.data(), b->a.data(), b->targets.data(), N, V);
        kernels::cross_entropy_backward(b->b.data(), b->a.data(), b->c.data(), b->d.data(), b->targets.data(), N, V, 0,
                                        1.0f);
      };
      break;
    }
    case MemoryFamily::kAdd: {
      const int64_t n = rows_for(add_bytes(1));
      buf->a = filled(n, 0.5f), buf->b = filled(n, 0.25f), buf->c = filled(n, 0.f);
      p.bytes = add_bytes(static_cast<double>(n));
      p.run = [b = buf.get(), n] {
        kernels::add_into({b->c.data(), n, DType::kF32}, {b->a.data(), n, DType::kF32}, {b->b.data(), n, DType::kF32});
      };
      break;
    }
    case MemoryFamily::kAdamw: {
      const int64_t n = rows_for(adamw_bytes(1));
      buf->a = filled(n, 0.5f), buf->b = filled(n, 0.f), buf->c = filled(n, 0.f), buf->d = filled(n, 0.01f);
      p.bytes = adamw_bytes(static_cast<double>(n));
      p.run = [b = buf.get(), n] {
        kernels::adamw_update(b->a.data(), b->b.data(), b->c.data(), {b->d.data(), n, DType::kF32}, 1e-3f, 0.9f, 0.95f,
                              1e-8f, 0.1f, 3, 1.0f);
      };
      break;
    }
    case MemoryFamily::kExactSum:    // a TensorSummary's exact sums (the gradient norm)
    case MemoryFamily::kChecksum: {  // and with the checksum lanes (a checksum record)
      const int64_t n = rows_for(summary_bytes(1));
      const bool lanes = f == MemoryFamily::kChecksum;
      buf->a = filled(n, 0.5f);
      p.bytes = summary_bytes(static_cast<double>(n));
      p.run = [b = buf.get(), n, lanes] {
        evidence::TensorSummary s;
        s.add_contiguous(b->a.data(), n, 0, lanes);
        do_not_optimize(s.lane0 + static_cast<uint64_t>(s.stats.finite()));
      };
      break;
    }
    case MemoryFamily::kDigest: {  // XXH3-128 over the bytes
      const int64_t n = rows_for(digest_bytes(4)) * 4;
      buf->a = filled(n / 4, 0.5f);
      p.bytes = digest_bytes(static_cast<double>(n));
      p.run = [b = buf.get(), n] { do_not_optimize(xxh3_128(b->a.data(), static_cast<size_t>(n)).lo); };
      break;
    }
    case MemoryFamily::kCast: {  // fp32 → bf16 and back
      const int64_t n = rows_for(2 * cast_bytes(1));
      buf->a = filled(n, 0.5f), buf->b = filled(n, 0.f);
      buf->h.assign(static_cast<size_t>(n), 0);
      p.bytes = 2 * cast_bytes(static_cast<double>(n));
      p.run = [b = buf.get(), n] {
        float16_from_f32(b->h.data(), b->a.data(), n, DType::kBF16);
        f32_from_float16(b->b.data(), b->h.data(), n, DType::kBF16);
      };
      break;
    }
  }
  return p;
}

}  // namespace

void calibrate_memory(const KernelCalibrationOptions& o, KernelCalibration& k) {
  for (MemoryFamily f : kMemoryFamilies) {
    const bool parameter_sized = f == MemoryFamily::kAdd || f == MemoryFamily::kAdamw || f == MemoryFamily::kCast ||
                                 f == MemoryFamily::kExactSum || f == MemoryFamily::kChecksum ||
                                 f == MemoryFamily::kDigest;
    std::vector<MemoryProbe> probes;
    for (double target : parameter_sized ? o.parameter_bytes : o.activation_bytes) {
      MemoryProbe p = memory_probe(f, target);
      if (!probes.empty() && p.bytes <= probes.back().bytes) continue;  // rounded to the same rows
      probes.push_back(std::move(p));
    }
    std::vector<std::function<void()>> runs;
    for (const MemoryProbe& p : probes) runs.push_back(p.run);
    const std::vector<double> s = median_seconds(runs, o.min_seconds);
    for (size_t i = 0; i < probes.size(); ++i) {
      k.memory_bytes[f].push_back(probes[i].bytes);
      k.memory_bytes_per_s[f].push_back(probes[i].bytes / s[i]);
    }
  }
}

}  // namespace sp::planner::calibration_detail
