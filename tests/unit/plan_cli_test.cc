// `shardproof plan` through the real CLI11 wiring (register_plan), as main.cc runs it: the cluster and
// model loading with its errors (exit 2 for a bad or unknown cluster, an unknown or refused model, an
// impossible placement), the per-axis links of a strategy (text and JSON), and `plan list`.
// `plan calibrate` needs mpirun and is tested end to end in tests/mpi (mpi.plan_calibrate_cli).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::cli {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

using sp::test::source_dir;

struct Ran {
  int code = 0;
  std::string out, err;
};

// `plan ...` through its real CLI wiring (tests/support/cli_run.h), with its stdout.
Ran run(const std::string& line) {
  Ran r;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  r.code = sp::test::run_command(register_plan, line + " --root " + source_dir());
  std::fflush(stdout);
  std::fflush(stderr);
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

TEST(PlanCli, LinksOfAStrategy) {
  Ran r = run("plan --cluster dgx-a100 --nodes 2 --model llama-7b --dp 2 --tp 8");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cluster dgx-a100: 2 nodes × 8 A100-SXM4-80GB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model llama-7b (llama): 6.738 billion parameters"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("intra-node nvswitch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inter-node infiniband"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("assumptions:"), std::string::npos) << r.out;

  r = run("plan --cluster dgx-a100 --nodes 2 --model llama-7b --dp 2 --tp 8 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["links"]["tp"]["bandwidth_gbytes_per_s"], 300.0);
  EXPECT_EQ(j["links"]["dp"]["bandwidth_gbytes_per_s"], 25.0);
  EXPECT_EQ(j["links"]["pp"]["group_size"], 1);
  EXPECT_EQ(j["model"]["params"], 6738415616);
  EXPECT_EQ(j["cluster"]["devices"], 16);
}

TEST(PlanCli, ModelsFromPresetsRunConfigsAndHuggingFace) {
  EXPECT_EQ(run("plan --cluster dgx-a100 --model tiny").code, 0);         // configs/tiny.toml
  EXPECT_EQ(run("plan --cluster dgx-a100 --model megatron-1t").code, 0);  // named GPT shape
  EXPECT_EQ(run("plan --cluster dgx-a100 --model " + source_dir() + "/configs/small.toml").code, 0);
  const sp::test::TempDir scratch;
  const fs::path dir = scratch.path();
  std::ofstream(dir / "config.json") << R"({"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
    "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048,
    "model_type": "llama", "hidden_act": "silu", "rope_scaling": null})";
  Ran r = run("plan --cluster dgx-a100 --model " + (dir / "config.json").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1.1"), std::string::npos) << r.out;  // TinyLlama-1.1B's shape
  std::ofstream(dir / "scaled.json") << R"({"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
    "num_attention_heads": 32, "vocab_size": 32000, "max_position_embeddings": 2048,
    "rope_scaling": {"type": "linear", "factor": 2.0}})";
  EXPECT_EQ(run("plan --cluster dgx-a100 --model " + (dir / "scaled.json").string()).code, 2);
}

