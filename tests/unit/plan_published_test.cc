// Published memory formulas (planner/published_memory.h) reproduce the papers' own numbers, printed ours vs
// published: ZeRO's Table 1 (per-device model states, 7.5B at N_d = 1…1024, 128B at N_d = 64) and the
// figures Korthikanti et al. 2022 derive from their Table 2 (5as/h = 80 for GPT-3 and 64 for MT-NLG;
// selective recompute saves 70 % and 65 %). The published throughput table loads and a transcription
// error in it is caught naming the row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/file_io.h"
#include "planner/published_memory.h"
#include "planner/published_runs.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

using sp::test::source_dir;

// Rajbhandari et al., SC'20, Table 1: GB per device (1e9 bytes) as printed, for the 7.5B model at every
// N_d and the 128B model at N_d = 64 (stages P_os, P_os+g, P_os+g+p; K = 12, fp16 parameters and gradients).
struct ZeroRow {
  double psi;
  int nd;
  const char* printed[3];
};
const ZeroRow kZeroTable1[] = {
    {7.5e9, 1, {"120", "120", "120"}},      {7.5e9, 4, {"52.5", "41.3", "30"}},
    {7.5e9, 16, {"35.6", "21.6", "7.5"}},   {7.5e9, 64, {"31.4", "16.6", "1.88"}},
    {7.5e9, 256, {"30.4", "15.4", "0.47"}}, {7.5e9, 1024, {"30.1", "15.1", "0.12"}},
    {128e9, 64, {"536", "284", "32"}},
};

// A printed figure covers ±half a unit of its last printed digit.
bool matches_print(double ours, const std::string& printed) {
  const auto dot = printed.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(printed.size() - dot - 1);
  return std::abs(ours - std::stod(printed)) <= 0.5 * std::pow(10.0, -decimals) + 1e-9;
}

TEST(PlanPublished, ZeroTableOne) {
  std::printf("%8s %6s | %-26s | %-26s\n", "psi", "N_d", "ours P_os / +g / +p (GB)", "published");
  for (const ZeroRow& r : kZeroTable1) {
    double ours[3];
    for (int stage = 1; stage <= 3; ++stage) ours[stage - 1] = zero_model_state_bytes(r.psi, r.nd, stage) / 1e9;
    std::printf("%8.3g %6d | %8.4g %8.4g %8.4g | %8s %8s %8s\n", r.psi, r.nd, ours[0], ours[1], ours[2], r.printed[0],
                r.printed[1], r.printed[2]);
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(matches_print(ours[i], r.printed[i]))
          << "psi " << r.psi << " N_d " << r.nd << " stage " << i + 1 << ": " << ours[i] << " vs " << r.printed[i];
  }
  // Stage 0 is 16Ψ whatever N_d: 120 GB for 7.5B.
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(7.5e9, 64, 0), 120e9);
  // The engine's fp32 accounting (docs/memory.md): DP 16Ψ; ZeRO-1 8Ψ + 8Ψ/N_d; ZeRO-2 4Ψ + 12Ψ/N_d; ZeRO-3 16Ψ/N_d.
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(1e6, 4, 0, kEngineFp32), 16e6);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(1e6, 4, 1, kEngineFp32), 8e6 + 2e6);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(1e6, 4, 2, kEngineFp32), 4e6 + 3e6);
  EXPECT_DOUBLE_EQ(zero_model_state_bytes(1e6, 4, 3, kEngineFp32), 4e6);
}

