#include "planner/calibrate_kernels.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "core/timer.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/attention16.h"
#include "kernels/cross_entropy.h"
#include "kernels/gemm16.h"
#include "kernels/linear16.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/precision.h"
#include "planner/kernel_costs.h"
#include "tensor/float16.h"

namespace sp::planner {
namespace {

// The median seconds of each probe, in the calling thread's CPU time (the kernels run on it: OpenBLAS and
// oneDNN pinned to one thread), so that the time the thread waits for the core while other processes share
// it is not counted: a loaded machine otherwise charges a long call (a 2048-wide GEMM, several ms, longer
// than a scheduler slice) with its neighbours' time and a short one not, which bends the curves by size
// (docs/plan.md §10). On an idle core CPU time and wall time agree. The probes are measured in kRounds
// interleaved rounds (every probe a little, then every probe again), so that a change of the machine's load
// during the calibration (its caches and memory bandwidth, which CPU time does count) moves every size
// alike; per round a probe runs at least once and min_seconds / kRounds.
constexpr int kRounds = 3;
std::vector<double> median_seconds(const std::vector<std::function<void()>>& probes, double min_seconds) {
  std::vector<std::vector<double>> t(probes.size());
  for (const auto& fn : probes) fn();  // warm-up
  for (int round = 0; round < kRounds; ++round)
    for (size_t i = 0; i < probes.size(); ++i) {
      ThreadCpuStopwatch total;
      do {
        ThreadCpuStopwatch one;
        probes[i]();
        t[i].push_back(one.seconds());
      } while (total.seconds() < min_seconds / kRounds);
    }
  std::vector<double> out;
  for (auto& v : t) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

std::vector<float> filled(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n, 1)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i % 13) * 0.0625f;
  return v;
}
std::vector<uint16_t> filled16(int64_t n, DType t) {
  const std::vector<float> f = filled(n, 0.25f);
  std::vector<uint16_t> h(f.size());
  float16_from_f32(h.data(), f.data(), static_cast<int64_t>(f.size()), t);
  return h;
}

// GEMM rates over sizes: fp32 through kernels::gemm, 16-bit through the backend a run would resolve; the sizes
// of a dtype measured interleaved (median_seconds).
void calibrate_gemms(const KernelCalibrationOptions& o, KernelCalibration& k) {
  for (int64_t n : o.gemm_sizes) k.gemm_flops.push_back(2.0 * static_cast<double>(n * n * n));
  std::vector<std::vector<float>> f32;  // every buffer, alive while the probes run
  std::vector<std::function<void()>> probes;
  for (int64_t n : o.gemm_sizes) {
    for (float base : {0.5f, 0.25f, 0.0f}) f32.push_back(filled(n * n, base));
    float *a = f32[f32.size() - 3].data(), *b = f32[f32.size() - 2].data(), *c = f32.back().data();
    probes.push_back([a, b, c, n] { kernels::gemm(c, a, b, n, n, n, false, false, n, n, n, 1.0f, 0.0f); });
  }
  const std::vector<double> s32 = median_seconds(probes, o.min_seconds);
  for (size_t i = 0; i < s32.size(); ++i) k.gemm_flops_per_s["fp32"].push_back(k.gemm_flops[i] / s32[i]);
  k.gemm_backend["fp32"] = "openblas sgemm, 1 thread";
  for (DType t : {DType::kBF16, DType::kF16}) {
    auto g = kernels::make_gemm16(kernels::Gemm16Kind::kAuto, t);
    if (!g.ok()) continue;
    kernels::Gemm16* gemm = g->get();
    const std::string d(model::precision_name(t));
    k.gemm_backend[d] = gemm->name();
    std::vector<std::vector<uint16_t>> in;
    std::vector<std::vector<float>> out;
    std::vector<std::function<void()>> p16;
    for (int64_t n : o.gemm_sizes) {
      in.push_back(filled16(n * n, t));
      in.push_back(filled16(n * n, t));
      out.push_back(filled(n * n, 0.0f));
      out.push_back(filled(gemm->workspace_floats(n, n, n), 0.0f));
      const uint16_t *a = in[in.size() - 2].data(), *b = in.back().data();
      float *c = out[out.size() - 2].data(), *ws = out.back().data();
      p16.push_back([=] { gemm->gemm(c, a, b, n, n, n, false, false, n, n, n, 1.0f, 0.0f, ws); });
    }
    const std::vector<double> s16 = median_seconds(p16, o.min_seconds);
    for (size_t i = 0; i < s16.size(); ++i) k.gemm_flops_per_s[d].push_back(k.gemm_flops[i] / s16[i]);
  }
}

// A linear layer's three products as the engine calls them (kernels/matmul.h, linear16.h) over token rows ×
// square weights, per dtype; the points of one dtype measured interleaved (median_seconds).
void calibrate_linear_forms(const KernelCalibrationOptions& o, KernelCalibration& k) {
  for (int64_t t : o.gemm_tokens) k.gemm_tokens.push_back(static_cast<double>(t));
  for (int64_t n : o.gemm_widths) k.gemm_weights.push_back(static_cast<double>(n * n));
  struct Bufs {
    std::vector<float> x, w, y, dy, dw, ws;
    std::vector<uint16_t> x16, w16, dy16;
  };
  std::vector<std::unique_ptr<kernels::Gemm16>> gemms;
  std::vector<std::pair<std::string, kernels::Gemm16*>> dtypes = {{"fp32", nullptr}};
  for (DType t : {DType::kBF16, DType::kF16}) {
    auto g = kernels::make_gemm16(kernels::Gemm16Kind::kAuto, t);
    if (!g.ok()) continue;
    gemms.push_back(std::move(g).value());
    dtypes.emplace_back(std::string(model::precision_name(t)), gemms.back().get());
  }
  for (const auto& [d, g] : dtypes) {
    std::vector<std::unique_ptr<Bufs>> keep;
    std::vector<std::function<void()>> probes;  // per point: forward, dgrad, wgrad
    std::vector<double> flops;
    for (int64_t t : o.gemm_tokens)
      for (int64_t n : o.gemm_widths) {
        auto b = std::make_unique<Bufs>();
        b->x = filled(t * n, 0.25f), b->w = filled(n * n, 0.5f), b->y = filled(t * n, 0.f);
        b->dy = filled(t * n, 0.125f), b->dw = filled(n * n, 0.f);
        Bufs* p = b.get();
        if (g == nullptr) {
          probes.push_back([p, t, n] { kernels::linear_forward(p->y.data(), p->x.data(), p->w.data(), t, n, n); });
          probes.push_back([p, t, n] {
            kernels::linear_backward(p->y.data(), nullptr, p->dy.data(), p->x.data(), p->w.data(), t, n, n, false);
          });
          probes.push_back([p, t, n] {
            kernels::linear_backward(nullptr, p->dw.data(), p->dy.data(), p->x.data(), nullptr, t, n, n, false);
          });
        } else {
          const DType dt = g->dtype();
          p->x16 = filled16(t * n, dt), p->w16 = filled16(n * n, dt), p->dy16 = filled16(t * n, dt);
          p->ws = filled(kernels::linear16_workspace_floats(*g, t, n, n), 0.f);
          kernels::Gemm16* gm = g;
          probes.push_back([p, gm, t, n] {
            kernels::linear16_forward(p->y.data(), p->x16.data(), p->w16.data(), t, n, n, *gm, p->ws.data());
          });
          probes.push_back([p, gm, t, n] {
            kernels::linear16_backward(p->y.data(), nullptr, p->dy16.data(), p->x16.data(), p->w16.data(), t, n, n,
                                       false, *gm, p->ws.data());
          });
          probes.push_back([p, gm, t, n] {
            kernels::linear16_backward(nullptr, p->dw.data(), p->dy16.data(), p->x16.data(), nullptr, t, n, n, false,
                                       *gm, p->ws.data());
          });
        }
        flops.push_back(2.0 * static_cast<double>(t * n * n));
        keep.push_back(std::move(b));
      }
    const std::vector<double> s = median_seconds(probes, o.min_seconds);
    for (size_t i = 0; i < flops.size(); ++i)
      for (size_t f = 0; f < 3; ++f) k.gemm_form_flops_per_s[d][kGemmForms[f]].push_back(flops[i] / s[3 * i + f]);
  }
}

// One (sequence, head) of attention, forward and backward, per dtype.
void calibrate_attention(const KernelCalibrationOptions& o, KernelCalibration& k) {
  const int64_t D = o.attention_head_dim;
  k.attention_head_dim = D;
  for (int64_t T : o.attention_seq) k.attention_seq.push_back(static_cast<double>(T));
  // Per dtype: forward and backward at every T, measured interleaved (median_seconds). The buffers live in
  // `keep` while the probes run.
  std::vector<std::shared_ptr<void>> keep;
  std::map<std::string, std::vector<std::function<void()>>> probes;  // dtype → [fwd T0, bwd T0, fwd T1, ...]
  for (int64_t T : o.attention_seq) {
    struct B {
      std::vector<float> qkv, out, probs, dqkv, scratch;
    };
    auto b = std::make_shared<B>(B{filled(T * 3 * D, 0.01f), filled(T * D, 0.0f), filled(T * T, 0.0f),
                                   filled(T * 3 * D, 0.0f), filled(kernels::attention_scratch_floats(T), 0.0f)});
    keep.push_back(b);
    probes["fp32"].push_back([b = b.get(), T, D] {
      kernels::attention_forward(b->out.data(), b->probs.data(), b->qkv.data(), 1, T, 1, 1, D);
    });
    probes["fp32"].push_back([b = b.get(), T, D] {
      kernels::attention_backward(b->dqkv.data(), b->scratch.data(), b->out.data(), b->qkv.data(), b->probs.data(), 1,
                                  T, 1, 1, D);
    });
  }
  std::vector<std::unique_ptr<kernels::Gemm16>> gemms;
  for (DType t : {DType::kBF16, DType::kF16}) {
    auto g = kernels::make_gemm16(kernels::Gemm16Kind::kAuto, t);
    if (!g.ok()) continue;
    kernels::Gemm16* gemm = g->get();
    gemms.push_back(std::move(g).value());
    const std::string d(model::precision_name(t));
    for (int64_t T : o.attention_seq) {
      struct B {
        std::vector<uint16_t> qkv, out, probs;
        std::vector<float> dqkv, scratch, ws;
      };
      auto b = std::make_shared<B>(B{filled16(T * 3 * D, t), filled16(T * D, t), filled16(T * T, t),
                                     filled(T * 3 * D, 0.0f), filled(kernels::attention16_scratch_floats(T, D), 0.0f),
                                     filled(kernels::attention16_workspace_floats(*gemm, T, D), 0.0f)});
      keep.push_back(b);
      probes[d].push_back([b = b.get(), gemm, T, D] {
        kernels::attention16_forward(b->out.data(), b->probs.data(), b->qkv.data(), 1, T, 1, 1, D, *gemm,
                                     b->scratch.data(), b->ws.data());
      });
      probes[d].push_back([b = b.get(), gemm, T, D] {
        kernels::attention16_backward(b->dqkv.data(), b->out.data(), b->qkv.data(), b->probs.data(), 1, T, 1, 1, D,
                                      *gemm, b->scratch.data(), b->ws.data());
      });
    }
  }
  for (const auto& [d, runs] : probes) {
    const std::vector<double> s = median_seconds(runs, o.min_seconds);
    for (size_t i = 0; i + 1 < s.size(); i += 2) {
      k.attention_forward_s[d].push_back(s[i]);
      k.attention_backward_s[d].push_back(s[i + 1]);
    }
  }
}

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

void calibrate_memory(const KernelCalibrationOptions& o, KernelCalibration& k) {
  for (MemoryFamily f : kMemoryFamilies) {
    const bool parameter_sized = f == MemoryFamily::kAdd || f == MemoryFamily::kAdamw || f == MemoryFamily::kCast;
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

}  // namespace

KernelCalibration calibrate_kernels(const KernelCalibrationOptions& o) {
  KernelCalibration k;
  calibrate_gemms(o, k);
  calibrate_linear_forms(o, k);
  calibrate_attention(o, k);
  calibrate_memory(o, k);
  return k;
}

DeviceRates device_rates_of(const KernelCalibration& k, const std::map<std::string, double>& peak) {
  DeviceRates r;
  for (const auto& [d, rates] : k.gemm_flops_per_s) {
    const auto p = peak.find(d);
    if (p == peak.end() || rates.empty()) continue;
    Curve c{k.gemm_flops, {}};
    for (double x : rates) c.y.push_back(std::min(1.0, x / p->second));
    r.gemm_efficiency[d] = c;
  }
  for (const auto& [d, forms] : k.gemm_form_flops_per_s) {
    const auto p = peak.find(d);
    if (p == peak.end()) continue;
    for (const auto& [f, rates] : forms) {
      Grid g{k.gemm_tokens, k.gemm_weights, {}};
      for (double x : rates) g.z.push_back(std::min(1.0, x / p->second));
      r.gemm_form_efficiency[d][f] = std::move(g);
    }
  }
  r.gemm_backend = k.gemm_backend;
  r.attention_head_dim = k.attention_head_dim;
  for (const auto& [d, s] : k.attention_forward_s) r.attention_forward_s[d] = Curve{k.attention_seq, s};
  for (const auto& [d, s] : k.attention_backward_s) r.attention_backward_s[d] = Curve{k.attention_seq, s};
  for (const auto& [f, bw] : k.memory_bytes_per_s) r.bandwidth[f] = Curve{k.memory_bytes.at(f), bw};
  return r;
}

}  // namespace sp::planner
