#include "planner/calibrate_kernels.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "kernels/attention.h"
#include "kernels/attention16.h"
#include "kernels/gemm16.h"
#include "kernels/linear16.h"
#include "kernels/matmul.h"
#include "model/precision.h"
#include "planner/calibrate_probe.h"
#include "planner/cold_arena.h"
#include "tensor/float16.h"

namespace sp::planner {
using calibration_detail::calibrate_memory;
using calibration_detail::filled;
using calibration_detail::filled16;
using calibration_detail::median_seconds;

namespace {

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
  // What ran: the process's fp32 backend (the CLI sets it as a run would, train.gemm32), as a contract names it.
  k.gemm_backend["fp32"] = kernels::gemm32_backend_name(kernels::current_gemm32());
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
// square weights, per dtype; the points of one dtype measured interleaved (median_seconds). Every call takes
// its operands and outputs from cold arenas (cold_arena.h): a step reads its weights, leaves and saved
// activations from memory, and a repeated call on warm buffers prices its GEMMs short.
// The dtypes whose GEMMs are measured: fp32 (nullptr: kernels::gemm) and each 16-bit dtype the engine's Gemm16
// backend runs here, as a run would resolve it (`owned` keeps them alive).
struct GemmDtypes {
  std::vector<std::unique_ptr<kernels::Gemm16>> owned;
  std::vector<std::pair<std::string, kernels::Gemm16*>> list;
};
GemmDtypes gemm_dtypes() {
  GemmDtypes out;
  out.list.emplace_back("fp32", nullptr);
  for (DType t : {DType::kBF16, DType::kF16}) {
    auto g = kernels::make_gemm16(kernels::Gemm16Kind::kAuto, t);
    if (!g.ok()) continue;
    out.owned.push_back(std::move(g).value());
    out.list.emplace_back(std::string(model::precision_name(t)), out.owned.back().get());
  }
  return out;
}

void calibrate_linear_forms(const KernelCalibrationOptions& o, KernelCalibration& k) {
  for (int64_t t : o.gemm_tokens) k.gemm_tokens.push_back(static_cast<double>(t));
  for (int64_t n : o.gemm_widths) k.gemm_weights.push_back(static_cast<double>(n * n));
  const int64_t tmax = *std::max_element(o.gemm_tokens.begin(), o.gemm_tokens.end());
  const int64_t nmax = *std::max_element(o.gemm_widths.begin(), o.gemm_widths.end());
  const int64_t set = 2 * tmax * nmax + nmax * nmax + 3 * 16;  // x, dy and w (or y, dx and dw), aligned
  const std::vector<float> base = filled(13, 0.25f);
  ColdArena<float> in32(set, [&](size_t i) { return base[i % 13]; });
  ColdArena<float> out32(set, [](size_t) { return 0.f; });
  const GemmDtypes gd = gemm_dtypes();
  const auto& dtypes = gd.list;
  for (const auto& [d, g] : dtypes) {
    std::unique_ptr<ColdArena<uint16_t>> in16;
    if (g != nullptr) {
      const std::vector<uint16_t> b16 = filled16(13, g->dtype());
      in16 = std::make_unique<ColdArena<uint16_t>>(set, [&](size_t i) { return b16[i % 13]; });
    }
    std::vector<std::vector<float>> ws;         // per point: the Gemm16 workspace (the engine reuses one: warm)
    std::vector<std::function<void()>> probes;  // per point: forward, dgrad, wgrad
    std::vector<double> flops;
    for (int64_t t : o.gemm_tokens)
      for (int64_t n : o.gemm_widths) {
        ColdArena<float>* in = &in32;
        ColdArena<float>* out = &out32;
        if (g == nullptr) {
          probes.push_back(
              [=] { kernels::linear_forward(out->take(t * n), in->take(t * n), in->take(n * n), t, n, n); });
          probes.push_back([=] {
            kernels::linear_backward(out->take(t * n), nullptr, in->take(t * n), nullptr, in->take(n * n), t, n, n,
                                     false);
          });
          probes.push_back([=] {
            kernels::linear_backward(nullptr, out->take(n * n), in->take(t * n), in->take(t * n), nullptr, t, n, n,
                                     false);
          });
        } else {
          ws.push_back(filled(kernels::linear16_workspace_floats(*g, t, n, n), 0.f));
          float* w = ws.back().data();
          kernels::Gemm16* gm = g;
          ColdArena<uint16_t>* h = in16.get();
          probes.push_back(
              [=] { kernels::linear16_forward(out->take(t * n), h->take(t * n), h->take(n * n), t, n, n, *gm, w); });
          probes.push_back([=] {
            kernels::linear16_backward(out->take(t * n), nullptr, h->take(t * n), nullptr, h->take(n * n), t, n, n,
                                       false, *gm, w);
          });
          // The weight gradient as the engine's block products write a fresh leaf: β = 0 (linear16.h).
          probes.push_back([=] {
            kernels::linear16_backward(nullptr, out->take(n * n), h->take(t * n), h->take(t * n), nullptr, t, n, n,
                                       false, *gm, w, /*overwrite_dw=*/true);
          });
        }
        flops.push_back(2.0 * static_cast<double>(t * n * n));
      }
    const std::vector<double> s = median_seconds(probes, o.min_seconds);
    for (size_t i = 0; i < flops.size(); ++i)
      for (size_t f = 0; f < 3; ++f) k.gemm_form_flops_per_s[d][kGemmForms[f]].push_back(flops[i] / s[3 * i + f]);
  }
}

// One GEMM call of the kernel inventory as the engine makes it (kernels/matmul.h, linear16.h): forward
// (m, n, k) = (tokens, OC, IC), dgrad (tokens, IC, OC), wgrad (OC, IC, tokens) with β = 1 in fp32 and the fresh
// leaf's β = 0 in 16-bit, as calibrate_linear_forms measures the grid. `in`/`out`: cold arenas (cold_arena.h).
std::function<void()> linear_call(const GemmShape& g, ColdArena<float>* in, ColdArena<float>* out,
                                  ColdArena<uint16_t>* h, kernels::Gemm16* gm, float* ws) {
  const auto m = static_cast<int64_t>(g.m), n = static_cast<int64_t>(g.n), k = static_cast<int64_t>(g.k);
  switch (g.form) {
    case GemmForm::kForward:  // y (N, OC) = x (N, IC) · wᵀ
      if (gm == nullptr)
        return [=] { kernels::linear_forward(out->take(m * n), in->take(m * k), in->take(n * k), m, k, n); };
      return [=] { kernels::linear16_forward(out->take(m * n), h->take(m * k), h->take(n * k), m, k, n, *gm, ws); };
    case GemmForm::kDgrad:  // dx (N, IC) = dy (N, OC) · w (OC, IC)
      if (gm == nullptr)
        return [=] {
          kernels::linear_backward(out->take(m * n), nullptr, in->take(m * k), nullptr, in->take(k * n), m, n, k,
                                   false);
        };
      return [=] {
        kernels::linear16_backward(out->take(m * n), nullptr, h->take(m * k), nullptr, h->take(k * n), m, n, k, false,
                                   *gm, ws);
      };
    case GemmForm::kWgrad:  // dw (OC, IC) += dyᵀ (OC, N) · x (N, IC)
      if (gm == nullptr)
        return [=] {
          kernels::linear_backward(nullptr, out->take(m * n), in->take(k * m), in->take(k * n), nullptr, k, n, m,
                                   false);
        };
      return [=] {
        kernels::linear16_backward(nullptr, out->take(m * n), h->take(k * m), h->take(k * n), nullptr, k, n, m, false,
                                   *gm, ws, /*overwrite_dw=*/true);
      };
  }
  return [] {};
}

// A model's own GEMM calls (o.model_gemms) per dtype, operands from cold arenas, the calls of one dtype interleaved.
void calibrate_model_gemms(const KernelCalibrationOptions& o, KernelCalibration& k) {
  if (o.model_gemms.empty()) return;
  k.gemm_shapes = o.model_gemms;
  int64_t set = 0;
  for (const GemmShape& g : o.model_gemms)
    set = std::max(set, static_cast<int64_t>(g.m * g.k + g.k * g.n + g.m * g.n) + 3 * 16);
  const std::vector<float> base = filled(13, 0.25f);
  ColdArena<float> in32(set, [&](size_t i) { return base[i % 13]; });
  ColdArena<float> out32(set, [](size_t) { return 0.f; });
  const GemmDtypes gd = gemm_dtypes();
  const auto& dtypes = gd.list;
  for (const auto& [d, gm] : dtypes) {
    std::unique_ptr<ColdArena<uint16_t>> in16;
    if (gm != nullptr) {
      const std::vector<uint16_t> b16 = filled16(13, gm->dtype());
      in16 = std::make_unique<ColdArena<uint16_t>>(set, [&](size_t i) { return b16[i % 13]; });
    }
    std::vector<std::vector<float>> ws;  // per call: the Gemm16 workspace (the engine reuses one: warm)
    std::vector<std::function<void()>> probes;
    for (const GemmShape& g : o.model_gemms) {
      const auto mm = static_cast<int64_t>(g.m), nn = static_cast<int64_t>(g.n), kk = static_cast<int64_t>(g.k);
      // The workspace of the linear16 call of this form (linear16.h sizes it by the layer's N, IC, OC).
      const int64_t N = g.form == GemmForm::kWgrad ? kk : mm;
      const int64_t IC = g.form == GemmForm::kForward ? kk : nn;
      const int64_t OC = g.form == GemmForm::kForward ? nn : g.form == GemmForm::kDgrad ? kk : mm;
      ws.push_back(filled(gm ? kernels::linear16_workspace_floats(*gm, N, IC, OC) : 1, 0.f));
      probes.push_back(linear_call(g, &in32, &out32, in16.get(), gm, ws.back().data()));
    }
    const std::vector<double> s = median_seconds(probes, o.min_seconds);
    for (size_t i = 0; i < s.size(); ++i) {
      const GemmShape& g = o.model_gemms[i];
      k.gemm_shape_flops_per_s[d].push_back(2.0 * g.m * g.n * g.k / s[i]);
    }
  }
}

// Heads measured at once at sequence length T: up to 8, the engine's row layout of several heads (a token's
// q, k and v of every head in one row), while their probabilities (heads·T² floats) stay within 32 MiB.
int64_t attention_probe_heads(int64_t T) { return std::clamp<int64_t>((int64_t{32} << 20) / (T * T * 4), 1, 8); }

// One (sequence, head) of attention, forward and backward, per dtype: `attention_probe_heads(T)` heads of one
// sequence in one call, the time divided by the heads; operands from cold arenas (cold_arena.h), as a step
// reads its saved q, k, v and probabilities from memory.
void calibrate_attention(const KernelCalibrationOptions& o, KernelCalibration& k) {
  const int64_t D = o.attention_head_dim;
  k.attention_head_dim = D;
  int64_t set = 0;
  for (int64_t T : o.attention_seq) {
    k.attention_seq.push_back(static_cast<double>(T));
    const int64_t H = attention_probe_heads(T);
    set = std::max(set, T * 3 * H * D + T * H * D + H * T * T + 3 * 16);
  }
  const std::vector<float> base = filled(13, 0.01f);
  ColdArena<float> in32(set, [&](size_t i) { return base[i % 13]; });
  ColdArena<float> out32(set, [](size_t) { return 0.f; });
  std::vector<std::vector<float>> keep;  // per point: scratch and workspace, reused by the engine (warm)
  std::map<std::string, std::vector<std::function<void()>>> probes;  // dtype → [fwd T0, bwd T0, fwd T1, ...]
  std::map<std::string, std::vector<int64_t>> heads;
  ColdArena<float>* in = &in32;
  ColdArena<float>* out = &out32;
  for (int64_t T : o.attention_seq) {
    const int64_t H = attention_probe_heads(T);
    keep.push_back(filled(kernels::attention_scratch_floats(T), 0.0f));
    float* scratch = keep.back().data();
    probes["fp32"].push_back([=] {
      kernels::attention_forward(out->take(T * H * D), out->take(H * T * T), in->take(T * 3 * H * D), 1, T, H, H, D);
    });
    probes["fp32"].push_back([=] {
      kernels::attention_backward(out->take(T * 3 * H * D), scratch, in->take(T * H * D), in->take(T * 3 * H * D),
                                  in->take(H * T * T), 1, T, H, H, D);
    });
    heads["fp32"].push_back(H);
  }
  std::vector<std::unique_ptr<kernels::Gemm16>> gemms;
  std::vector<std::unique_ptr<ColdArena<uint16_t>>> arenas16;
  for (DType t : {DType::kBF16, DType::kF16}) {
    auto g = kernels::make_gemm16(kernels::Gemm16Kind::kAuto, t);
    if (!g.ok()) continue;
    kernels::Gemm16* gemm = g->get();
    gemms.push_back(std::move(g).value());
    const std::vector<uint16_t> b16 = filled16(13, t);
    arenas16.push_back(std::make_unique<ColdArena<uint16_t>>(set, [&](size_t i) { return b16[i % 13]; }));
    ColdArena<uint16_t>* h = arenas16.back().get();
    arenas16.push_back(std::make_unique<ColdArena<uint16_t>>(set, [](size_t) { return uint16_t{0}; }));
    ColdArena<uint16_t>* h_out = arenas16.back().get();
    const std::string d(model::precision_name(t));
    for (int64_t T : o.attention_seq) {
      const int64_t H = attention_probe_heads(T);
      keep.push_back(filled(kernels::attention16_scratch_floats(T, D), 0.0f));
      float* scratch = keep.back().data();
      keep.push_back(filled(kernels::attention16_workspace_floats(*gemm, T, D), 0.0f));
      float* ws = keep.back().data();
      probes[d].push_back([=] {
        kernels::attention16_forward(h_out->take(T * H * D), h_out->take(H * T * T), h->take(T * 3 * H * D), 1, T, H, H,
                                     D, *gemm, scratch, ws);
      });
      probes[d].push_back([=] {
        kernels::attention16_backward(out->take(T * 3 * H * D), h->take(T * H * D), h->take(T * 3 * H * D),
                                      h->take(H * T * T), 1, T, H, H, D, *gemm, scratch, ws);
      });
      heads[d].push_back(H);
    }
  }
  for (const auto& [d, runs] : probes) {
    const std::vector<double> s = median_seconds(runs, o.min_seconds);
    for (size_t i = 0; i + 1 < s.size(); i += 2) {
      const auto H = static_cast<double>(heads[d][i / 2]);
      k.attention_forward_s[d].push_back(s[i] / H);
      k.attention_backward_s[d].push_back(s[i + 1] / H);
    }
  }
}

}  // namespace

KernelCalibration calibrate_kernels(const KernelCalibrationOptions& o) {
  KernelCalibration k;
  calibrate_gemms(o, k);
  calibrate_linear_forms(o, k);
  calibrate_model_gemms(o, k);
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
  r.gemm_shapes = k.gemm_shapes;
  for (const auto& [d, rates] : k.gemm_shape_flops_per_s) {
    const auto p = peak.find(d);
    if (p == peak.end()) continue;
    for (double x : rates) r.gemm_shape_efficiency[d].push_back(std::min(1.0, x / p->second));
  }
  r.gemm_backend = k.gemm_backend;
  r.attention_head_dim = k.attention_head_dim;
  for (const auto& [d, s] : k.attention_forward_s) r.attention_forward_s[d] = Curve{k.attention_seq, s};
  for (const auto& [d, s] : k.attention_backward_s) r.attention_backward_s[d] = Curve{k.attention_seq, s};
  for (const auto& [f, bw] : k.memory_bytes_per_s) r.bandwidth[f] = Curve{k.memory_bytes.at(f), bw};
  return r;
}

}  // namespace sp::planner
