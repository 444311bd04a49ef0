#include "planner/kernel_costs.h"

#include <algorithm>

#include "plan/block_shapes.h"

namespace sp::planner {

constexpr double kF = 4;  // bytes of an fp32 value

double rmsnorm_forward_bytes(double rows, double cols, double h) { return rows * cols * (kF + h) + rows * kF; }
// dout, x read; dx read and written (+=); rstd read; dw accumulated once per row block.
double rmsnorm_backward_bytes(double rows, double cols) { return rows * cols * 4 * kF + rows * kF; }
double swiglu_forward_bytes(double rows, double f, double h) { return rows * f * 3 * h; }
// dout (fp32) and gate|up (h) read, dgate|dup written (fp32, or rounded to h in mixed precision).
double swiglu_backward_bytes(double rows, double f, double h) { return rows * f * (kF + 2 * h + 2 * h); }
double rope_bytes(double rows, double heads, double head_dim) { return rows * heads * head_dim * 2 * kF; }
// row max, Σexp and the target logit each read the (rows, vocab) logits once.
double cross_entropy_forward_bytes(double rows, double vocab) { return rows * vocab * 3 * kF; }
double cross_entropy_backward_bytes(double rows, double vocab) { return rows * vocab * 2 * kF; }
double add_bytes(double n) { return 3 * kF * n; }
double zero_bytes(double n) { return kF * n; }
double adamw_bytes(double n) { return 7 * kF * n; }
double cast_bytes(double n) { return (kF + 2) * n; }
double summary_bytes(double n) { return kF * n; }
double digest_bytes(double bytes) { return bytes; }

KernelTimes& KernelTimes::operator+=(const KernelTimes& o) {
  gemm += o.gemm;
  attention += o.attention;
  memory += o.memory;
  wgrad += o.wgrad;
  return *this;
}

namespace {

KernelCall gemm(double m, double n, double k, GemmForm form = GemmForm::kForward) {
  KernelCall c;
  c.kind = KernelCall::Kind::kGemm;
  c.form = form;
  c.m = m, c.n = n, c.k = k;
  return c;
}
KernelCall memory(MemoryFamily f, double bytes, double count = 1) {
  KernelCall c;
  c.kind = KernelCall::Kind::kMemory;
  c.family = f;
  c.bytes = bytes;
  c.count = count;
  return c;
}
KernelCall attention(bool forward, double seq, double head_dim, double count) {
  KernelCall c;
  c.kind = forward ? KernelCall::Kind::kAttentionForward : KernelCall::Kind::kAttentionBackward;
  c.seq = seq, c.head_dim = head_dim, c.count = count;
  return c;
}

// One block's forward (llama_stage.cc block_forward, llama_stage16.cc block_forward16).
void block_forward(const plan::BlockShapes& s, bool mixed, std::vector<KernelCall>& out) {
  const double N = static_cast<double>(s.N), C = static_cast<double>(s.C), h = mixed ? 2 : 4;
  const double Wqkv = static_cast<double>(s.Wqkv), HlD = static_cast<double>(s.Hl * s.D);
  const double Fl = static_cast<double>(s.Fl);
  out.push_back(memory(MemoryFamily::kNorm, rmsnorm_forward_bytes(N, C, h), 2));
  out.push_back(gemm(N, Wqkv, C));
  out.push_back(memory(MemoryFamily::kRope, rope_bytes(N, static_cast<double>(s.Hl + s.KVl), s.D)));
  if (mixed) out.push_back(memory(MemoryFamily::kCast, cast_bytes(N * Wqkv)));
  out.push_back(attention(true, static_cast<double>(s.T), static_cast<double>(s.D), static_cast<double>(s.B * s.Hl)));
  out.push_back(gemm(N, C, HlD));
  out.push_back(memory(MemoryFamily::kAdd, add_bytes(N * C), 2));  // the two residual adds
  out.push_back(gemm(N, 2 * Fl, C));
  if (mixed) out.push_back(memory(MemoryFamily::kCast, cast_bytes(N * 2 * Fl)));
  out.push_back(memory(MemoryFamily::kSwiglu, swiglu_forward_bytes(N, Fl, h)));
  out.push_back(gemm(N, C, Fl));
}

// A linear layer's backward (kernels/matmul.h linear_backward): dX (N, in) = dY · W, dW (out, in) += dYᵀ · X.
void linear_backward(double N, double in, double outf, std::vector<KernelCall>& out) {
  out.push_back(gemm(N, in, outf, GemmForm::kDgrad));
  out.push_back(gemm(outf, in, N, GemmForm::kWgrad));
}

void block_backward(const plan::BlockShapes& s, bool mixed, std::vector<KernelCall>& out) {
  const double N = static_cast<double>(s.N), C = static_cast<double>(s.C), h = mixed ? 2 : 4;
  const double Wqkv = static_cast<double>(s.Wqkv), HlD = static_cast<double>(s.Hl * s.D);
  const double Fl = static_cast<double>(s.Fl);
  if (mixed) out.push_back(memory(MemoryFamily::kCast, cast_bytes(N * C), 2));  // dres, twice
  linear_backward(N, Fl, C, out);
  out.push_back(memory(MemoryFamily::kSwiglu, swiglu_backward_bytes(N, Fl, h)));
  linear_backward(N, C, 2 * Fl, out);
  out.push_back(memory(MemoryFamily::kNorm, rmsnorm_backward_bytes(N, C), 2));
  linear_backward(N, HlD, C, out);
  if (mixed) out.push_back(memory(MemoryFamily::kCast, cast_bytes(N * HlD + N * Wqkv)));  // dattn, dqkv
  out.push_back(attention(false, static_cast<double>(s.T), static_cast<double>(s.D), static_cast<double>(s.B * s.Hl)));
  out.push_back(memory(MemoryFamily::kRope, rope_bytes(N, static_cast<double>(s.Hl + s.KVl), s.D)));
  linear_backward(N, C, Wqkv, out);
}

}  // namespace

ChunkKernels chunk_kernels(const ChunkKernelsInput& in) {
  const plan::BlockShapes s = plan::block_shapes(in.model, in.tp, in.micro_batch_size, in.seq_len);
  const double N = static_cast<double>(s.N), C = static_cast<double>(s.C), Vl = static_cast<double>(s.Vl);
  const double h = in.mixed ? 2 : 4;
  ChunkKernels k;
  if (in.first) {  // the lookup copies N rows of C; its backward adds them into the table's gradient
    k.forward.push_back(memory(MemoryFamily::kAdd, 2 * kF * N * C));
    k.backward.push_back(memory(MemoryFamily::kAdd, add_bytes(N * C)));
  }
  for (int b = 0; b < in.blocks; ++b) {
    block_forward(s, in.mixed, k.forward);
    if (in.recompute == model::Recompute::kFull) block_forward(s, in.mixed, k.backward);
    if (in.recompute == model::Recompute::kSelective)
      k.backward.push_back(
          attention(true, static_cast<double>(s.T), static_cast<double>(s.D), 0.5 * static_cast<double>(s.B * s.Hl)));
    block_backward(s, in.mixed, k.backward);
  }
  if (in.last) {
    k.forward.push_back(memory(MemoryFamily::kNorm, rmsnorm_forward_bytes(N, C, h)));
    k.forward.push_back(gemm(N, Vl, C));
    k.forward.push_back(memory(MemoryFamily::kCrossEntropy, cross_entropy_forward_bytes(N, Vl)));
    k.backward.push_back(memory(MemoryFamily::kCrossEntropy, cross_entropy_backward_bytes(N, Vl)));
    if (in.mixed) k.backward.push_back(memory(MemoryFamily::kCast, cast_bytes(N * Vl)));
    linear_backward(N, C, Vl, k.backward);
    k.backward.push_back(memory(MemoryFamily::kAdd, zero_bytes(N * C)));
    k.backward.push_back(memory(MemoryFamily::kNorm, rmsnorm_backward_bytes(N, C)));
  }
  // The gradient sink (parallel/grad_store.h): every micro-batch's leaf of each unit is zeroed, and the
  // canonical tree sums k leaves with k − 1 adds per step.
  const double P = static_cast<double>(in.unit_params), kmb = static_cast<double>(in.micro_batches);
  k.backward.push_back(memory(MemoryFamily::kAdd, zero_bytes(P)));
  if (in.micro_batches > 1) k.backward.push_back(memory(MemoryFamily::kAdd, add_bytes(P), (kmb - 1) / kmb));
  return k;
}

std::vector<KernelCall> optimizer_kernels(int64_t local_params, int64_t owned_params, int64_t summarized_params,
                                          double checksum_share, bool mixed) {
  const double owned = static_cast<double>(owned_params);
  const double norm = summary_bytes(static_cast<double>(summarized_params));
  std::vector<KernelCall> out;
  if (checksum_share < 1) out.push_back(memory(MemoryFamily::kExactSum, norm, 1 - checksum_share));
  if (checksum_share > 0) out.push_back(memory(MemoryFamily::kChecksum, norm, checksum_share));
  out.push_back(memory(MemoryFamily::kAdd, 2 * kF * owned));  // the clipping scale
  out.push_back(memory(MemoryFamily::kAdamw, adamw_bytes(owned)));
  if (mixed) out.push_back(memory(MemoryFamily::kCast, cast_bytes(static_cast<double>(local_params))));
  return out;
}

std::vector<KernelCall> evidence_kernels(const EvidenceKernelsInput& in) {
  std::vector<KernelCall> out;
  if (in.summarized_params > 0 && in.checksum_share > 0)
    out.push_back(
        memory(MemoryFamily::kChecksum, summary_bytes(static_cast<double>(in.summarized_params)), in.checksum_share));
  if (in.replica_bytes > 0) out.push_back(memory(MemoryFamily::kDigest, digest_bytes(in.replica_bytes)));
  if (in.digested_bytes > 0) out.push_back(memory(MemoryFamily::kDigest, digest_bytes(in.digested_bytes)));
  return out;
}

std::vector<GemmShape> model_gemm_shapes(const model::LlamaConfig& model, int64_t micro_batch_size, int64_t seq_len,
                                         const std::vector<int>& tps) {
  std::vector<GemmShape> out;
  for (int tp : tps) {
    ChunkKernelsInput in;
    in.model = model;
    in.blocks = 1;  // every block has the same calls
    in.first = in.last = true;
    in.micro_batch_size = micro_batch_size;
    in.seq_len = seq_len;
    in.tp = tp;
    const ChunkKernels k = chunk_kernels(in);
    for (const auto* pass : {&k.forward, &k.backward})
      for (const KernelCall& c : *pass)
        if (c.kind == KernelCall::Kind::kGemm) {
          const GemmShape g{c.form, c.m, c.n, c.k};
          if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
        }
  }
  return out;
}

double gemm_tokens(const KernelCall& c) { return c.form == GemmForm::kWgrad ? c.k : c.m; }
double gemm_weights(const KernelCall& c) { return c.form == GemmForm::kWgrad ? c.m * c.n : c.n * c.k; }

KernelTimes price_kernels(const std::vector<KernelCall>& calls, const DeviceRates& rates, const std::string& dtype,
                          double peak, double stated_efficiency) {
  KernelTimes t;
  const auto curve = rates.gemm_efficiency.find(dtype);
  const auto forms = rates.gemm_form_efficiency.find(dtype);
  const auto shapes = rates.gemm_shape_efficiency.find(dtype);
  // The efficiency measured at exactly this call (plan calibrate --model), or 0.
  auto exact = [&](const KernelCall& c) {
    if (shapes == rates.gemm_shape_efficiency.end()) return 0.0;
    const GemmShape want{c.form, c.m, c.n, c.k};
    const auto at = std::find(rates.gemm_shapes.begin(), rates.gemm_shapes.end(), want);
    const auto i = static_cast<size_t>(at - rates.gemm_shapes.begin());
    return at == rates.gemm_shapes.end() || i >= shapes->second.size() ? 0.0 : shapes->second[i];
  };
  // `flops` at the efficiency of a call of `call_flops`.
  auto gemm_seconds = [&](double flops, double call_flops) {
    const double e = curve != rates.gemm_efficiency.end() ? curve->second.at(call_flops) : stated_efficiency;
    return flops / (peak * e);
  };
  for (const KernelCall& c : calls) {
    switch (c.kind) {
      case KernelCall::Kind::kGemm: {
        const double flops = 2 * c.m * c.n * c.k;
        const Grid* grid = nullptr;
        if (forms != rates.gemm_form_efficiency.end())
          if (auto g = forms->second.find(c.form); g != forms->second.end()) grid = &g->second;
        const double e = exact(c);
        const double s = c.count * (e > 0  ? flops / (peak * e)
                                    : grid ? flops / (peak * grid->at(gemm_tokens(c), gemm_weights(c)))
                                           : gemm_seconds(flops, flops));
        t.gemm += s;
        if (c.form == GemmForm::kWgrad) t.wgrad += s;
        break;
      }
      case KernelCall::Kind::kAttentionForward:
      case KernelCall::Kind::kAttentionBackward: {
        const bool forward = c.kind == KernelCall::Kind::kAttentionForward;
        const auto& curves = forward ? rates.attention_forward_s : rates.attention_backward_s;
        if (auto m = curves.find(dtype); m != curves.end()) {
          t.attention += c.count * m->second.at(c.seq) * c.head_dim / static_cast<double>(rates.attention_head_dim);
        } else {  // the causal half as GEMMs: QKᵀ and P·V forward, four such products backward
          const double half = c.seq * c.seq * c.head_dim;  // 2 FLOPs × T²/2 × D: one product's causal half
          t.attention += c.count * gemm_seconds(half * (forward ? 2 : 4), half);
        }
        break;
      }
      case KernelCall::Kind::kMemory:
        if (auto b = rates.bandwidth.find(c.family); b != rates.bandwidth.end())
          t.memory += c.count * c.bytes / b->second.at(c.bytes);
        break;
    }
  }
  return t;
}

}  // namespace sp::planner
