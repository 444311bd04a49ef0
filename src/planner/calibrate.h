// Calibration of this machine as a cluster: sgemm FLOP/s per rank with the engine's own matmul
// (kernels/matmul.h, OpenBLAS, one thread per rank, every rank at once as in training) and the MPI
// latency and bandwidth between two ranks through the engine's Communicator (comm/), fitted to the α–β
// model the planner prices collectives with (planner/collective_time.h). It is not a benchmark suite: a few
// seconds, minimum times, one fit; `shardproof plan calibrate` writes the result as a cluster file.
// Fit: bandwidth B = the least-squares slope of one-way time against bytes over messages ≥ 64 KiB;
// latency α = the smallest message's one-way time minus its bytes / B (at least 0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "planner/calibrate_kernels.h"
#include "planner/cluster.h"

namespace sp::planner {

struct GemmMeasurement {
  int64_t n = 0;      // C (n, n) = A (n, n) · B (n, n), fp32
  double gflops = 0;  // best repetition: 2n³ / seconds / 1e9
  int repetitions = 0;
};
// On this thread, repeated until `min_seconds` have passed (at least 3 times).
GemmMeasurement measure_sgemm(int64_t n, double min_seconds);

struct TransferSample {
  int64_t bytes = 0;
  double one_way_seconds = 0;  // half the best round trip
};
// Ping-pong between world ranks 0 and 1 (blocking send/recv of `bytes` each way, `repetitions` round
// trips per size after one warm-up, ten times as many for messages ≤ 64 KiB: they measure latency, and
// on a busy machine the minimum needs many tries); collective over `world`, which needs ≥ 2 ranks
// (SP_CHECK); ranks other than 0 and 1 wait. Every rank returns the same samples.
std::vector<TransferSample> measure_ping_pong(comm::Communicator& world, const std::vector<int64_t>& sizes,
                                              int repetitions);
// Exchange between world ranks 0 and 1: both send `bytes` to the other and receive as much at once (isend +
// irecv), as every step of a ring or pairwise collective does; one_way_seconds = the best time for both
// transfers to complete. On shared memory a core copies its own send and its own receive, so a direction
// runs at about half the ping-pong's rate when both run (the AMD EPYC: 2.9–4.3 against 4.3–5.1 GB/s under
// load); the collectives are priced with this bandwidth (docs/plan.md §9).
std::vector<TransferSample> measure_exchange(comm::Communicator& world, const std::vector<int64_t>& sizes,
                                             int repetitions);

struct AlphaBeta {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
};
// kInvalidArgument when fewer than two samples are ≥ 64 KiB or the slope is not positive.
Result<AlphaBeta> fit_alpha_beta(const std::vector<TransferSample>& samples);

struct CalibrationOptions {
  int64_t gemm_n = 1024;
  double gemm_seconds = 0.5;
  // Up to 64 MiB: a transfer of several milliseconds even at 10 GB/s, so that scheduling noise of a busy
  // machine (milliseconds when ranks share cores) cannot hide the bandwidth term.
  std::vector<int64_t> sizes = {8, 1024, 65536, 1048576, 16777216, 67108864};
  int repetitions = 20;
  // The time model's compute rates (calibrate_kernels.h); `measure_kernels` false skips them (the file then
  // has only the sgemm peak, and plans price GEMMs at the stated efficiency).
  bool measure_kernels = true;
  KernelCalibrationOptions kernels;
};

struct Calibration {
  int ranks = 0;
  std::string host;
  std::string cpu_model;
  double host_memory_bytes = 0;
  double load_average = 0;  // 1-minute load average when the measurement started (/proc/loadavg)
  int cores = 0;            // online CPUs
  int64_t gemm_n = 0;
  std::vector<double> gflops_per_rank;           // by world rank, measured concurrently
  std::vector<TransferSample> samples;           // ping-pong
  AlphaBeta link;                                // its fit: the latency α
  std::vector<TransferSample> exchange_samples;  // exchange
  AlphaBeta exchange;                            // its fit: the bandwidth B of the collectives
  bool kernels_measured = false;
  KernelCalibration kernels;  // every figure the mean over the ranks
};
// Collective over `world` (≥ 2 ranks); every rank returns the same result.
Result<Calibration> calibrate_this_host(comm::Communicator& world, const std::string& host,
                                        const CalibrationOptions& options);

// The cluster file for `c`: one node of c.ranks "devices" (CPU cores running one rank each), device
// memory = host memory / ranks, intra-node link "shm" with the ping-pong's α and the exchange's B (what a
// collective's steps see), no inter-node network; with
// the kernels measured, peak_tflops per dtype = the largest GEMM rate measured for it and [device.measured] =
// the rates (efficiency = rate / that peak), else fp32 peak = the mean sgemm rate per rank at gemm_n.
// `when` is the date written into the sources.
ClusterSpec this_host_cluster(const Calibration& c, const std::string& when);
// Comment lines for the cluster file: every measured number behind the fit.
std::vector<std::string> calibration_comment(const Calibration& c, const std::string& when);

}  // namespace sp::planner
