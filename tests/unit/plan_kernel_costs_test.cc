// The time model's compute side (planner/kernel_costs.h, planner/device_rates.h): the kernels of a micro-batch
// against the FLOP count of planner/flops.h (an independent formula: Narayanan et al. eq. 2's terms), the
// backward's GEMMs twice the forward's, curves and grids interpolated in log-log and clamped, pricing that
// reduces to the stated efficiency when a curve is flat, and every GEMM priced at its own form's grid.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/trace_record.h"
#include "planner/flops.h"
#include "planner/kernel_costs.h"
#include "planner/model_shape.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

double gemm_flops(const std::vector<KernelCall>& calls) {
  double f = 0;
  for (const KernelCall& c : calls)
    if (c.kind == KernelCall::Kind::kGemm) f += c.count * 2 * c.m * c.n * c.k;
  return f;
}

ChunkKernelsInput small(int tp) {
  ChunkKernelsInput in;
  in.model.dim = 512;
  in.model.n_layers = 8;
  in.model.n_heads = 8;
  in.model.n_kv_heads = 8;
  in.model.ffn_dim = 1376;
  in.model.vocab_size = 8192;
  in.model.max_seq = 256;
  in.blocks = 8;
  in.first = in.last = true;
  in.micro_batch_size = 2;
  in.seq_len = 256;
  in.tp = tp;
  in.unit_params = 1000;
  in.micro_batches = 4;
  return in;
}

TEST(PlanKernelCosts, GemmFlopsAreTheModelsFlopsWithoutTheAttentionCore) {
  for (int tp : {1, 2}) {
    const ChunkKernelsInput in = small(tp);
    const ChunkKernels k = chunk_kernels(in);
    const ModelShape shape = ModelShape::from_llama(in.model, "small", "test");
    const double per_sequence =
        8 * (block_forward_flops(shape, 256) - attention_core_flops(shape, 256)) + head_forward_flops(shape, 256);
    EXPECT_NEAR(gemm_flops(k.forward) / (per_sequence * 2 / tp), 1.0, 1e-12) << "tp " << tp;
    EXPECT_NEAR(gemm_flops(k.backward) / gemm_flops(k.forward), 2.0, 1e-12) << "tp " << tp;
  }
  ChunkKernelsInput rec = small(1);
  rec.recompute = model::Recompute::kFull;
  const ChunkKernels r = chunk_kernels(rec), plain = chunk_kernels(small(1));
  EXPECT_GT(gemm_flops(r.backward), gemm_flops(plain.backward));
  // Selective recomputes the probabilities only: no GEMM, half an attention forward per (sequence, head).
  rec.recompute = model::Recompute::kSelective;
  const ChunkKernels sel = chunk_kernels(rec);
  EXPECT_EQ(gemm_flops(sel.backward), gemm_flops(plain.backward));
  ASSERT_EQ(sel.backward.size(), plain.backward.size() + 8);  // one call per block of the chunk
  double extra = 0;
  for (const KernelCall& c : sel.backward)
    if (c.kind == KernelCall::Kind::kAttentionForward) extra += c.count;
  EXPECT_DOUBLE_EQ(extra, 8 * 0.5 * rec.micro_batch_size * rec.model.n_heads);
}

TEST(PlanKernelCosts, CurvesInterpolateInLogLogAndClamp) {
  const Curve c{{1e3, 1e5}, {1.0, 100.0}};
  EXPECT_DOUBLE_EQ(c.at(1e3), 1.0);
  EXPECT_NEAR(c.at(1e4), 10.0, 1e-9);  // halfway in log x is halfway in log y
  EXPECT_DOUBLE_EQ(c.at(1), 1.0);
  EXPECT_DOUBLE_EQ(c.at(1e9), 100.0);
}

