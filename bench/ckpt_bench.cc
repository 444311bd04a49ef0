// Checkpoint save and load throughput (MB/s) for the state of the `small` preset (34 M parameters,
// parameters + both AdamW moments, 408 MB) against raw sequential write(2)+fsync and read(2) of the
// same number of bytes on the same disk, in the same process (docs/performance.md, issue 6: target
// ≥ 50 % of raw). One rank; the save is the full protocol (shard built and SHA-256'd from memory,
// written, fsynced, manifest, rename, LATEST, retention); the load is what a resume does (every
// shard's size and SHA-256 verified, metadata validated, every element assembled by pread).
// Reads are measured warm (page cache) and cold (posix_fadvise DONTNEED on every file first, which
// drops their clean pages: a resume in a new process on a busy machine).
// Directory: $SP_BENCH_DIR, else the system temp directory (say which disk in the report).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt_test_util.h"  // tests/support, on the benches' include path
#include "config/run_config.h"
#include "core/threads.h"

namespace {
using namespace sp;
using namespace sp::ckpt;

struct Fixture {
  model::LlamaConfig config;
  std::vector<test::SimRank> ranks;
  uint64_t bytes = 0;
  std::string dir;
  int64_t next_step = 1;

  Fixture() {
    const char* root = std::getenv("SP_SOURCE_DIR");
    auto preset = config::read_preset(std::string(root ? root : SP_SOURCE_DIR) + "/configs", "small");
    SP_CHECK(preset.ok(), "{}", preset.status().message());
    auto rc = config::RunConfig::from_json(*preset);
    SP_CHECK(rc.ok(), "{}", rc.status().message());
    config = rc->model;
    ranks = test::simulate(config, {1, 1, 1, 0, "tp-dp-pp"}, false);
    uint64_t x = 88172645463325252ull;
    for (auto& b : ranks[0].buffers) {
      for (float& v : b) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v = static_cast<float>(static_cast<int64_t>(x % 2000001) - 1000000) * 1e-6f;
      }
      bytes += 4 * b.size();
    }
    const char* env = std::getenv("SP_BENCH_DIR");
    dir = (std::filesystem::path(env ? env : std::filesystem::temp_directory_path().string()) /
           ("sp_ckpt_bench_" + std::to_string(::getpid())))
              .string();
    std::filesystem::create_directories(dir);
  }
  ~Fixture() { std::filesystem::remove_all(dir); }