TEST(PlanPublished, MegatronActivationMemory) {
  using C = MegatronActivationCase;
  // GPT-3 (a = 96, s = 2048, h = 12288) and MT-NLG (a = 128, s = 2048, h = 20480), t = 8, b = 1.
  struct Model {
    const char* name;
    int64_t a, s, h;
    double attention_term, selective_saving;  // published: 5as/h and the saving of selective recompute
  };
  const Model models[] = {{"GPT-3 175B", 96, 2048, 12288, 80, 0.70}, {"MT-NLG 530B", 128, 2048, 20480, 64, 0.65}};
  std::printf("%-12s %-48s %14s\n", "model", "Table 2 case (t = 8, b = 1)", "MB per layer");
  for (const Model& m : models) {
    const double sbh = static_cast<double>(m.s) * m.h;
    const double none = megatron_activation_bytes_per_layer(C::kNoParallelism, m.s, 1, m.h, m.a, 1);
    // 5as/h from the formula itself: (bytes / sbh) − 34 at t = 1.
    EXPECT_NEAR(none / sbh - 34, m.attention_term, 1e-9) << m.name;
    const double sp = megatron_activation_bytes_per_layer(C::kTensorSequenceParallel, m.s, 1, m.h, m.a, 8);
    const double sp_sel = megatron_activation_bytes_per_layer(C::kTensorSequenceSelective, m.s, 1, m.h, m.a, 8);
    const double saving = 1 - sp_sel / sp;
    EXPECT_NEAR(saving, m.selective_saving, 0.005) << m.name << ": selective recompute saves " << saving;
    for (C c : {C::kNoParallelism, C::kTensorParallel, C::kTensorSequenceParallel, C::kTensorSelective,
                C::kTensorSequenceSelective, C::kFullRecompute})
      std::printf("%-12s %-48s %14.1f\n", m.name, megatron_activation_case_name(c).c_str(),
                  megatron_activation_bytes_per_layer(c, m.s, 1, m.h, m.a, c == C::kNoParallelism ? 1 : 8) / 1e6);
    std::printf("%-12s 5as/h = %.0f (published %.0f); selective recompute saves %.1f %% (published %.0f %%)\n", m.name,
                none / sbh - 34, m.attention_term, 100 * saving, 100 * m.selective_saving);
  }
  // At t = 1 the tensor-parallel rows are the no-parallelism row; full recompute keeps 2sbh.
  const double a = 32, s = 2048, h = 4096;
  EXPECT_DOUBLE_EQ(megatron_activation_bytes_per_layer(C::kTensorParallel, 2048, 2, 4096, 32, 1),
                   megatron_activation_bytes_per_layer(C::kNoParallelism, 2048, 2, 4096, 32, 1));
  EXPECT_DOUBLE_EQ(megatron_activation_bytes_per_layer(C::kTensorSequenceParallel, 2048, 2, 4096, 32, 1),
                   s * 2 * h * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(megatron_activation_bytes_per_layer(C::kFullRecompute, 2048, 2, 4096, 32, 8), s * 2 * h * 2);
  // Which row a strategy selects.
  EXPECT_EQ(megatron_activation_case(1, false, model::Recompute::kNone), C::kNoParallelism);
  EXPECT_EQ(megatron_activation_case(8, false, model::Recompute::kNone), C::kTensorParallel);
  EXPECT_EQ(megatron_activation_case(8, true, model::Recompute::kSelective), C::kTensorSequenceSelective);
  EXPECT_EQ(megatron_activation_case(8, true, model::Recompute::kFull), C::kFullRecompute);
}

TEST(PlanPublished, ThroughputTableLoadsAndCatchesTranscriptionErrors) {
  const std::string path = source_dir() + "/data/published/megatron-ptdp-table1.toml";
  auto t = read_published_table(path);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->runs.size(), 10u);
  EXPECT_EQ(t->seq_len, 2048);
  EXPECT_EQ(t->cluster, "dgx-a100");
  EXPECT_EQ(t->runs.back().model, "megatron-1t");
  EXPECT_EQ(t->runs.back().dp(), 6);  // 3072 / (8 · 64)

  auto text = read_file(path);
  ASSERT_TRUE(text.ok());
  const sp::test::TempDir scratch;
  const std::string tmp = scratch.file("published.toml");
  auto broken = [&](const std::string& from, const std::string& to) {
    std::string s = *text;
    s.replace(s.find(from), from.size(), to);
    std::ofstream(tmp) << s;
    auto r = read_published_table(tmp);
    EXPECT_FALSE(r.ok()) << from << " → " << to;
    EXPECT_EQ(r.status().exit_code(), 2);
    return r.status().message();
  };
  std::string e = broken("hidden_size = 6144", "hidden_size = 6400");
  EXPECT_NE(e.find("run[3] (megatron-18.4b): heads/hidden/layers 48/6400/40 differ"), std::string::npos) << e;
  e = broken("params_billion = 76.1", "params_billion = 67.1");
  EXPECT_NE(e.find("run[5] (megatron-76.1b): params_billion 67.1"), std::string::npos) << e;
  e = broken("tflops_per_gpu = 148", "tflops_per_gpu = 184");
  EXPECT_NE(e.find("run[6] (megatron-145.6b): tflops_per_gpu × gpus"), std::string::npos) << e;
  e = broken("gpus = 2520", "gpus = 2500");
  EXPECT_NE(e.find("run[8] (megatron-529.6b): gpus 2500 is not divisible by tp × pp = 8 × 35"), std::string::npos) << e;
  e = broken("percent_of_peak = 46", "percent_of_peak = 64");
  EXPECT_NE(e.find("disagrees with percent_of_peak 64"), std::string::npos) << e;
  e = broken("global_batch = 512\n", "");
  EXPECT_NE(e.find("run[0].global_batch: missing field"), std::string::npos) << e;
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
