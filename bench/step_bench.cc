// step_bench: tokens/s of one shardproof training step (the Engine at dp = tp = pp = 1, one micro-batch
// of the whole batch, AdamW, clipping) and the fp32 GEMM peak of the backend it runs (train.gemm32; "auto" is the
// host's pick, as shardproof's), single-threaded unless parallel.blas_threads says otherwise.
// Run by bench/train_vs_torch.py, which times PyTorch eager on the same shapes in the same run.
//   step_bench PRESET_TOML BATCH SEQ STEPS [--checksums] [--trace DIR] [--alternate] [--set KEY=VALUE ...]
// --set: a run-configuration override as `shardproof --set` takes it (train.precision=bf16,
// train.grad_dtype=bf16; the value is read as JSON, else as a string).
// Prints one JSON line: {"tokens_per_s", "step_s", "cpu_s", "flops_per_token", "gflops", "sgemm_gflops",
// "bf16_gemm_gflops" (the 16-bit GEMM backend's peak on the same 1024³ product), "fp32_fma_peak_gflops" and
// "bf16_dot_peak_gflops" (the core's arithmetic peaks, bench/isa_peak.h), "split_s" (the median step's time by
// kind, core/time_split.h: where the time goes at this shape),
// "blas_core", ...}: cpu_s is the median thread-CPU time of a step (what a loaded host does not inflate);
// the OpenBLAS core is chosen as `shardproof` chooses it (cli/blas_select.h; OPENBLAS_CORETYPE overrides).
// --alternate: the checksums (both digest lanes, the parameter statistics) on in every other step of the
// same process, so that a busy host disturbs both halves alike; adds the medians of the wall and thread-CPU
// time of the steps with and without them and the median over adjacent pairs of on / off − 1.
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "cli/blas_select.h"
#include "cli/run_setup.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "core/timer.h"
#include "isa_peak.h"
#include "kernels/blas_core.h"
#include "kernels/gemm16.h"
#include "kernels/gemm32_auto.h"
#include "kernels/matmul.h"
#include "parallel/engine.h"
#include "planner/flops.h"

using namespace sp;

// The fp32 GEMM peak of the backend the engine runs (kernels::gemm after the Engine set train.gemm32).
static double sgemm_peak() {
  const int n = 1024;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    Stopwatch w;
    kernels::gemm(c.data(), a.data(), b.data(), n, n, n, false, true, n, n, n, 1.0f, 0.0f);
    best = std::max(best, 2.0 * n * n * n / w.seconds() * 1e-9);
  }
  return best;
}

// The 16-bit GEMM peak of the backend the engine uses for bf16 (kernels::make_gemm16, "auto"), on the same
// 1024³ product as sgemm_peak; 0 where no bf16 backend can be made.
static double bf16_gemm_peak() {
  auto g = kernels::make_gemm16(kernels::Gemm16Kind::kAuto, DType::kBF16);
  if (!g.ok()) return 0.0;
  const int n = 1024;
  std::vector<uint16_t> a(n * n, 0x3f80), b(n * n, 0x3f00);  // bf16 1.0 and 0.5
  std::vector<float> c(n * n), ws(static_cast<size_t>((*g)->workspace_floats(n, n, n)));
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    Stopwatch w;
    (*g)->gemm(c.data(), a.data(), b.data(), n, n, n, false, true, n, n, n, 1.0f, 0.0f,
               ws.empty() ? nullptr : ws.data());
    best = std::max(best, 2.0 * n * n * n / w.seconds() * 1e-9);
  }
  return best;
}

static double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

