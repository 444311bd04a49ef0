// Model shapes (planner/model_shape.h, config/hf_config.h): every named shape's parameter count equals the
// count its source publishes, to the digits published (printed side by side); the GPT count is
// Megatron's eq. 2 exactly (plus the final LayerNorm); a Hugging Face LLaMA config.json is read strictly,
// refusing math-changing keys by name and unknown keys, every problem at once, exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "config/hf_config.h"
#include "planner/model_shape.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

TEST(PlanModel, ParameterCountsMatchThePublishedOnes) {
  std::printf("%-16s %16s %12s %10s\n", "shape", "ours", "published", "error");
  for (const NamedShape& n : named_shapes()) {
    const double ours = static_cast<double>(n.shape.param_count()) / 1e9;
    std::printf("%-16s %14.4f B %10.*f B %9.3f %%\n", n.shape.name.c_str(), ours, n.published_decimals,
                n.published_billions, 100.0 * (ours - n.published_billions) / n.published_billions);
    EXPECT_TRUE(n.matches_published(ours)) << n.shape.name << ": " << ours << " B vs published " << n.published_billions
                                           << " B" << (n.published_truncated ? " (truncated)" : " (rounded)");
    EXPECT_TRUE(n.shape.validate().ok()) << n.shape.name;
    EXPECT_FALSE(n.shape.source.empty());
  }
  EXPECT_GE(named_shapes().size(), 15u);
}

TEST(PlanModel, PublishedPrecisionRules) {
  NamedShape rounded{ModelShape{}, 1.7, 1, false}, truncated{ModelShape{}, 65.2, 1, true};
  EXPECT_TRUE(rounded.matches_published(1.652));
  EXPECT_TRUE(rounded.matches_published(1.7499));
  EXPECT_FALSE(rounded.matches_published(1.6499));
  EXPECT_TRUE(truncated.matches_published(65.2857));
  EXPECT_FALSE(truncated.matches_published(65.1999));
  EXPECT_FALSE(truncated.matches_published(65.3001));
}

TEST(PlanModel, GptCountIsMegatronEquationTwo) {
  // P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) = 12lh² + 13lh + (V + s)h, plus the final LayerNorm 2h.
  int gpt = 0;
  for (const NamedShape& n : named_shapes()) {
    const ModelShape& m = n.shape;
    if (m.family != ModelFamily::kGpt) continue;
    ++gpt;
    const int64_t l = m.n_layers, h = m.dim;
    EXPECT_EQ(m.param_count(), 12 * l * h * h + 13 * l * h + (m.vocab_size + m.max_seq) * h + 2 * h) << m.name;
  }
  EXPECT_EQ(gpt, 11);
  // LLaMA: the engine's own count (model::LlamaConfig::param_count), e.g. LLaMA-7B = 6,738,415,616
  // (2·V·C + L·(2C + 4C² + 3·C·F) + C), the figure transformers reports for it.
  auto l7 = named_shape("LLaMA-7B");
  ASSERT_TRUE(l7.ok());
  EXPECT_EQ(l7->param_count(), 6738415616);
  EXPECT_EQ(l7->param_count(), l7->llama_config().param_count());
}

// A GPT shape's engine counterpart: LLaMA blocks with F' = 2F/3 rounded to a multiple of 8, so the MLP's
// weights per token (3·C·F' against 2·C·F) differ by at most 3·C·4, and the whole count by under 1 %.
TEST(PlanModel, GptEngineCounterpartKeepsTheWeightsPerToken) {
  for (const NamedShape& n : named_shapes()) {
    const ModelShape& s = n.shape;
    const ModelShape c = s.engine_counterpart();
    EXPECT_EQ(c.family, ModelFamily::kLlama) << s.name;
    if (s.family == ModelFamily::kLlama) {
      EXPECT_EQ(c.name, s.name);
      EXPECT_EQ(c.ffn_dim, s.ffn_dim);
      continue;
    }
    EXPECT_EQ(c.ffn_dim % 8, 0) << s.name;
    EXPECT_LE(std::abs(3 * c.ffn_dim - 2 * s.ffn_dim), 12) << s.name << ": F' = " << c.ffn_dim;
    EXPECT_EQ(c.dim, s.dim);
    EXPECT_EQ(c.n_layers, s.n_layers);
    EXPECT_EQ(c.n_heads, s.n_heads);
    EXPECT_EQ(c.vocab_size, s.vocab_size);
    EXPECT_NEAR(static_cast<double>(c.param_count()) / static_cast<double>(s.param_count()), 1.0, 0.01) << s.name;
    EXPECT_TRUE(c.validate().ok()) << s.name;
  }
}

