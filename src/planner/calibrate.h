// Calibration of this machine (or of the hosts of a hostfile) as a cluster: sgemm FLOP/s per rank with the
// engine's own matmul (kernels/matmul.h, OpenBLAS, one thread per rank, every rank at once as in training) and
// the MPI latency and bandwidth between two ranks of one host — and, across hosts, between two hosts — through
// the engine's Communicator (comm/), fitted to the α–β model the planner prices collectives with
// (planner/collective_time.h). Not a benchmark suite: seconds, minimum times, one fit per link.
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
// Which two world ranks a transfer measurement runs between, and how long it may take. Per size: one warm-up,
// then `repetitions` timed tries (ten times as many for messages ≤ 64 KiB: they measure latency, and on a busy
// machine the minimum needs many tries), fewer (at least 3) where the warm-up says they would take more than
// `seconds_per_size`; a size whose warm-up took more than `max_transfer_seconds` is not measured (a shaped
// network at a few hundred Mbit/s moves 64 MiB in seconds). On shared memory nothing is cut.
struct TransferOptions {
  int a = 0, b = 1;
  int repetitions = 20;
  double seconds_per_size = 1.0;
  double max_transfer_seconds = 0.5;
};
// Ping-pong between world ranks a and b (blocking send/recv of `bytes` each way); collective over `world`,
// which needs ≥ 2 ranks and a ≠ b (SP_CHECK); the other ranks wait. Every rank returns the same samples.
std::vector<TransferSample> measure_ping_pong(comm::Communicator& world, const std::vector<int64_t>& sizes,
                                              const TransferOptions& o);
// Exchange between world ranks a and b: both send `bytes` to the other and receive as much at once (isend +
// irecv), as every step of a ring or pairwise collective does; one_way_seconds = the best time for both
// transfers to complete. On shared memory a core copies its own send and its own receive, so a direction
// runs at about half the ping-pong's rate when both run (the AMD EPYC: 2.9–4.3 against 4.3–5.1 GB/s under
// load); the collectives are priced with this bandwidth (docs/plan.md §9).
std::vector<TransferSample> measure_exchange(comm::Communicator& world, const std::vector<int64_t>& sizes,
                                             const TransferOptions& o);

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
  std::string host;                // world rank 0's
  std::vector<std::string> hosts;  // distinct, in rank order (calibrate_hosts.h): the cluster's nodes
  int ranks_per_host = 0;          // the cluster's devices_per_node
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
  // Between the first two hosts (hosts.size() > 1): the same two measurements, world rank 0 and the second
  // host's first rank; empty on one host.
  std::vector<TransferSample> inter_samples, inter_exchange_samples;
  AlphaBeta inter_link, inter_exchange;
  bool kernels_measured = false;
  KernelCalibration kernels;  // every figure the mean over the ranks
};
// Collective over `world` (≥ 2 ranks); `host` is this rank's host name; every rank returns the same result.
// Ranks on several hosts (a hostfile) must be placed by slot in equal blocks (calibrate_hosts.h).
Result<Calibration> calibrate_this_host(comm::Communicator& world, const std::string& host,
                                        const CalibrationOptions& options);

// The cluster file for `c`: one node per host of c.ranks_per_host "devices" (CPU cores running one rank each),
// device memory = host memory / ranks per host, intra-node link "shm" with the ping-pong's α and the
// exchange's B (what a collective's steps see); across hosts an "ethernet" network of one NIC per node with
// the inter-host ping-pong's α and exchange's B (TCP between hosts), none on one host; with
// the kernels measured, peak_tflops per dtype = the largest GEMM rate measured for it and [device.measured] =
// the rates (efficiency = rate / that peak), else fp32 peak = the mean sgemm rate per rank at gemm_n.
// `when` is the date written into the sources.
ClusterSpec this_host_cluster(const Calibration& c, const std::string& when);
// Comment lines for the cluster file: every measured number behind the fit.
std::vector<std::string> calibration_comment(const Calibration& c, const std::string& when);

}  // namespace sp::planner
