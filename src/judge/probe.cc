// The rounding probe (judge/probe.h): each recorded output against the bf16 roundings its inputs allow.
#include "judge/probe.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>

#include "ckpt/safetensors.h"
#include "core/file_io.h"

namespace sp::judge {
namespace {

constexpr double kU32 = 5.9604644775390625e-08;  // 2^-24

// The bf16 neighbours of a bf16 number r ≥ 0 (as doubles): the next one up and down.
double bf16_step(double r, int dir) {
  const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(r));
  if (r == 0) return dir > 0 ? std::bit_cast<float>(uint32_t{0x10000}) : 0.0;
  return std::bit_cast<float>(dir > 0 ? bits + 0x10000u : bits - 0x10000u);
}

bool is_bf16(float v) { return (std::bit_cast<uint32_t>(v) & 0xFFFFu) == 0; }

Result<std::vector<float>> tensor(const ckpt::SafetensorsReader& f, const std::string& rel, const char* name,
                                  int64_t cols, int64_t rows_max) {
  const ckpt::SafetensorsEntry* e = f.find(name);
  if (e == nullptr || e->dtype != DType::kF32 || e->shape.size() != 2 || e->shape[1] != cols || e->shape[0] < 1 ||
      e->shape[0] > rows_max)
    return invalid_argument("{}: '{}' must be an F32 tensor of [1..{}, {}] (the probed rows)", rel, name, rows_max,
                            cols);
  std::vector<float> out(static_cast<size_t>(e->shape[0] * cols));
  SP_RETURN_IF_ERROR(f.read(*e, out.data()));
  return out;
}

}  // namespace

double bf16_round(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m·2^e, 0.5 ≤ |m| < 1: bf16 keeps 8 significant bits
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

Result<ProbeCheck> check_probe(const Recording& rec, int64_t step, const std::vector<float>& weight) {
  ProbeCheck out;
  const model::LlamaConfig& m = rec.contract().model.model;
  const int64_t K = m.dim, O = m.n_heads * m.head_dim();
  for (int rank = 0; rank < rec.contract().world && !out.recorded; ++rank) {
    const std::string rel = recording_step_file(kProbeDir, step, rank);
    if (!rec.present(rel)) continue;
    const auto refuse = [&](const std::string& why) {
      return invalid_argument("recording '{}' refused: the probe of step {}: {}", rec.dir(), step, why)
          .with_hint("a probe file is the recorder's (python/shardproof_torch/probe.py): record the run again");
    };
    auto f = ckpt::SafetensorsReader::open(rec.path(rel));
    if (!f.ok()) return refuse(f.status().message());
    auto x = tensor(*f, rel, "input", K, 1 << 20);
    if (!x.ok()) return refuse(x.status().message());
    const int64_t R = static_cast<int64_t>(x->size()) / K;
    auto y = tensor(*f, rel, "output", O, R);
    if (!y.ok()) return refuse(y.status().message());
    if (static_cast<int64_t>(y->size()) != R * O) return refuse(fmt::format("{}: output has another row count", rel));
    if (static_cast<int64_t>(weight.size()) != O * K)
      return internal_error("the probed weight holds {} values, not {} × {}", weight.size(), O, K);
    out.recorded = true, out.rank = rank;
    std::vector<double> xb(static_cast<size_t>(K)), wb(weight.size());
    for (size_t i = 0; i < wb.size(); ++i) wb[i] = bf16_round(weight[i]);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t k = 0; k < K; ++k) xb[static_cast<size_t>(k)] = bf16_round((*x)[static_cast<size_t>(r * K + k)]);
      for (int64_t o = 0; o < O; ++o)
        check_output(xb.data(), wb.data() + o * K, K, (*y)[static_cast<size_t>(r * O + o)], r, o, out);
    }
  }
  out.threshold = flip_threshold(out.expected);
  return out;
}

double flip_threshold(double expected) {
  const double c = 20 * std::numbers::ln2;
  return expected + c / 2 + std::sqrt(c * c / 4 + 2 * c * expected);
}

void check_output(const double* xb, const double* wb, int64_t K, float v, int64_t row, int64_t col, ProbeCheck& out) {
  double sum = 0, mag = 0;
  for (int64_t k = 0; k < K; ++k) {
    const double p = xb[k] * wb[k];  // exact in double: two 8-bit significands
    sum += p, mag += std::abs(p);
  }
  const double n = static_cast<double>(K);
  const double bound = n * kU32 / (1 - n * kU32) * mag + n * 0x1p-52 * mag;  // fp32 worst case, and ours
  const double nearest = bf16_round(sum), lo = bf16_round(sum - bound), hi = bf16_round(sum + bound);
  ++out.elements;
  out.boundary += lo != hi ? 1 : 0;
  if (!std::isfinite(v) || !is_bf16(v) || v < lo || v > hi) {
    if (out.wrong++ == 0)
      out.first_wrong = fmt::format(
          "row {}, output {}: {:.9g}{}, where the bf16 roundings of the exact sum {:.9g} ± {:.3g} (fp32's worst case) "
          "are {:.9g} to {:.9g}",
          row, col, v, is_bf16(v) ? "" : " (not a bf16 number)", sum, bound, lo, hi);
    return;
  }
  out.flips += static_cast<double>(v) != nearest ? 1 : 0;
  // The model's chance of a flip: the sum's distance to the nearer boundary of its rounding's cell, against the
  // standard deviation √((K−1)/3)·u·Σ|x·w| of K − 1 roundings of partial sums no larger than Σ|x·w|.
  const double a = std::abs(sum), r = std::abs(nearest);
  const double d = std::min((r + bf16_step(r, +1)) / 2 - a, a - (r + bf16_step(r, -1)) / 2);
  const double sigma = std::sqrt((n - 1) / 3.0) * kU32 * mag;
  out.expected += sigma > 0 ? 0.5 * std::erfc(std::max(d, 0.0) / (sigma * std::numbers::sqrt2)) : 0.0;
}

}  // namespace sp::judge
