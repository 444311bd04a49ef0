// Hugging Face model files (config/hf_config.h, ckpt/hf_layout.h, ckpt/hf_weights.h): config.json → the
// engine's model and back, the run configuration it yields, the shard plan of huggingface_hub and the index
// rules, and weights written then read back exactly (F32, BF16, F16 sources), byte for byte on a rewrite.
// Every bad input (index, shards, shapes, config.json) is checked to fail as a usage error (exit 2) naming
// the tensor or file, with nothing written where the operation writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "ckpt/hf_layout.h"
#include "ckpt/hf_weights.h"
#include "ckpt/safetensors.h"
#include "config/hf_config.h"
#include "config/run_config.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "model/weights.h"
#include "planner/model_shape.h"
#include "temp_dir.h"
#include "tensor/float16.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

namespace fs = std::filesystem;
using nlohmann::json;

// A small GQA model in the HF keys (the shapes of the oracle's "gqa" configuration).
json small_hf() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 24,
    "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
    "max_position_embeddings": 16, "vocab_size": 61, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 1})");
}

model::LlamaConfig small_model() {
  auto c = config::hf_model_from_json(small_hf(), "small", "config.json");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c->model;
}

// ------------------------------------------------------------------------------------------- config.json

TEST(HfConfig, ReadsTheEngineModelAndRecordsTheMapping) {
  auto c = config::hf_model_from_json(small_hf(), "small", "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->model.dim, 24);
  EXPECT_EQ(c->model.n_kv_heads, 2);
  EXPECT_EQ(c->model.max_seq, 16);
  EXPECT_EQ(c->model.rope_theta, 500000.0);
  EXPECT_EQ(c->model.norm_eps, 1e-5f);
  EXPECT_EQ(c->mapping["hidden_size"]["became"], "model.dim");
  EXPECT_EQ(c->mapping["vocab_size"]["became"], "model.vocab_size and data.vocab_size");
  EXPECT_EQ(c->mapping["torch_dtype"]["value"], "bfloat16");
  EXPECT_TRUE(c->mapping["torch_dtype"].contains("ignored"));
  EXPECT_EQ(c->mapping["initializer_range"]["default"], 0.02);
  EXPECT_EQ(c->name, "small");
  EXPECT_EQ(c->model.param_count(), planner::shape_from_hf_config(small_hf(), "small", "config.json")->param_count());
}

TEST(HfConfig, AbsentKeysTakeTransformersDefaultsNotTheEngines) {
  json j = small_hf();
  for (const char* k : {"rms_norm_eps", "rope_theta", "num_key_value_heads", "tie_word_embeddings"}) j.erase(k);
  auto c = config::hf_model_from_json(j, "x", "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->model.norm_eps, 1e-6f);  // LlamaConfig's rms_norm_eps, not model.norm_eps's 1e-5
  EXPECT_EQ(c->model.rope_theta, 10000.0);
  EXPECT_EQ(c->model.n_kv_heads, 6);
  EXPECT_FALSE(c->model.tie_embeddings);
  EXPECT_EQ(c->mapping["rms_norm_eps"]["default"], 1e-6);
}

// transformers 5 writes rope_parameters (and dtype) where 4 wrote rope_theta / rope_scaling (and torch_dtype).
TEST(HfConfig, ReadsTransformers5RopeParametersAndRefusesScaledRope) {
  json j = small_hf();
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  j["rope_parameters"] = {{"rope_theta", 250000.0}, {"rope_type", "default"}};
  auto c = config::hf_model_from_json(j, "x", "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->model.rope_theta, 250000.0);
  EXPECT_EQ(c->mapping["rope_theta"]["became"], "model.rope_theta");
  EXPECT_TRUE(c->mapping["dtype"].contains("ignored"));
  j["rope_parameters"]["rope_type"] = "llama3";
  auto scaled = config::hf_model_from_json(j, "x", "config.json");
  ASSERT_FALSE(scaled.ok());
  EXPECT_NE(scaled.status().message().find("rope_type other than \"default\""), std::string::npos)
      << scaled.status().message();
  j["rope_parameters"] = {{"rope_theta", 250000.0}, {"rope_type", "default"}};
  j["rope_theta"] = 10000.0;
  auto both = config::hf_model_from_json(j, "x", "config.json");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("disagree"), std::string::npos) << both.status().message();
}

TEST(HfConfig, WrongTypesAreAllNamedAtOnce) {
  json j = small_hf();
  j["hidden_size"] = "24";
  j["rms_norm_eps"] = "1e-5";
  j["tie_word_embeddings"] = "false";
  auto c = config::hf_model_from_json(j, "x", "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().exit_code(), 2);
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("3 problems"), std::string::npos) << m;
  EXPECT_NE(m.find("\"hidden_size\" = \"24\" must be a positive integer"), std::string::npos) << m;
  EXPECT_NE(m.find("\"rms_norm_eps\" = \"1e-5\" must be a positive number"), std::string::npos) << m;
  EXPECT_NE(m.find("\"tie_word_embeddings\" = \"false\" must be true or false"), std::string::npos) << m;
  j = small_hf();
  j["num_key_value_heads"] = 4;  // 6 heads: not divisible
  auto g = config::hf_model_from_json(j, "x", "config.json");
  ASSERT_FALSE(g.ok());
  // The rule names this file's keys, not the engine's (issue 31).
  EXPECT_NE(g.status().message().find("\"num_attention_heads\" 6 is not divisible by \"num_key_value_heads\" 4"),
            std::string::npos)
      << g.status().message();
}

TEST(HfConfig, WhatTheEngineWritesReadsBackToTheSameModel) {
  model::LlamaConfig m = small_model();
  m.init_std = 0.02f;
  m.tie_embeddings = true;
  for (const char* dtype : {"float32", "bfloat16"}) {
    const json written = json::parse(m.to_hf_json(dtype).dump());
    EXPECT_EQ(written["rms_norm_eps"].dump(), "1e-05") << "the shortest decimal of 1e-5f";
    auto back = config::hf_model_from_json(written, "x", "config.json");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->model.to_json(), m.to_json());
    EXPECT_EQ(back->model.to_hf_json(dtype), m.to_hf_json(dtype));
  }
}

TEST(HfConfig, ReadsAFileWithItsHashAndRefusesMalformedJson) {
  test::TempDir dir;
  const std::string text = small_hf().dump(2);
  ASSERT_TRUE(write_file(dir.file("config.json"), text).ok());
  auto c = config::read_hf_model_config(dir.file("config.json"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->sha256.size(), 64u);
  EXPECT_TRUE(fs::path(c->file).is_absolute());
  ASSERT_TRUE(write_file(dir.file("bad.json"), "{\"hidden_size\": 24,").ok());
  auto b = config::read_hf_model_config(dir.file("bad.json"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().exit_code(), 2);
  EXPECT_NE(b.status().message().find("bad.json is not valid JSON"), std::string::npos) << b.status().message();
  ASSERT_TRUE(write_file(dir.file("dup.json"), R"({"hidden_size": 24, "hidden_size": 48})").ok());
  EXPECT_EQ(config::read_hf_model_config(dir.file("dup.json")).status().exit_code(), 2) << "duplicate keys";
  EXPECT_EQ(config::read_hf_model_config(dir.path()).status().exit_code(), 2) << "a directory";
}

TEST(HfConfig, BecomesTheRunsModelSectionAndContract) {
  auto c = config::hf_model_from_json(small_hf(), "small", "config.json");
  ASSERT_TRUE(c.ok());
  c->file = "/x/config.json";
  c->sha256 = std::string(64, 'a');
  json run = {{"model", {{"dim", 999}}}, {"data", {{"vocab_size", 2048}}}, {"train", {{"seq_len", 16}}}};
  config::apply_hf_model_config(run, *c);
  auto rc = config::RunConfig::from_json(run);
  ASSERT_TRUE(rc.ok()) << rc.status().to_string();
  EXPECT_EQ(rc->model.to_json(), c->model.to_json());
  EXPECT_EQ(rc->data.vocab_size, 61);
  const json back = rc->to_json();
  EXPECT_EQ(back["model_config"]["sha256"], std::string(64, 'a'));
  EXPECT_EQ(back["model_config"]["mapping"]["hidden_size"]["value"], 24);
  auto again = config::RunConfig::from_json(back);  // a contract's config reads back (plan --run)
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->to_json(), back);
  json forged = back;
  forged["model_config"]["extra"] = 1;
  EXPECT_EQ(config::RunConfig::from_json(forged).status().exit_code(), 2);
  EXPECT_FALSE(config::RunConfig().to_json().contains("model_config")) << "absent without --model-config";
}

// ------------------------------------------------------------------------------------------- layout

TEST(HfLayout, ShardNamesAndSizes) {
  EXPECT_EQ(ckpt::hf_shard_file_name(2, 3), "model-00002-of-00003.safetensors");
  EXPECT_EQ(*ckpt::parse_shard_size("5GB"), 5'000'000'000u);
  EXPECT_EQ(*ckpt::parse_shard_size("500mb"), 500'000'000u);
  EXPECT_EQ(*ckpt::parse_shard_size("2GiB"), 2147483648u);
  EXPECT_EQ(*ckpt::parse_shard_size("1.5KB"), 1500u);
  EXPECT_EQ(*ckpt::parse_shard_size("4096"), 4096u);
  for (const char* bad : {"", "GB", "5XB", "-1GB", "0", "1e3", "5 G B x"}) {
    auto r = ckpt::parse_shard_size(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().exit_code(), 2) << bad;
  }
}

TEST(HfLayout, ShardPlanIsHuggingFaceHubs) {
  using V = std::vector<std::vector<size_t>>;
  EXPECT_EQ(ckpt::plan_hf_shards({1, 2, 3}, 100), (V{{0, 1, 2}}));
  EXPECT_EQ(ckpt::plan_hf_shards({3, 3, 3}, 5), (V{{0}, {1}, {2}}));
  EXPECT_EQ(ckpt::plan_hf_shards({2, 3, 3}, 5), (V{{0, 1}, {2}}));  // 2 + 3 = 5 fits exactly
  // A tensor larger than the limit is a shard of its own, listed when met (before the current shard).
  EXPECT_EQ(ckpt::plan_hf_shards({2, 2, 6, 1}, 5), (V{{2}, {0, 1, 3}}));
}

TEST(HfLayout, IndexRules) {
  auto ok = ckpt::parse_hf_index(
      json::parse(R"({"metadata": {"total_size": 12, "total_parameters": 3}, "weight_map": {"a": "x.safetensors"}})"),
      "i.json");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(*ok->total_size, 12u);
  EXPECT_EQ(ok->files(), std::vector<std::string>{"x.safetensors"});
  auto error = [](const char* text) {
    auto r = ckpt::parse_hf_index(json::parse(text), "i.json");
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().exit_code(), 2) << text;
    return r.status().message();
  };
  EXPECT_NE(error(R"({"metadata": {}})").find("missing key \"weight_map\""), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {}})").find("non-empty"), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": "x"}, "extra": 1})").find("unknown key \"extra\""), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": 3}})").find("weight_map[\"a\"] = 3"), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": "../x"}})").find("weight_map[\"a\"]"), std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": "x"}, "metadata": {"total_size": -1}})").find("total_size"),
            std::string::npos);
  EXPECT_NE(error(R"({"weight_map": {"a": "x"}, "metadata": {"total_size": "12"}})").find("total_size"),
            std::string::npos);
}