static double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --set KEY=VALUE into the configuration's JSON: KEY is a dotted path, VALUE JSON or else a string.
static bool set_override(nlohmann::json& j, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  nlohmann::json* node = &j;
  std::string key = kv.substr(0, eq);
  for (size_t dot; (dot = key.find('.')) != std::string::npos; key = key.substr(dot + 1))
    node = &(*node)[key.substr(0, dot)];
  const std::string value = kv.substr(eq + 1);
  nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
  (*node)[key] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
  return true;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: step_bench PRESET_TOML BATCH SEQ STEPS [--checksums] [--trace DIR] [--alternate] "
                 "[--set KEY=VALUE ...]\n");
    return 2;
  }
  cli::select_blas_core(argv);  // before MPI and before any BLAS call, as in shardproof's main()
  kernels::set_gemm32_cache_file(cli::user_cache_dir() + "/gemm32.json");  // "auto": the host's pick, as shardproof's
  openblas_set_num_threads(1);
  comm::MpiScope mpi(&argc, &argv);
  auto j = config::read_toml(argv[1]);
  if (!j.ok()) return std::fprintf(stderr, "%s\n", j.status().to_string().c_str()), 1;
  const int64_t B = std::atoll(argv[2]), T = std::atoll(argv[3]), steps = std::atoll(argv[4]);
  bool checksums = false, alternate = false;
  std::string trace_dir;
  for (int i = 5; i < argc; ++i) {
    if (std::string(argv[i]) == "--checksums") checksums = true;
    if (std::string(argv[i]) == "--alternate") alternate = true;
    if (std::string(argv[i]) == "--trace" && i + 1 < argc) trace_dir = argv[++i];
    if (std::string(argv[i]) == "--set" && i + 1 < argc && !set_override(*j, argv[++i]))
      return std::fprintf(stderr, "step_bench: --set %s: expected KEY=VALUE\n", argv[i]), 2;
  }
  (*j)["train"]["micro_batch_size"] = B;
  (*j)["train"]["global_batch"] = B;
  (*j)["train"]["seq_len"] = T;
  (*j)["train"]["steps"] = steps + 2;
  (*j)["train"]["eval_batches"] = 0;
  auto rc = config::RunConfig::from_json(*j);
  if (!rc.ok()) return std::fprintf(stderr, "%s\n", rc.status().to_string().c_str()), 1;
  auto plan = plan::RunPlan::make(*rc, 1);
  if (!plan.ok()) return std::fprintf(stderr, "%s\n", plan.status().to_string().c_str()), 1;
  auto grid = comm::ProcessGrid::create(1, 1, 1, "tp-dp-pp", 1);
  comm::GridCommunicators comms = comm::make_grid_communicators(*grid);
  comm::TraceContext trace;
  std::unique_ptr<comm::TraceWriter> writer;
  if (!trace_dir.empty()) {
    writer = std::move(comm::TraceWriter::open(trace_dir, 0)).value();
    for (auto* c : {&comms.world, &comms.dp, &comms.tp, &comms.pp})
      *c = std::make_unique<comm::TracedCommunicator>(std::move(*c), trace, writer.get(), nullptr);
  }
  MemoryLedger ledger;
  parallel::Engine engine(*plan, *grid, comms, trace, ledger, nullptr, nullptr, nullptr);  // sets train.gemm32
  const double peak = sgemm_peak();
  const double peak16 = bf16_gemm_peak();
  engine.initialize();
  const int64_t V = rc->model.vocab_size;
  engine.set_batch_source([&](int64_t s, int64_t mb, int32_t* tok) {
    std::mt19937 rng(static_cast<uint32_t>(s * 131 + mb));
    for (int64_t i = 0; i < B * (T + 1); ++i) tok[i] = static_cast<int32_t>(rng() % V);
  });
  engine.step(0, checksums || alternate);  // warm-up (first-touch of every buffer)
  std::vector<double> times, cpus, wall[2], cpu[2], pair_wall, pair_cpu;
  std::vector<std::pair<double, TimeSplit>> splits;  // (step s, its split), for the median step's split
  for (int64_t s = 1; s <= steps; ++s) {
    const bool on = alternate ? s % 2 == 1 : checksums;
    Stopwatch w;
    const double c0 = thread_cpu_seconds();
    const parallel::StepResult r = engine.step(s, on);
    times.push_back(w.seconds());
    splits.emplace_back(times.back(), r.time_split);
    wall[on].push_back(times.back());
    cpu[on].push_back(thread_cpu_seconds() - c0);
    cpus.push_back(cpu[on].back());
    if (alternate && !on) {  // (on, off) pairs of adjacent steps
      pair_wall.push_back(wall[1].back() / wall[0].back() - 1);
      pair_cpu.push_back(cpu[1].back() / cpu[0].back() - 1);
    }
  }
  const double median = median_of(times);
  if (alternate)
    std::printf(
        "{\"checksums_on_step_s\": %.5f, \"checksums_off_step_s\": %.5f, \"checksums_on_cpu_s\": %.5f, "
        "\"checksums_off_cpu_s\": %.5f, \"paired_wall\": %.4f, \"paired_cpu\": %.4f, \"pairs\": %zu}\n",
        median_of(wall[1]), median_of(wall[0]), median_of(cpu[1]), median_of(cpu[0]), median_of(pair_wall),
        median_of(pair_cpu), pair_wall.size());
  // Model FLOPs per token: the planner's one formula (planner/flops.h: forward + backward of every product, the
  // attention core over the full T × T as Megatron and PaLM count it), so that this MFU and the plan's agree.
  const model::LlamaConfig& m = rc->model;
  const planner::ModelShape shape = planner::ModelShape::from_llama(m, "bench", argv[1]);
  const double flops_per_token =
      planner::step_flops(shape, B, T, model::Recompute::kNone).model / static_cast<double>(B * T);
  const double tps = static_cast<double>(B * T) / median;
  // The median step's split by kind, seconds; "other" is the rest of that step's wall time.
  std::sort(splits.begin(), splits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto& [mid_s, mid] = splits[splits.size() / 2];
  nlohmann::json split;
  for (size_t k = 0; k < kTimeKinds; ++k) split[std::string(kTimeKindNames[k])] = 1e-9 * static_cast<double>(mid.ns[k]);
  split[std::string(kOtherTime)] = mid_s - 1e-9 * static_cast<double>(mid.sum());
  std::printf(
      "{\"tokens_per_s\": %.2f, \"step_s\": %.5f, \"cpu_s\": %.5f, \"flops_per_token\": %.0f, \"gflops\": %.2f, "
      "\"sgemm_gflops\": %.2f, \"bf16_gemm_gflops\": %.2f, \"params\": %lld, \"blas_core\": \"%s\", \"onednn_isa\": "
      "\"%s\", \"gemm32\": \"%s\", \"threads\": %d, \"fp32_fma_peak_gflops\": %.2f, \"bf16_dot_peak_gflops\": %.2f, "
      "\"split_s\": %s}\n",
      tps, median, median_of(cpus), flops_per_token, tps * flops_per_token * 1e-9, peak, peak16,
      static_cast<long long>(m.param_count()), kernels::blas_core().c_str(),
      kernels::gemm16_capability().onednn_isa.c_str(), kernels::gemm32_backend_name(kernels::current_gemm32()).c_str(),
      kernels::blas_threads(), bench::fp32_fma_peak_gflops(), bench::bf16_dot_peak_gflops(), split.dump().c_str());
  return 0;
}