TEST(PlanModel, UnknownNameListsTheKnownOnes) {
  auto r = named_shape("llama-70b");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().exit_code(), 2);
  EXPECT_NE(r.status().hint().find("llama-65b"), std::string::npos) << r.status().hint();
  EXPECT_NE(r.status().hint().find("megatron-1t"), std::string::npos);
}

// The config.json of Llama-2-7b-hf as published on the Hugging Face hub.
nlohmann::json llama2_7b() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false,
    "torch_dtype": "float16", "transformers_version": "4.31.0.dev0", "use_cache": true, "vocab_size": 32000})");
}

std::string hf_error(const nlohmann::json& j) {
  auto r = shape_from_hf_config(j, "x", "config.json");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().exit_code(), 2);
  return r.status().message();
}

TEST(PlanModel, HuggingFaceLlamaConfig) {
  auto s = shape_from_hf_config(llama2_7b(), "Llama-2-7b-hf", "config.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->family, ModelFamily::kLlama);
  EXPECT_EQ(s->dim, 4096);
  EXPECT_EQ(s->n_layers, 32);
  EXPECT_EQ(s->ffn_dim, 11008);
  EXPECT_EQ(s->max_seq, 4096);
  EXPECT_EQ(s->param_count(), 6738415616);
  // GQA (Llama-2-70B's shape): 8 KV heads.
  nlohmann::json g = llama2_7b();
  g["hidden_size"] = 8192;
  g["intermediate_size"] = 28672;
  g["num_hidden_layers"] = 80;
  g["num_attention_heads"] = 64;
  g["num_key_value_heads"] = 8;
  auto l70 = shape_from_hf_config(g, "Llama-2-70b-hf", "config.json");
  ASSERT_TRUE(l70.ok()) << l70.status().to_string();
  EXPECT_EQ(l70->param_count(), 68976648192);  // 2·V·C + L·(2C + (H+2KV)·D·C + H·D·C + 3·C·F) + C
}

TEST(PlanModel, MathChangingKeysAreRefusedByName) {
  nlohmann::json j = llama2_7b();
  j["rope_scaling"] = {{"factor", 8.0}, {"rope_type", "llama3"}};
  std::string e = hf_error(j);
  EXPECT_NE(e.find("\"rope_scaling\" = {\"factor\":8.0,\"rope_type\":\"llama3\"} is refused: RoPE scaling"),
            std::string::npos)
      << e;
  j = llama2_7b();
  j["attention_bias"] = true;
  EXPECT_NE(hf_error(j).find("\"attention_bias\" = true is refused"), std::string::npos);
  j = llama2_7b();
  j["hidden_act"] = "gelu";
  EXPECT_NE(hf_error(j).find("\"hidden_act\" = \"gelu\" is refused"), std::string::npos);
  j = llama2_7b();
  j["head_dim"] = 256;
  EXPECT_NE(hf_error(j).find("\"head_dim\" = 256 is refused"), std::string::npos);
  j["head_dim"] = 128;  // = 4096 / 32: the engine's own
  EXPECT_TRUE(shape_from_hf_config(j, "x", "config.json").ok());
  j = llama2_7b();
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  EXPECT_TRUE(shape_from_hf_config(j, "x", "config.json").ok()) << "neutral values are accepted";
}

TEST(PlanModel, UnknownAndMissingKeysAllReportedAtOnce) {
  nlohmann::json j = llama2_7b();
  j.erase("hidden_size");
  j["sliding_window"] = 4096;
  j["model_type"] = "mistral";
  const std::string e = hf_error(j);
  EXPECT_NE(e.find("3 problems"), std::string::npos) << e;
  EXPECT_NE(e.find("missing key \"hidden_size\""), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key \"sliding_window\""), std::string::npos) << e;
  EXPECT_NE(e.find("\"model_type\" = \"mistral\" is refused"), std::string::npos) << e;
}

TEST(PlanModel, ReadsAConfigFileNamedByItsDirectory) {
  const sp::test::TempDir scratch;
  const auto dir = std::filesystem::path(scratch.file("Llama-2-7b-hf"));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << llama2_7b().dump();
  auto s = read_hf_config((dir / "config.json").string());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->name, "Llama-2-7b-hf");
  std::ofstream(dir / "broken.json") << "{\"vocab_size\": ";
  auto b = read_hf_config((dir / "broken.json").string());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().exit_code(), 2);
  auto none = read_hf_config((dir / "none.json").string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().exit_code(), 2);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