// ------------------------------------------------------------------------------------------- weights

ckpt::NamedTensors random_weights(const model::LlamaConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.05f);
  ckpt::NamedTensors w;
  for (const model::WeightSpec& s : model::weight_table(c)) {
    auto& v = w[s.name];
    v.resize(static_cast<size_t>(shape_numel(s.shape)));
    for (float& x : v) x = n(rng);
  }
  return w;
}

Result<ckpt::HfExportSummary> write(const std::string& dir, const model::LlamaConfig& c, const ckpt::NamedTensors& w,
                                    uint64_t max_shard, DType dtype = DType::kF32, bool overwrite = false) {
  return ckpt::write_hf_weights(dir, c, [&](const std::string& n) { return w.at(n).data(); },
                                {.max_shard_bytes = max_shard, .dtype = dtype, .overwrite = overwrite});
}

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = *read_file(e.path().string());
  return out;
}

TEST(HfWeights, ShardedWriteReadsBackExactlyAndRewritesTheSameBytes) {
  test::TempDir dir;
  const model::LlamaConfig c = small_model();
  const ckpt::NamedTensors w = random_weights(c, 1);
  auto s = write(dir.file("out"), c, w, 6000);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const auto files = files_of(dir.file("out"));
  ASSERT_GT(files.size(), 3u);
  const int n = static_cast<int>(files.size()) - 2;  // config.json and the index
  EXPECT_TRUE(files.count("config.json") && files.count("model.safetensors.index.json"));
  for (int i = 1; i <= n; ++i) EXPECT_TRUE(files.count(ckpt::hf_shard_file_name(i, n))) << i;
  // The index's rules, from its text: every tensor mapped, total_size the tensors' bytes.
  auto index = ckpt::parse_hf_index(json::parse(files.at("model.safetensors.index.json")), "index");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->weight_map.size(), model::weight_table(c).size());
  EXPECT_EQ(*index->total_size, static_cast<uint64_t>(c.param_count()) * 4);
  for (int i = 1; i <= n; ++i) {
    auto r = ckpt::SafetensorsReader::open(dir.file("out/" + ckpt::hf_shard_file_name(i, n)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->metadata().at("format"), "pt");
    EXPECT_TRUE(r->tensors().size() == 1 || r->data_size() <= 6000) << "a shard stays within the limit";
  }
  for (const std::string& path : {dir.file("out"), dir.file("out/model.safetensors.index.json")}) {
    auto back = ckpt::read_hf_weights(path, c);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, w);
  }
  auto back = ckpt::read_hf_weights(dir.file("out"), c);
  ASSERT_TRUE(write(dir.file("again"), c, *back, 6000).ok());
  EXPECT_EQ(files_of(dir.file("again")), files) << "import → export reproduces the bytes";
  // One shard when it fits: model.safetensors and no index, as transformers writes it.
  ASSERT_TRUE(write(dir.file("one"), c, w, ckpt::kHfDefaultMaxShardBytes).ok());
  const auto one = files_of(dir.file("one"));
  EXPECT_EQ(one.size(), 2u);
  EXPECT_TRUE(one.count("model.safetensors"));
  EXPECT_EQ(*ckpt::read_hf_weights(dir.file("one"), c), w);
}