  SaveRequest request(int64_t step) const {
    SaveRequest r;
    r.run_dir = dir;
    r.step = step;
    r.coords = "dp0.tp0.pp0";
    r.spans = ranks[0].spans;
    r.manifest.contract = {{"config", {{"model", config.to_json()}}}};
    r.manifest.contract["hash"] = sha256_hex(r.manifest.contract.dump());
    r.manifest.contract_hash = r.manifest.contract["hash"];
    r.manifest.loader_cursor = nlohmann::json::object();
    r.rank_coords = {"dp0.tp0.pp0"};
    r.keep_last = 1;
    return r;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// Drops the page-cache pages of every regular file under `dir` (they are clean: written with fsync).
void drop_cache(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

void set_rate(benchmark::State& state, uint64_t bytes) {
  state.counters["MB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
}

void BM_RawWrite(benchmark::State& state) {
  Fixture& f = fixture();
  const std::string path = f.dir + "/raw.bin";
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    for (const auto& b : f.ranks[0].buffers) {
      const char* p = reinterpret_cast<const char*>(b.data());
      size_t left = 4 * b.size();
      while (left > 0) {
        const ssize_t n = ::write(fd, p, left);
        SP_CHECK(n > 0, "write failed");
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
    SP_CHECK(::fsync(fd) == 0 && ::close(fd) == 0, "fsync failed");
  }
  set_rate(state, f.bytes);
}

void BM_RawRead(benchmark::State& state) {
  Fixture& f = fixture();
  const std::string path = f.dir + "/raw.bin";
  std::vector<char> buf(8 << 20);
  const bool cold = state.range(0) != 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      drop_cache(f.dir);
      state.ResumeTiming();
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    uint64_t total = 0;
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += static_cast<uint64_t>(n);
    ::close(fd);
    SP_CHECK(total == f.bytes, "raw file is {} bytes, expected {}", total, f.bytes);
  }
  set_rate(state, f.bytes);
  state.SetLabel(cold ? "cold" : "warm");
}

// The same bytes read into one buffer the size of the state (allocated and touched before timing,
// as a rank's state is): what any loader must at least do, since a load deposits every byte in the
// rank's memory, where BM_RawRead streams through a recycled 8 MiB buffer that stays in cache.
void BM_RawReadIntoState(benchmark::State& state) {
  Fixture& f = fixture();
  const std::string path = f.dir + "/raw.bin";
  std::vector<char> dst(f.bytes, 1);
  for (auto _ : state) {
    state.PauseTiming();
    drop_cache(f.dir);
    state.ResumeTiming();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    uint64_t total = 0;
    for (ssize_t n;
         total < f.bytes && (n = ::read(fd, dst.data() + total, std::min<uint64_t>(f.bytes - total, 8 << 20))) > 0;)
      total += static_cast<uint64_t>(n);
    ::close(fd);
    SP_CHECK(total == f.bytes, "raw file is {} bytes, expected {}", total, f.bytes);
  }
  set_rate(state, f.bytes);
  state.SetLabel("cold, into a state-sized buffer");
}

void BM_CheckpointSave(benchmark::State& state) {
  Fixture& f = fixture();
  test::LocalCommunicator world;
  for (auto _ : state) {
    auto out = save_checkpoint(world, f.request(f.next_step++));
    SP_CHECK(out.ok(), "{}", out.status().message());
  }
  set_rate(state, f.bytes);
}

// What a resume does on one rank: verify every shard (size, SHA-256), open, assemble everything.
void BM_CheckpointLoad(benchmark::State& state) {
  Fixture& f = fixture();
  const CheckpointPaths paths(f.dir);
  const int64_t step = read_latest(paths).value().step;
  std::vector<test::SimRank> target =
      test::simulate(f.config, {1, static_cast<int>(state.range(0)), 1, 0, "tp-dp-pp"}, false);
  const bool cold = state.range(1) != 0;
  uint64_t bytes = 0;
  for (const auto& b : target[0].buffers) bytes += 4 * b.size();
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      drop_cache(f.dir);
      state.ResumeTiming();
    }
    auto m = read_manifest(paths, step);
    SP_CHECK(m.ok() && verify_shard_files(paths.step_dir(step), *m).ok(), "verify");
    auto source = CheckpointSource::open(paths.step_dir(step), *m, f.config);
    SP_CHECK(source.ok(), "{}", source.status().message());
    const Status st = source->fill(target[0].spans, 0);
    SP_CHECK(st.ok(), "{}", st.message());
  }
  set_rate(state, bytes);
  state.SetLabel(std::string(cold ? "cold, " : "warm, ") +
                 (state.range(0) == 1 ? "same topology" : "resharded to tp rank 0 of tp 2"));
}

// The verification part of a load alone: the manifest and every shard's size and chunk SHA-256s.
void BM_CheckpointVerify(benchmark::State& state) {
  Fixture& f = fixture();
  const CheckpointPaths paths(f.dir);
  const int64_t step = read_latest(paths).value().step;
  for (auto _ : state) {
    state.PauseTiming();
    drop_cache(f.dir);
    state.ResumeTiming();
    auto m = read_manifest(paths, step);
    SP_CHECK(m.ok() && verify_shard_files(paths.step_dir(step), *m).ok(), "verify");
  }
  set_rate(state, f.bytes);
  state.SetLabel(fmt::format("cold, {} hashing threads", usable_cpus()));
}

BENCHMARK(BM_RawWrite)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_CheckpointSave)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_RawRead)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_RawReadIntoState)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_CheckpointLoad)
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK(BM_CheckpointVerify)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
