// Whole-run validation (plan/run_plan.h, run_config.h, model/llama_config.h): every rule produces a
// message naming the keys and values, all violations are reported at once, and valid plans place
// layers and micro-batches as documented.
#include <gtest/gtest.h>

#include "plan/run_plan.h"
#include "unity_id.h"

namespace sp::parallel {
namespace {
namespace SP_TEST_ID {

config::RunConfig tiny() {
  nlohmann::json j = {
      {"model", {{"dim", 64}, {"n_layers", 4}, {"n_heads", 4}, {"n_kv_heads", 2}, {"ffn_dim", 96}, {"max_seq", 32}}},
      {"data", {{"vocab_size", 128}}},
      {"train", {{"global_batch", 8}, {"micro_batch_size", 2}, {"seq_len", 16}}}};
  auto c = config::RunConfig::from_json(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

std::string error_of(config::RunConfig c, int world) {
  auto p = plan::RunPlan::make(c, world);
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.status().exit_code(), 2);
  return p.status().message();
}

TEST(RunPlan, WorldSizeEquation) {
  config::RunConfig c = tiny();
  c.parallel.dp = 2;
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  EXPECT_NE(error_of(c, 6).find("world size 6 ≠ dp 2 × tp 2 × pp 2 = 8"), std::string::npos);
}

TEST(RunPlan, BatchDivisibility) {
  config::RunConfig c = tiny();
  c.parallel.dp = 3;
  EXPECT_NE(error_of(c, 3).find("global batch 8 is not divisible by micro_batch_size 2 × dp 3 = 6"), std::string::npos);
  c = tiny();
  c.train.global_batch = 7;
  EXPECT_NE(error_of(c, 1).find("train.global_batch 7 is not divisible by train.micro_batch_size 2"),
            std::string::npos);
}

TEST(RunPlan, DeterministicNeedsPowerOfTwoBlocks) {
  config::RunConfig c = tiny();
  c.train.global_batch = 12;  // M = 6, dp = 2 → 3 per rank
  c.parallel.dp = 2;
  EXPECT_NE(error_of(c, 2).find("M/dp = 6/2 = 3"), std::string::npos);
  c.parallel.reduction = config::Reduction::kFast;
  EXPECT_TRUE(plan::RunPlan::make(c, 2).ok());
}

TEST(RunPlan, TensorParallelDivisibility) {
  config::RunConfig c = tiny();
  c.parallel.tp = 3;
  const std::string e = error_of(c, 3);
  EXPECT_NE(e.find("model.n_heads = 4 is not divisible by parallel.tp = 3"), std::string::npos);
  EXPECT_NE(e.find("model.n_kv_heads = 2 is not divisible by parallel.tp = 3"), std::string::npos);
  EXPECT_NE(e.find("model.vocab_size = 128 is not divisible by parallel.tp = 3"), std::string::npos);
  c = tiny();
  c.parallel.tp = 4;  // kv heads 2
  EXPECT_NE(error_of(c, 4).find("n_kv_heads = 2 is not divisible by parallel.tp = 4"), std::string::npos);
}

TEST(RunPlan, SequenceParallelRules) {
  config::RunConfig c = tiny();
  c.parallel.sequence_parallel = true;  // tp = 1
  EXPECT_NE(error_of(c, 1).find("parallel.sequence_parallel = true needs parallel.tp > 1"), std::string::npos);
  c.parallel.tp = 2;
  c.train.seq_len = 15;
  EXPECT_NE(error_of(c, 2).find("train.seq_len = 15 is not divisible by parallel.tp = 2"), std::string::npos);
  c.train.seq_len = 16;
  EXPECT_TRUE(plan::RunPlan::make(c, 2).ok());
}

TEST(RunPlan, ZeroBubbleRules) {
  // What ZB-H1's split backward does not cover is refused by name, with a hint; pp = 2 alone is accepted.
  config::RunConfig c = tiny();
  c.parallel.schedule = config::Schedule::kZbH1;
  EXPECT_NE(error_of(c, 1).find("parallel.schedule = \"zb-h1\" needs parallel.pp ≥ 2"), std::string::npos);
  c.parallel.pp = 2;
  EXPECT_TRUE(plan::RunPlan::make(c, 2).ok());
  auto refused = [&](auto edit, int world, const std::string& want) {
    config::RunConfig x = c;
    edit(x);
    EXPECT_NE(error_of(x, world).find(want), std::string::npos) << want;
  };
  refused([](config::RunConfig& x) { x.parallel.virtual_stages = 2; }, 2, "virtual_stages = 2: ZB-H1 has one chunk");
  refused([](config::RunConfig& x) { x.train.recompute = model::Recompute::kFull; }, 2, "recompute = \"full\"");
  refused(
      [](config::RunConfig& x) {
        x.parallel.tp = 2;
        x.parallel.sequence_parallel = true;
      },
      4, "sequence_parallel = true is not supported yet");
  refused([](config::RunConfig& x) { x.parallel.reduction = config::Reduction::kFast; }, 2, "reduction = \"fast\"");
}

TEST(RunPlan, PipelineRules) {
  config::RunConfig c = tiny();
  c.parallel.pp = 3;
  EXPECT_NE(error_of(c, 3).find("model.n_layers = 4 is not divisible by pp × virtual_stages = 3 × 1 = 3"),
            std::string::npos);
  c = tiny();
  c.parallel.pp = 2;
  c.parallel.virtual_stages = 2;
  EXPECT_NE(error_of(c, 2).find("needs parallel.schedule = \"interleaved\""), std::string::npos);
  c.parallel.schedule = config::Schedule::kInterleaved;
  c.train.global_batch = 6;  // M = 3, not a multiple of pp
  EXPECT_NE(error_of(c, 2).find("multiple of pp"), std::string::npos);
  c = tiny();
  c.parallel.pp = 2;
  c.model.tie_embeddings = true;
  EXPECT_NE(error_of(c, 2).find("tie_embeddings"), std::string::npos);
  c = tiny();
  c.parallel.pp = 2;
  c.parallel.zero = 3;
  EXPECT_NE(error_of(c, 2).find("refused, as DeepSpeed does"), std::string::npos);
}

TEST(RunPlan, Zero3NeedsAnEvalBatchPerDpRank) {
  config::RunConfig c = tiny();
  c.parallel.dp = 4;
  c.parallel.zero = 3;
  c.train.eval_batches = 2;
  EXPECT_NE(error_of(c, 4).find("needs train.eval_batches ≥ dp (it is 2)"), std::string::npos);
  c.train.eval_batches = 4;
  EXPECT_TRUE(plan::RunPlan::make(c, 4).ok());
}

TEST(RunPlan, AllViolationsAtOnce) {
  config::RunConfig c = tiny();
  c.parallel.tp = 3;
  c.train.seq_len = 64;
  const std::string e = error_of(c, 5);
  EXPECT_NE(e.find("world size 5"), std::string::npos);
  EXPECT_NE(e.find("seq_len = 64 exceeds model.max_seq = 32"), std::string::npos);
  EXPECT_NE(e.find("n_heads = 4"), std::string::npos);
}

TEST(RunPlan, MixedPrecisionRules) {
  // The keys: parsed strictly, round-tripped through the contract's JSON only in 16-bit precision.
  nlohmann::json j = tiny().to_json();
  EXPECT_FALSE(j["train"].contains("precision")) << "an fp32 contract must not change";
  j["train"]["precision"] = "bf16";
  j["train"]["grad_dtype"] = "bf16";
  auto c = config::RunConfig::from_json(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->train.precision.compute, DType::kBF16);
  EXPECT_EQ(c->to_json()["train"]["grad_dtype"], "bf16");
  EXPECT_EQ(c->to_json()["train"]["gemm16"], "auto");
  auto p = plan::RunPlan::make(*c, 1);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE(p->gemm16, kernels::Gemm16Kind::kAuto);  // resolved on this CPU
  EXPECT_FALSE(gemm16_backend_name(*p).empty());
  j["train"]["precision"] = "bf17";
  EXPECT_NE(config::RunConfig::from_json(j).status().message().find("train.precision = \"bf17\" is not a precision"),
            std::string::npos);
  j["train"]["precision"] = "bf16";
  j["train"]["grad_dtype"] = "fp16";
  EXPECT_NE(config::RunConfig::from_json(j).status().message().find("train.grad_dtype = \"fp16\" does not fit"),
            std::string::npos);
  j["train"]["grad_dtype"] = "fp32";
  j["train"]["gemm16"] = "cublas";
  EXPECT_NE(config::RunConfig::from_json(j).status().message().find("train.gemm16 = \"cublas\""), std::string::npos);
  // Rules of the plan: a backend without a 16-bit precision, fast reduction with 16-bit gradients, the
  // parameter server, and fp16 until the step drives the loss scaler.
  config::RunConfig f = tiny();
  f.train.gemm16 = kernels::Gemm16Kind::kFallback;
  EXPECT_NE(error_of(f, 1).find("train.gemm16 = \"fallback\" with train.precision = \"fp32\""), std::string::npos);
  config::RunConfig g = *c;
  g.train.precision.grad = DType::kBF16;
  g.parallel.dp = 2;
  g.parallel.reduction = config::Reduction::kFast;
  EXPECT_NE(error_of(g, 2).find("MPI has no 16-bit floating-point sum"), std::string::npos);
  config::RunConfig ps = *c;
  ps.parallel.architecture = config::Architecture::kParameterServer;
  ps.parallel.servers = 1;
  EXPECT_NE(error_of(ps, 2).find("parameter servers keep and send fp32"), std::string::npos);
  config::RunConfig h = *c;
  h.train.precision = {DType::kF16, DType::kF32};
  EXPECT_NE(error_of(h, 1).find("train.precision = \"fp16\" needs dynamic loss scaling"), std::string::npos);
}

TEST(RunPlan, PlacementAndShares) {
  config::RunConfig c = tiny();
  c.parallel.pp = 2;
  c.parallel.virtual_stages = 2;
  c.parallel.schedule = config::Schedule::kInterleaved;
  auto p = plan::RunPlan::make(c, 2);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto r1 = p->chunks_of(1);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_EQ(r1[0].layer_begin, 1);  // chunk 1 of 4: layer 1
  EXPECT_EQ(r1[1].chunk, 3);
  EXPECT_TRUE(r1[1].last);
  EXPECT_EQ(r1[1].layer_begin, 3);
  EXPECT_EQ(p->local_micro_batches, 4);
}

TEST(RunConfig, StrictKeysAndTypes) {
  auto bad = config::RunConfig::from_json({{"train", {{"stepz", 3}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown key train.stepz"), std::string::npos);
  EXPECT_NE(bad.status().hint().find("steps"), std::string::npos);
  bad = config::RunConfig::from_json({{"train", {{"steps", "ten"}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train.steps = \"ten\" must be an integer"), std::string::npos);
  bad = config::RunConfig::from_json({{"parallel", {{"zero", 4}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("parallel.zero = 4 is out of range [0, 3]"), std::string::npos);
  bad = config::RunConfig::from_json({{"parallel", {{"schedule", "zigzag"}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not one of"), std::string::npos);
  bad = config::RunConfig::from_json({{"optimizer", {}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown section [optimizer]"), std::string::npos);
}

TEST(RunConfig, OverridesParseAsToml) {
  nlohmann::json j = nlohmann::json::object();
  ASSERT_TRUE(config::apply_override(j, "parallel.dp=4").ok());
  ASSERT_TRUE(config::apply_override(j, "train.lr=1e-3").ok());
  ASSERT_TRUE(config::apply_override(j, "parallel.schedule=gpipe").ok());
  ASSERT_TRUE(config::apply_override(j, "model.tie_embeddings=true").ok());
  EXPECT_EQ(j["parallel"]["dp"], 4);
  EXPECT_DOUBLE_EQ(j["train"]["lr"].get<double>(), 1e-3);
  EXPECT_EQ(j["parallel"]["schedule"], "gpipe");
  EXPECT_EQ(j["model"]["tie_embeddings"], true);
  EXPECT_FALSE(config::apply_override(j, "dp=4").ok());
  EXPECT_FALSE(config::apply_override(j, "parallel.dp").ok());
}

TEST(LlamaConfig, ValidationMessages) {
  model::LlamaConfig c;
  c.vocab_size = 10;
  c.dim = 250;
  c.n_layers = 0;
  c.n_heads = 8;
  c.n_kv_heads = 3;
  c.ffn_dim = -1;
  c.max_seq = 4;
  const Status s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.dim 250 is not divisible by model.n_heads 8"), std::string::npos);
  EXPECT_NE(s.message().find("model.n_heads 8 is not divisible by model.n_kv_heads 3"), std::string::npos);
  EXPECT_NE(s.message().find("model.n_layers = 0 must be a positive integer"), std::string::npos);
  EXPECT_NE(s.message().find("model.ffn_dim = -1"), std::string::npos);
  auto unknown = model::LlamaConfig::from_json({{"dim", 8}, {"layers", 2}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown key model.layers"), std::string::npos);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::parallel