TEST(HfWeights, Bf16ExportRoundsOnceAndSurvivesItsOwnRoundTrip) {
  test::TempDir dir;
  const model::LlamaConfig c = small_model();
  const ckpt::NamedTensors w = random_weights(c, 2);
  ASSERT_TRUE(write(dir.file("a"), c, w, 8000, DType::kBF16).ok());
  ckpt::HfWeightsInfo info;
  auto back = ckpt::read_hf_weights(dir.file("a"), c, &info);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(info.dtypes.at("model.norm.weight"), DType::kBF16);
  EXPECT_EQ(info.tensor_bytes, static_cast<uint64_t>(c.param_count()) * 2);
  for (const auto& [name, v] : w)
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(back->at(name)[i], f32_from_bf16(bf16_from_f32(v[i]))) << name << " " << i;
  EXPECT_EQ(json::parse(*read_file(dir.file("a/config.json")))["torch_dtype"], "bfloat16");
  ASSERT_TRUE(write(dir.file("b"), c, *back, 8000, DType::kBF16).ok());
  EXPECT_EQ(files_of(dir.file("b")), files_of(dir.file("a")));
}

// A model directory written by hand with the given dtypes (F32, BF16, F16 mixed) as one file.
void write_mixed(const std::string& path, const model::LlamaConfig& c, const ckpt::NamedTensors& w,
                 std::vector<std::vector<uint16_t>>& keep) {
  ckpt::SafetensorsWriter writer;
  int i = 0;
  for (const model::WeightSpec& s : model::weight_table(c)) {
    const auto& v = w.at(s.name);
    const DType t = i % 3 == 0 ? DType::kF32 : i % 3 == 1 ? DType::kBF16 : DType::kF16;
    ++i;
    if (t == DType::kF32) {
      writer.add(s.name, t, s.shape, v.data());
      continue;
    }
    keep.emplace_back(v.size());
    float16_from_f32(keep.back().data(), v.data(), static_cast<int64_t>(v.size()), t);
    writer.add(s.name, t, s.shape, keep.back().data());
  }
  ASSERT_TRUE(writer.write(path).ok());
}

