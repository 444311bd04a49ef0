// FLOPs (planner/flops.h) against the published closed forms: for Megatron's GPT shapes the hardware count
// with full recompute is Narayanan et al. SC'21 eq. (3) and the model count Korthikanti et al.'s
// 72·B·s·l·h²·(1 + s/6h + V/12lh); the per-chunk durations the pipeline simulation will use add up to
// the step's count; utilization reproduces the published percentage of peak.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "planner/flops.h"
#include "planner/published_runs.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

TEST(PlanFlops, MegatronEquationThreeAndModelFlops) {
  for (const NamedShape& n : named_shapes()) {
    const ModelShape& m = n.shape;
    if (m.family != ModelFamily::kGpt) continue;
    const double B = 512, s = 2048, l = static_cast<double>(m.n_layers), h = static_cast<double>(m.dim);
    const double V = static_cast<double>(m.vocab_size);
    const double eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    const double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    const StepFlops full = step_flops(m, 512, 2048, model::Recompute::kFull);
    EXPECT_LT(rel(full.hardware, eq3), 1e-12) << m.name;
    EXPECT_LT(rel(full.model, model), 1e-12) << m.name;
    const StepFlops none = step_flops(m, 512, 2048, model::Recompute::kNone);
    EXPECT_EQ(none.hardware, none.model);
    EXPECT_EQ(none.model, full.model);
    // Selective recompute adds only QKᵀ of the attention core (the engine's): 2·s²·h per layer per sequence.
    const StepFlops sel = step_flops(m, 512, 2048, model::Recompute::kSelective);
    EXPECT_LT(rel(sel.hardware - sel.model, B * l * 2 * s * s * h), 1e-12) << m.name;
  }
}

TEST(PlanFlops, ChunksAddUpToTheStep) {
  // llama-13b (40 layers) on pp 4 × tp 2, 16 micro-batches of 2: Σ over chunks and tp ranks of
  // (forward + backward) per micro-batch × micro-batches = the step's hardware FLOPs.
  auto m = named_shape("llama-13b");
  ASSERT_TRUE(m.ok());
  for (model::Recompute rc : {model::Recompute::kNone, model::Recompute::kSelective, model::Recompute::kFull}) {
    const int pp = 4, tp = 2;
    const int64_t B = 2, M = 16, T = 2048;
    double sum = 0;
    for (int r = 0; r < pp; ++r) {
      const ChunkFlops c = chunk_flops(*m, static_cast<int>(m->n_layers) / pp, r == pp - 1, B, T, tp, rc);
      sum += (c.forward + c.backward) * tp * M;
    }
    EXPECT_LT(rel(sum, step_flops(*m, B * M, T, rc).hardware), 1e-12) << model::recompute_name(rc);
  }
}

TEST(PlanFlops, UtilizationOfThePublishedRuns) {
  // Each published row's iteration time implied by eq. (3) at its achieved TFLOP/s, and the utilization
  // recomputed from that time: the printed percentage of the 312 TFLOP/s peak, to its rounding.
  const std::string dir = std::getenv("SP_SOURCE_DIR")
                              ? std::string(std::getenv("SP_SOURCE_DIR"))
                              : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  auto t = read_published_table(dir + "/data/published/megatron-ptdp-table1.toml");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  std::printf("%-16s %6s %14s %12s %10s %10s\n", "model", "gpus", "eq.3 PFLOP", "iter s", "HFU", "published");
  for (const PublishedRun& r : t->runs) {
    auto m = named_shape(r.model);
    ASSERT_TRUE(m.ok());
    const StepFlops f = step_flops(*m, r.global_batch, t->seq_len, model::Recompute::kFull);
    const double seconds = f.hardware / (r.tflops_per_gpu * 1e12 * r.gpus);
    const double hfu = utilization(f.hardware, seconds, r.gpus, t->peak_tflops * 1e12);
    std::printf("%-16s %6d %14.1f %12.2f %9.1f%% %9.0f%%\n", r.model.c_str(), r.gpus, f.hardware / 1e15, seconds,
                100 * hfu, r.percent_of_peak);
    EXPECT_NEAR(100 * hfu, r.percent_of_peak, 0.5 + 50 / t->peak_tflops) << r.model;
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