TEST(PlanCli, EvaluatesOneConfigurationAndSearches) {
  Ran r =
      run("plan --cluster dgx-a100 --nodes 2 --model llama-7b --global-batch 64 --seq-len 2048 --dp 2 --tp 8 "
          "--dtype tf32 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "plan");
  EXPECT_TRUE(j["memory"]["fits"].get<bool>());
  EXPECT_EQ(j["memory"]["ranks"].size(), 16u);
  EXPECT_GT(j["step"]["seconds"].get<double>(), 0);
  EXPECT_GT(j["step"]["mfu"].get<double>(), 0);
  EXPECT_LE(j["step"]["mfu"].get<double>(), 0.5);
  EXPECT_EQ(j["step"]["dominant_comm"], "tp forward on intra-node nvswitch");
  r = run("plan --cluster dgx-a100 --nodes 2 --model llama-7b --global-batch 64 --dp 2 --tp 8");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("MFU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("assumptions:"), std::string::npos) << r.out;

  r = run("plan --cluster dgx-a100 --model llama-7b --global-batch 16 --search --json");
  ASSERT_EQ(r.code, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["enumerated"].get<int64_t>(), 0);
  ASSERT_FALSE(j["ranked"].empty());
  EXPECT_EQ(j["enumerated"].get<size_t>(), j["ranked"].size() + j["excluded"].size());
  for (size_t i = 1; i < j["ranked"].size(); ++i)
    EXPECT_LE(j["ranked"][i - 1]["time"]["step_seconds"].get<double>(),
              j["ranked"][i]["time"]["step_seconds"].get<double>());
  // The engine's own refusal: selective recompute does not exist in the engine.
  bool selective = false;
  for (const auto& x : j["excluded"])
    for (const auto& w : x["reasons"]) selective |= w["rule"].get<std::string>().starts_with("selective recompute");
  EXPECT_FALSE(selective);         // the CLI searches none and full only
  bool sequence_parallel = false;  // and every tp > 1 strategy also with sequence parallelism
  for (const auto& x : j["ranked"]) sequence_parallel |= x["strategy"]["sequence_parallel"].get<bool>();
  EXPECT_TRUE(sequence_parallel);

  EXPECT_EQ(run("plan --cluster dgx-a100 --model llama-7b --global-batch 16 --dp 8 --efficiency 2").code, 2);
  EXPECT_EQ(run("plan --cluster dgx-a100 --model llama-7b --global-batch 16 --dp 8 --dtype int4").code, 2);
  // A GPT shape is planned as its engine counterpart, and says so; its fp16 GEMMs run at the fp16 peak.
  r = run("plan --cluster dgx-a100 --model megatron-1.7b --global-batch 16 --dp 8 --precision fp16 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["model_note"].get<std::string>().find("engine counterpart"), std::string::npos);
  EXPECT_EQ(j["inputs"]["dtype"], "fp16");
  r = run("plan --cluster dgx-a100 --model megatron-1.7b --global-batch 16 --dp 4 --pp 2 --precision fp16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("embeddings untied (pp > 1"), std::string::npos) << r.out;
  EXPECT_EQ(run("plan --cluster dgx-a100 --model megatron-1.7b --global-batch 16 --dp 8 --precision fp8").code, 2);
  EXPECT_EQ(run("plan --cluster dgx-a100 --model llama-7b --global-batch 12 --dp 8").code, 2);  // 12 % 8
  EXPECT_EQ(run("plan --cluster dgx-a100 --model llama-7b --search").code, 2);                  // no batch
}

TEST(PlanCli, BadInputIsExitTwo) {
  EXPECT_EQ(run("plan --cluster dgx-a100").code, 2);                                 // no --model
  EXPECT_EQ(run("plan --cluster nowhere --model llama-7b").code, 2);                 // unknown preset
  EXPECT_EQ(run("plan --cluster /nonexistent/c.toml --model llama-7b").code, 2);     // missing file
  EXPECT_EQ(run("plan --cluster dgx-a100 --model llama-70b").code, 2);               // unknown model
  EXPECT_EQ(run("plan --cluster dgx-a100 --model llama-7b --dp 3 --tp 8").code, 2);  // impossible placement
  EXPECT_EQ(run("plan --cluster dgx-a100 --nodes 0 --model llama-7b").code, 2);      // CLI11 range check
  const sp::test::TempDir scratch;
  const fs::path bad = scratch.file("bad.toml");
  std::ofstream(bad) << "name = \"x\"\n[nodes]\ncount = -1\n";
  EXPECT_EQ(run("plan --cluster " + bad.string() + " --model llama-7b").code, 2);
}

// Issue 31 items 9 and 12: a plan may use fewer devices than the cluster has (a one-rank run on a two-device
// host); --nodes 0 names its range in a few digits; --nodes beyond the bound and a cluster of 1e30 GiB per
// device are refused by name, never planned with a wrapped (negative) device memory.
TEST(PlanCli, FewerDevicesAndBoundedClusters) {
  const fs::path dir = fs::temp_directory_path() / ("sp-plan-31-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string two =
      "name = \"two-cores\"\ndescription = \"d\"\nsources = [\"s\"]\n[nodes]\ncount = 1\n"
      "devices_per_node = 2\n[device]\nmodel = \"core\"\nmemory_gib = MEM\n"
      "[device.peak_tflops]\nfp32 = 0.1\n[intra_node]\nkind = \"shm\"\n"
      "bandwidth_gbytes_per_s = 5\nlatency_us = 0.5\n[placement]\naxis_order = \"tp-dp-pp\"\n";
  auto write = [&](const std::string& name, const std::string& mem) {
    std::string t = two;
    t.replace(t.find("MEM"), 3, mem);
    std::ofstream(dir / name) << t;
    return (dir / name).string();
  };
  const std::string host = write("host.toml", "8");
  Ran r = run("plan --cluster " + host + " --model tiny --global-batch 8 --dp 1 --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["placement"]["grid"].get<std::string>().find("= 1"), std::string::npos) << r.out;
  EXPECT_GT(j["step"]["seconds"].get<double>(), 0.0) << r.out;
  r = run("plan --cluster " + host + " --model tiny --global-batch 8 --dp 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("impossible placement"), std::string::npos) << r.err;

  r = run("plan --cluster " + write("huge.toml", "1e30") + " --model tiny --global-batch 8 --dp 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("device.memory_gib = 1e+30 must be <= 1048576"), std::string::npos) << r.err;

  r = run("plan --cluster dgx-a100 --nodes 0 --model llama-7b");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--nodes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1048576"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 400u) << r.err;  // no 300-digit range
  r = run("plan --cluster dgx-a100 --nodes 1048576 --model llama-7b --global-batch 1024 --search");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--nodes 1048576 must be in [1, 131072]"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(PlanCli, ListNamesPresetsAndShapes) {
  Ran r = run("plan list");
  ASSERT_EQ(r.code, 0);
  for (const char* s : {"dgx-a100", "dgx-h100", "pcie-a100x8", "llama-65b", "gpt3-175b", "megatron-145.6b"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::cli