TEST(HfWeights, F16AndBf16AndF32SourcesWidenExactly) {
  test::TempDir dir;
  const model::LlamaConfig c = small_model();
  const ckpt::NamedTensors w = random_weights(c, 3);
  std::vector<std::vector<uint16_t>> keep;
  write_mixed(dir.file("m.safetensors"), c, w, keep);
  ckpt::HfWeightsInfo info;
  auto back = ckpt::read_hf_weights(dir.file("m.safetensors"), c, &info);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  for (const auto& [name, v] : w) {
    const DType t = info.dtypes.at(name);
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = t == DType::kF32    ? v[i]
                         : t == DType::kBF16 ? f32_from_bf16(bf16_from_f32(v[i]))
                                             : f32_from_f16(f16_from_f32(v[i]));
      ASSERT_EQ(back->at(name)[i], want) << name;
    }
  }
}

std::string read_error(const std::string& path, const model::LlamaConfig& c) {
  auto r = ckpt::read_hf_weights(path, c);
  EXPECT_FALSE(r.ok()) << path;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().exit_code(), 2) << r.status().to_string();
  return r.status().message();
}

TEST(HfWeights, ShapesThatDisagreeNameTheTensorAndBothShapes) {
  test::TempDir dir;
  model::LlamaConfig c = small_model();
  ASSERT_TRUE(write(dir.file("w"), c, random_weights(c, 4), 6000).ok());
  fs::remove(dir.file("w/config.json"));  // the shapes, not the config beside, must say it
  model::LlamaConfig other = c;
  other.ffn_dim = 48;
  const std::string e = read_error(dir.file("w"), other);
  EXPECT_NE(e.find("tensor 'model.layers.0.mlp.gate_proj.weight' has shape (40, 24) in 'model-0000"), std::string::npos)
      << e;
  EXPECT_NE(e.find("but the model needs (48, 24)"), std::string::npos) << e;
  EXPECT_NE(e.find("6 problems"), std::string::npos) << "gate, up and down of both layers: " << e;
  other = c;
  other.tie_embeddings = true;
  EXPECT_NE(read_error(dir.file("w"), other).find("extra tensor 'lm_head.weight' (61, 24)"), std::string::npos);
  other = c;
  other.n_layers = 3;
  EXPECT_NE(read_error(dir.file("w"), other).find("missing tensor 'model.layers.2.input_layernorm.weight' (24)"),
            std::string::npos);
}