TEST(PlanKernelCosts, PricingFollowsTheRates) {
  const std::vector<KernelCall> calls = chunk_kernels(small(1)).forward;
  DeviceRates none;
  const KernelTimes stated = price_kernels(calls, none, "fp32", 1e11, 0.5);
  EXPECT_NEAR(stated.gemm, gemm_flops(calls) / 5e10, 1e-12);
  EXPECT_EQ(stated.memory, 0.0);  // nothing measured: memory-bound kernels are free, as for a preset
  DeviceRates flat;
  flat.gemm_efficiency["fp32"] = Curve{{1, 1e12}, {0.5, 0.5}};
  flat.bandwidth[MemoryFamily::kNorm] = Curve{{1, 1e12}, {1e10, 1e10}};
  const KernelTimes measured = price_kernels(calls, flat, "fp32", 1e11, 0.9);
  EXPECT_NEAR(measured.gemm / stated.gemm, 1.0, 1e-12);  // a flat curve at 0.5 is the stated 0.5
  double norm_bytes = 0;
  for (const KernelCall& c : calls)
    if (c.kind == KernelCall::Kind::kMemory && c.family == MemoryFamily::kNorm) norm_bytes += c.count * c.bytes;
  EXPECT_GT(norm_bytes, 0.0);
  EXPECT_NEAR(measured.memory, norm_bytes / 1e10, 1e-15);  // only the family that has a bandwidth is priced
  // 16-bit activations: the norms write half the bytes (the only family priced here).
  ChunkKernelsInput mixed = small(1);
  mixed.mixed = true;
  EXPECT_LT(price_kernels(chunk_kernels(mixed).forward, flat, "fp32", 1e11, 0.9).memory, measured.memory);
}

TEST(PlanKernelCosts, GridsInterpolateBilinearlyInLogsAndClamp) {
  const Grid g{{1e2, 1e4}, {1e3, 1e5}, {1.0, 10.0, 100.0, 1000.0}};  // z = x · y / 1e5 on the corners
  EXPECT_DOUBLE_EQ(g.at(1e2, 1e3), 1.0);
  EXPECT_NEAR(g.at(1e4, 1e5), 1000.0, 1e-9);
  EXPECT_NEAR(g.at(1e3, 1e4), 31.6227766016838, 1e-9);  // the centre: the geometric mean of the corners
  EXPECT_NEAR(g.at(1e3, 1e3), 10.0, 1e-9);              // halfway in log x along y's first row
  EXPECT_NEAR(g.at(1, 1e9), 10.0, 1e-9);                // clamped to the corner (x first, y last)
}

// The engine's three products per linear (kernels/matmul.h): forward (N, out, in), dgrad (N, in, out) and
// wgrad (out, in, N), each with its form, so that a grid per form prices each; ZB-H1's W is the wgrad part.
TEST(PlanKernelCosts, EveryLinearProductCarriesItsForm) {
  const ChunkKernels k = chunk_kernels(small(2));
  double forward = 0, dgrad = 0, wgrad = 0;
  for (const KernelCall& c : k.forward)
    if (c.kind == KernelCall::Kind::kGemm) {
      EXPECT_EQ(c.form, GemmForm::kForward);
      EXPECT_EQ(gemm_tokens(c), 512.0);  // N = B·T = 2·256 rows
      forward += 2 * c.m * c.n * c.k;
    }
  for (const KernelCall& c : k.backward)
    if (c.kind == KernelCall::Kind::kGemm) {
      ASSERT_NE(c.form, GemmForm::kForward);
      EXPECT_EQ(gemm_tokens(c), 512.0);  // M of dgrad, K of wgrad
      (c.form == GemmForm::kDgrad ? dgrad : wgrad) += 2 * c.m * c.n * c.k;
    }
  EXPECT_GT(forward, 0.0);
  EXPECT_DOUBLE_EQ(dgrad, forward);
  EXPECT_DOUBLE_EQ(wgrad, forward);
  // Priced: a wgrad grid at half the efficiency of the others doubles the wgrad time only.
  DeviceRates r;
  const Grid flat{{1, 1e9}, {1, 1e12}, {0.8, 0.8, 0.8, 0.8}}, slow{{1, 1e9}, {1, 1e12}, {0.4, 0.4, 0.4, 0.4}};
  r.gemm_form_efficiency["bf16"] = {{GemmForm::kForward, flat}, {GemmForm::kDgrad, flat}, {GemmForm::kWgrad, slow}};
  r.gemm_efficiency["bf16"] = Curve{{1, 1e12}, {1.0, 1.0}};  // not used where the form has a grid
  const KernelTimes f = price_kernels(k.forward, r, "bf16", 1e12, 0.5);
  const KernelTimes b = price_kernels(k.backward, r, "bf16", 1e12, 0.5);
  EXPECT_NEAR(f.gemm, forward / 0.8e12, 1e-15);
  EXPECT_EQ(f.wgrad, 0.0);
  EXPECT_NEAR(b.wgrad, wgrad / 0.4e12, 1e-15);
  EXPECT_NEAR(b.gemm, dgrad / 0.8e12 + wgrad / 0.4e12, 1e-15);
}

