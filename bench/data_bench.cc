// Data pipeline benchmarks (docs/performance.md): tokenizer encode throughput on the bundled corpus
// (MB/s, single core; target ≥ 5 MB/s) and the wall time of `data prepare` on the bundled corpus with
// vocab 2048 and 8192 (target < 60 s on the 2-core development machine). Not a test: nothing here
// asserts a time. Run: build/bench/data_bench [--benchmark_filter=Encode]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/file_io.h"
#include "core/log.h"
#include "data/bpe_train.h"
#include "data/prepare.h"
#include "data/sources.h"
#include "data/tokenizer.h"

namespace {
namespace fs = std::filesystem;
using namespace sp::data;

std::string source_dir() {
  if (const char* e = std::getenv("SP_SOURCE_DIR")) return e;
  return fs::path(__FILE__).parent_path().parent_path().string();
}

// Every bundled corpus file, concatenated (what encode throughput is measured on).
const std::string& corpus() {
  static const std::string text = [] {
    std::string all;
    auto src = load_sources(source_dir() + "/data/sources.json");
    if (!src.ok()) return all;
    for (const SourceSpec& s : src->sources) all += sp::read_file(s.resolved_path).value();
    return all;
  }();
  return text;
}

const Tokenizer& tokenizer(int64_t vocab) {
  static std::map<int64_t, Tokenizer> cache;
  auto it = cache.find(vocab);
  if (it == cache.end()) {
    BpeTrainer t;
    t.add_text(corpus());
    it = cache.emplace(vocab, t.train(vocab).value()).first;
  }
  return it->second;
}

void BM_TokenizerEncode(benchmark::State& state) {
  const Tokenizer& tok = tokenizer(state.range(0));
  const std::string& text = corpus();
  if (text.empty()) {
    state.SkipWithError("bundled corpus not found (set SP_SOURCE_DIR)");
    return;
  }
  int64_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text);
    tokens = static_cast<int64_t>(ids.size());
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}
BENCHMARK(BM_TokenizerEncode)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond);

void BM_BpeTrain(benchmark::State& state) {
  BpeTrainer t;
  t.add_text(corpus());
  for (auto _ : state) benchmark::DoNotOptimize(t.train(state.range(0)).ok());
}
BENCHMARK(BM_BpeTrain)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_Prepare(benchmark::State& state) {
  sp::set_log_level(sp::LogLevel::kWarn);
  PrepareOptions o;
  o.sources_file = source_dir() + "/data/sources.json";
  o.vocab_size = state.range(0);
  const std::string root = (fs::temp_directory_path() / ("sp-data-bench-" + std::to_string(::getpid()))).string();
  int run = 0;
  for (auto _ : state) {
    const std::string out = root + "/" + std::to_string(run++);
    auto r = prepare(o, out);
    if (!r.ok()) {
      state.SkipWithError(r.status().to_string().c_str());
      break;
    }
    state.counters["train_tokens"] = static_cast<double>(r->train_tokens);
  }
  fs::remove_all(root);
}
BENCHMARK(BM_Prepare)->Arg(2048)->Arg(8192)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