TEST(HfWeights, ConfigBesideTheWeightsMustDescribeTheRunsModel) {
  test::TempDir dir;
  const model::LlamaConfig c = small_model();
  ASSERT_TRUE(write(dir.file("w"), c, random_weights(c, 5), 1 << 20).ok());
  model::LlamaConfig other = c;
  other.rope_theta = 10000.0;  // same shapes, other math
  const std::string e = read_error(dir.file("w/model.safetensors"), other);
  EXPECT_NE(e.find("config.json' says rope_theta = 500000.0 but this run's model has 10000.0"), std::string::npos) << e;
  // A wrong type in it is named, not a crash (num_key_value_heads defaults to it).
  json j = json::parse(*read_file(dir.file("w/config.json")));
  j["num_attention_heads"] = "6";
  j.erase("num_key_value_heads");
  ASSERT_TRUE(write_file(dir.file("w/config.json"), j.dump()).ok());
  EXPECT_NE(read_error(dir.file("w"), c).find("says num_attention_heads = \"6\" but this run's model has 6"),
            std::string::npos);
}

TEST(HfWeights, BrokenIndexOrShardsAreNamed) {
  test::TempDir dir;
  const model::LlamaConfig c = small_model();
  const std::string d = dir.file("w");
  ASSERT_TRUE(write(d, c, random_weights(c, 6), 6000).ok());
  const std::string index_path = d + "/model.safetensors.index.json";
  const std::string index_text = *read_file(index_path);
  const std::string shard2 = d + "/" + ckpt::hf_shard_file_name(2, static_cast<int>(files_of(d).size()) - 2);
  const std::string shard2_bytes = *read_file(shard2);
  auto restore = [&] {
    ASSERT_TRUE(write_file(index_path, index_text).ok());
    ASSERT_TRUE(write_file(shard2, shard2_bytes).ok());
  };
  // A shard the index names is missing.
  fs::remove(shard2);
  std::string e = read_error(d, c);
  EXPECT_NE(e.find("names shard '" + fs::path(shard2).filename().string() + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("which does not exist"), std::string::npos) << e;
  // A truncated shard.
  restore();
  ASSERT_TRUE(write_file(shard2, shard2_bytes.substr(0, shard2_bytes.size() - 1)).ok());
  e = read_error(d, c);
  EXPECT_NE(e.find(fs::path(shard2).filename().string()), std::string::npos) << e;
  // total_size that is not the tensors' bytes; a tensor mapped to the wrong shard.
  restore();
  json j = json::parse(index_text);
  j["metadata"]["total_size"] = j["metadata"]["total_size"].get<uint64_t>() + 4;
  ASSERT_TRUE(write_file(index_path, j.dump()).ok());
  EXPECT_NE(read_error(d, c).find("metadata.total_size is"), std::string::npos);
  j = json::parse(index_text);
  j["weight_map"]["model.norm.weight"] = "model-00001-of-" + fs::path(shard2).filename().string().substr(15);
  ASSERT_TRUE(write_file(index_path, j.dump()).ok());
  e = read_error(d, c);
  EXPECT_NE(e.find("tensor 'model.norm.weight', which the index maps to 'model-00001-of-"), std::string::npos) << e;
  // Malformed index JSON.
  ASSERT_TRUE(write_file(index_path, index_text.substr(0, index_text.size() / 2)).ok());
  EXPECT_NE(read_error(d, c).find("model.safetensors.index.json"), std::string::npos);
  // Both layouts in one directory.
  restore();
  ASSERT_TRUE(write_file(d + "/model.safetensors", shard2_bytes).ok());
  EXPECT_NE(read_error(d, c).find("ambiguous"), std::string::npos);
}

TEST(HfWeights, UnreadableDtypesAndNonFiniteValuesAreRefused) {
  test::TempDir dir;
  model::LlamaConfig c = small_model();
  c.n_layers = 1;
  ckpt::NamedTensors w = random_weights(c, 7);
  ckpt::SafetensorsWriter writer;
  std::vector<double> f64(static_cast<size_t>(c.dim), 1.0);
  for (const model::WeightSpec& s : model::weight_table(c))
    if (s.name == "model.norm.weight")
      writer.add(s.name, DType::kF64, s.shape, f64.data());
    else
      writer.add(s.name, DType::kF32, s.shape, w.at(s.name).data());
  ASSERT_TRUE(writer.write(dir.file("f64.safetensors")).ok());
  EXPECT_NE(read_error(dir.file("f64.safetensors"), c).find("'model.norm.weight' in 'f64.safetensors' is F64"),
            std::string::npos);
  w["model.norm.weight"][3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(write(dir.file("nan"), c, w, 1 << 20).ok()) << "an export that could never be loaded";
  EXPECT_FALSE(fs::exists(dir.file("nan"))) << "nothing written";
}

TEST(HfWeights, NeverReplacesAnOutputDirectoryUnasked) {
  test::TempDir dir;
  const model::LlamaConfig c = small_model();
  fs::create_directories(dir.file("out"));
  ASSERT_TRUE(write_file(dir.file("out/keep.txt"), "mine").ok());
  auto r = write(dir.file("out"), c, random_weights(c, 8), 6000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().exit_code(), 2);
  EXPECT_EQ(files_of(dir.file("out")).size(), 1u) << "untouched";
  // --overwrite replaces a previous export only (issue 31): a directory holding anything else is refused.
  r = write(dir.file("out"), c, random_weights(c, 8), 6000, DType::kF32, /*overwrite=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'keep.txt'"), std::string::npos) << r.status().message();
  EXPECT_TRUE(fs::exists(dir.file("out/keep.txt"))) << "nothing removed";
  fs::remove(dir.file("out/keep.txt"));
  ASSERT_TRUE(write(dir.file("out"), c, random_weights(c, 8), 6000).ok());
  ASSERT_TRUE(write(dir.file("out"), c, random_weights(c, 9), 6000, DType::kF32, /*overwrite=*/true).ok());
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "no temporary left";
  fs::create_directories(dir.file("empty"));
  EXPECT_TRUE(write(dir.file("empty"), c, random_weights(c, 8), 6000).ok()) << "an empty directory is used";
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