// The evidence of a step (kernel_costs.h evidence_kernels): the checksums over the rank's dp range (a share of
// the steps), the replica digest and the trace's payload digests, each priced at its family's bandwidth; and
// the bytes the trace digests per record (comm::digested_bytes_of), op by op as TracedCommunicator hashes them.
TEST(PlanKernelCosts, EvidenceIsPricedFromWhatItReads) {
  DeviceRates r;
  r.bandwidth[MemoryFamily::kChecksum] = Curve{{1, 1e12}, {4e9, 4e9}};
  r.bandwidth[MemoryFamily::kDigest] = Curve{{1, 1e12}, {2e10, 2e10}};
  EvidenceKernelsInput in;
  in.summarized_params = 1'000'000;  // 4 MB of fp32 at 4 GB/s: 1 ms
  in.replica_bytes = 2e8;            // 10 ms at 20 GB/s
  in.digested_bytes = 4e8;           // 20 ms
  EXPECT_NEAR(price_kernels(evidence_kernels(in), r, "fp32", 1e11, 0.5).memory, 0.031, 1e-12);
  in.checksum_share = 0.25;  // checksums every 4th step: a quarter of their cost per step
  EXPECT_NEAR(price_kernels(evidence_kernels(in), r, "fp32", 1e11, 0.5).memory, 0.03025, 1e-12);
  EXPECT_TRUE(evidence_kernels(EvidenceKernelsInput{.summarized_params = 0, .checksum_share = 1}).empty());
  // Without measured families the evidence is free, as every memory-bound kernel of a datasheet preset.
  EXPECT_EQ(price_kernels(evidence_kernels(in), DeviceRates{}, "fp32", 1e11, 0.5).memory, 0.0);

  // The gradient norm of every step: exact sums, and the lanes too on a checksum step.
  DeviceRates sums;
  sums.bandwidth[MemoryFamily::kExactSum] = Curve{{1, 1e12}, {1e10, 1e10}};
  sums.bandwidth[MemoryFamily::kChecksum] = Curve{{1, 1e12}, {5e9, 5e9}};
  EXPECT_NEAR(price_kernels(optimizer_kernels(0, 0, 1'000'000, 0.0, false), sums, "fp32", 1e11, 0.5).memory, 4e-4,
              1e-15);
  EXPECT_NEAR(price_kernels(optimizer_kernels(0, 0, 1'000'000, 1.0, false), sums, "fp32", 1e11, 0.5).memory, 8e-4,
              1e-15);
  EXPECT_NEAR(price_kernels(optimizer_kernels(0, 0, 1'000'000, 0.5, false), sums, "fp32", 1e11, 0.5).memory, 6e-4,
              1e-15);

  using comm::OpKind;
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kAllReduce, 800, 4), 1600);      // in and out, in place
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kAllToAll, 800, 4), 1600);       // send and receive buffers
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kAllGather, 800, 4), 1000);      // the shard in, the whole out
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kReduceScatter, 800, 4), 1000);  // the whole in, the shard out
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kSend, 800, 4), 800);
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kIrecv, 800, 4), 800);
  EXPECT_EQ(comm::digested_bytes_of(OpKind::kBarrier, 0, 4), 0);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
