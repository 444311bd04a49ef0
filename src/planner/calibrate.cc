#include "planner/calibrate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "core/check.h"
#include "core/hash.h"
#include "core/timer.h"
#include "kernels/matmul.h"
#include "planner/calibrate_hosts.h"
#include "planner/cold_arena.h"

namespace sp::planner {
namespace {

constexpr int64_t kBandwidthFrom = 65536;  // messages at least this large fit the bandwidth

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

}  // namespace

GemmMeasurement measure_sgemm(int64_t n, double min_seconds) {
  SP_CHECK(n >= 1, "sgemm of size {}", n);
  const size_t nn = static_cast<size_t>(n * n);
  std::vector<float> a(nn), b(nn), c(nn, 0.0f);
  for (size_t i = 0; i < nn; ++i) {
    a[i] = 0.5f + static_cast<float>(i % 7) * 0.125f;
    b[i] = 0.25f + static_cast<float>(i % 5) * 0.0625f;
  }
  kernels::gemm(c.data(), a.data(), b.data(), n, n, n, false, false, n, n, n, 1.0f, 0.0f);  // warm-up
  GemmMeasurement m;
  m.n = n;
  double best = std::numeric_limits<double>::infinity();
  Stopwatch total;
  while (m.repetitions < 3 || total.seconds() < min_seconds) {
    Stopwatch one;
    kernels::gemm(c.data(), a.data(), b.data(), n, n, n, false, false, n, n, n, 1.0f, 0.0f);
    best = std::min(best, one.seconds());
    ++m.repetitions;
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  m.gflops = flops / best / 1e9;
  return m;
}

namespace {

// The timed tries of one size (TransferOptions): decided by rank a from its warm-up and broadcast, so that
// every rank runs the same loop; 0 = the size is not measured.
int tries_for(comm::Communicator& world, const TransferOptions& o, int64_t bytes, double warm_up_seconds) {
  int tries = 0;
  if (world.rank() == o.a && warm_up_seconds <= o.max_transfer_seconds) {
    tries = bytes <= kBandwidthFrom ? 10 * o.repetitions : o.repetitions;
    const double fit = o.seconds_per_size / std::max(warm_up_seconds, 1e-9);
    if (fit < tries) tries = std::max(3, static_cast<int>(fit));
  }
  world.broadcast(&tries, 1, DType::kI32, o.a);
  return tries;
}

void check_pair(const comm::Communicator& world, const TransferOptions& o, const char* what) {
  SP_CHECK(world.size() >= 2, "{} needs two ranks, the world has {}", what, world.size());
  SP_CHECK(o.a != o.b && o.a >= 0 && o.b >= 0 && o.a < world.size() && o.b < world.size(),
           "{} between ranks {} and {} of {}", what, o.a, o.b, world.size());
  SP_CHECK(o.repetitions >= 1, "{} with {} repetitions", what, o.repetitions);
}

}  // namespace

std::vector<TransferSample> measure_ping_pong(comm::Communicator& world, const std::vector<int64_t>& sizes,
                                              const TransferOptions& o) {
  check_pair(world, o, "ping-pong");
  const int64_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint8_t> buf(static_cast<size_t>(std::max<int64_t>(largest, 1)), 1);
  std::vector<TransferSample> out;
  constexpr int kTag = 7;
  const int me = world.rank();
  auto round_trip = [&](int64_t bytes) {  // the time on rank a; 0 elsewhere
    if (me == o.a) {
      Stopwatch t;
      world.send(buf.data(), bytes, DType::kU8, o.b, kTag);
      world.recv(buf.data(), bytes, DType::kU8, o.b, kTag);
      return t.seconds();
    }
    if (me == o.b) {
      world.recv(buf.data(), bytes, DType::kU8, o.a, kTag);
      world.send(buf.data(), bytes, DType::kU8, o.a, kTag);
    }
    return 0.0;
  };
  for (int64_t bytes : sizes) {
    world.barrier();
    const int tries = tries_for(world, o, bytes, round_trip(bytes) / 2);  // the warm-up, not a sample
    if (tries == 0) continue;
    double best = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < tries; ++rep) {
      const double t = round_trip(bytes);
      if (me == o.a) best = std::min(best, t);
    }
    world.broadcast(&best, 1, DType::kF64, o.a);
    out.push_back({bytes, best / 2});
  }
  return out;
}

std::vector<TransferSample> measure_exchange(comm::Communicator& world, const std::vector<int64_t>& sizes,
                                             const TransferOptions& o) {
  check_pair(world, o, "an exchange");
  const int64_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint8_t> out_buf(static_cast<size_t>(std::max<int64_t>(largest, 1)), 1);
  std::vector<uint8_t> in_buf(out_buf.size(), 0);
  std::vector<TransferSample> out;
  constexpr int kTag = 8;
  const int me = world.rank();
  auto exchange = [&](int64_t bytes) {  // the time on ranks a and b; +inf elsewhere
    world.barrier();
    if (me != o.a && me != o.b) return std::numeric_limits<double>::infinity();
    const int peer = me == o.a ? o.b : o.a;
    Stopwatch t;
    auto in = world.irecv(in_buf.data(), bytes, DType::kU8, peer, kTag);
    auto sent = world.isend(out_buf.data(), bytes, DType::kU8, peer, kTag);
    in->wait();
    sent->wait();
    return t.seconds();
  };
  for (int64_t bytes : sizes) {
    const int tries = tries_for(world, o, bytes, exchange(bytes));  // the warm-up, not a sample
    if (tries == 0) continue;
    double best = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < tries; ++rep) best = std::min(best, exchange(bytes));
    world.all_reduce(&best, 1, DType::kF64, comm::ReduceOp::kMin);  // ranks a and b timed; the best of both
    out.push_back({bytes, best});
  }
  return out;
}

Result<AlphaBeta> fit_alpha_beta(const std::vector<TransferSample>& samples) {
  std::vector<const TransferSample*> big;
  for (const auto& s : samples)
    if (s.bytes >= kBandwidthFrom) big.push_back(&s);
  if (big.size() < 2)
    return invalid_argument("the α–β fit needs at least two messages of ≥ {} bytes, got {}", kBandwidthFrom,
                            big.size());
  double mx = 0, my = 0;
  for (const auto* s : big) {
    mx += static_cast<double>(s->bytes);
    my += s->one_way_seconds;
  }
  mx /= static_cast<double>(big.size());
  my /= static_cast<double>(big.size());
  double sxy = 0, sxx = 0;
  for (const auto* s : big) {
    sxy += (static_cast<double>(s->bytes) - mx) * (s->one_way_seconds - my);
    sxx += (static_cast<double>(s->bytes) - mx) * (static_cast<double>(s->bytes) - mx);
  }
  if (!(sxx > 0) || !(sxy > 0))
    return invalid_argument("the α–β fit found no positive slope of time against message size (noisy machine?)")
        .with_hint("run `shardproof plan calibrate` again on a quieter machine");
  AlphaBeta ab;
  ab.bandwidth_bytes_per_s = sxx / sxy;
  const auto smallest =
      *std::min_element(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  ab.latency_s =
      std::max(0.0, smallest.one_way_seconds - static_cast<double>(smallest.bytes) / ab.bandwidth_bytes_per_s);
  return ab;
}

namespace {
// The ranks running on this rank's kernel (the same boot id: one machine's memory, network namespaces included).
int ranks_sharing_memory(comm::Communicator& world) {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  const auto mine = static_cast<int64_t>(xxh3_64(id));
  std::vector<int64_t> all(static_cast<size_t>(world.size()), 0);
  const std::vector<int64_t> ones(static_cast<size_t>(world.size()), 1);
  world.all_gather(&mine, all.data(), ones, DType::kI64);
  return static_cast<int>(std::count(all.begin(), all.end(), mine));
}
}  // namespace

Result<Calibration> calibrate_this_host(comm::Communicator& world, const std::string& host,
                                        const CalibrationOptions& o) {
  if (world.size() < 2)
    return invalid_argument("plan calibrate needs at least 2 ranks to measure the link between them, got {}",
                            world.size())
        .with_hint("shardproof plan calibrate --np 2 (or under mpirun -np N)");
  SP_ASSIGN_OR_RETURN(const RankHosts placed, gather_rank_hosts(world, host));
  kernels::set_blas_threads(1);  // the engine's default: one OpenBLAS thread per rank
  Calibration c;
  c.ranks = world.size();
  c.host = placed.hosts.front();
  c.hosts = placed.hosts;
  c.ranks_per_host = placed.ranks_per_host;
  cold_arena_ranks_per_host = ranks_sharing_memory(world);  // the cold arenas share this machine's memory
  c.cpu_model = cpu_model_name();
  c.host_memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  c.gemm_n = o.gemm_n;
  c.load_average = load_average();
  c.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  world.barrier();
  double mine = measure_sgemm(o.gemm_n, o.gemm_seconds).gflops;
  c.gflops_per_rank.assign(static_cast<size_t>(world.size()), 0.0);
  const std::vector<int64_t> ones(static_cast<size_t>(world.size()), 1);
  world.all_gather(&mine, c.gflops_per_rank.data(), ones, DType::kF64);
  const TransferOptions intra{.a = 0, .b = placed.intra_peer(), .repetitions = o.repetitions};
  c.samples = measure_ping_pong(world, o.sizes, intra);
  SP_ASSIGN_OR_RETURN(c.link, fit_alpha_beta(c.samples));
  c.exchange_samples = measure_exchange(world, o.sizes, intra);
  SP_ASSIGN_OR_RETURN(c.exchange, fit_alpha_beta(c.exchange_samples));
  if (placed.nodes() > 1) {
    const TransferOptions inter{.a = 0, .b = placed.inter_peer(), .repetitions = o.repetitions};
    c.inter_samples = measure_ping_pong(world, o.sizes, inter);
    auto fit = fit_alpha_beta(c.inter_samples);
    if (!fit.ok()) return fit.status().with_context(fmt::format("the link between {} and {}", c.hosts[0], c.hosts[1]));
    c.inter_link = *fit;
    c.inter_exchange_samples = measure_exchange(world, o.sizes, inter);
    fit = fit_alpha_beta(c.inter_exchange_samples);
    if (!fit.ok()) return fit.status().with_context(fmt::format("the link between {} and {}", c.hosts[0], c.hosts[1]));
    c.inter_exchange = *fit;
  }
  if (o.measure_kernels) {
    world.barrier();
    c.kernels = calibrate_kernels(o.kernels);
    // The mean over the ranks of every figure (every rank ran the same sizes on the same host).
    const double n = static_cast<double>(world.size());
    auto mean = [&](std::vector<double>& v) {
      world.all_reduce(v.data(), static_cast<int64_t>(v.size()), DType::kF64, comm::ReduceOp::kSum);
      for (double& x : v) x /= n;
    };
    for (auto& [d, v] : c.kernels.gemm_flops_per_s) mean(v);
    for (auto& [d, forms] : c.kernels.gemm_form_flops_per_s)
      for (auto& [f, v] : forms) mean(v);
    for (auto& [d, v] : c.kernels.gemm_shape_flops_per_s) mean(v);
    for (auto& [d, v] : c.kernels.attention_forward_s) mean(v);
    for (auto& [d, v] : c.kernels.attention_backward_s) mean(v);
    for (auto& [f, v] : c.kernels.memory_bytes_per_s) mean(v);
    c.kernels_measured = true;
  }
  return c;
}

ClusterSpec this_host_cluster(const Calibration& c, const std::string& when) {
  double mean = 0;
  for (double g : c.gflops_per_rank) mean += g;
  mean /= static_cast<double>(std::max<size_t>(c.gflops_per_rank.size(), 1));
  const int nodes = std::max<int>(1, static_cast<int>(c.hosts.size()));
  const int per_node = c.ranks_per_host > 0 ? c.ranks_per_host : c.ranks;
  const std::string where =
      nodes == 1 ? c.host : fmt::format("{} hosts {} … {}", nodes, c.hosts.front(), c.hosts.back());
  ClusterSpec s;
  s.name = "this-host";
  s.description = nodes == 1 ? fmt::format("{}: {} ranks of one CPU core each ({}), MPI over shared memory", c.host,
                                           c.ranks, c.cpu_model)
                             : fmt::format(
                                   "{}: {} ranks of one CPU core each per host ({}), MPI over shared memory within a "
                                   "host and TCP between hosts",
                                   where, per_node, c.cpu_model);
  s.sources = {
      fmt::format("measured by `shardproof plan calibrate` on {} at {} (numbers in the comment above)", where, when)};
  s.nodes = nodes;
  s.devices_per_node = per_node;
  s.device_model = "CPU core: " + c.cpu_model;
  s.device_memory_bytes = c.host_memory_bytes / per_node;
  s.peak_flops["fp32"] = mean * 1e9;
  if (c.kernels_measured) {  // the peak of each dtype is the largest rate measured for it
    for (const auto& [d, rates] : c.kernels.gemm_flops_per_s)
      if (!rates.empty()) s.peak_flops[d] = *std::max_element(rates.begin(), rates.end());
    for (const auto& [d, forms] : c.kernels.gemm_form_flops_per_s)
      for (const auto& [f, rates] : forms)
        for (double x : rates) s.peak_flops[d] = std::max(s.peak_flops[d], x);
    for (const auto& [d, rates] : c.kernels.gemm_shape_flops_per_s)
      for (double x : rates) s.peak_flops[d] = std::max(s.peak_flops[d], x);
    s.measured = device_rates_of(c.kernels, s.peak_flops);
    s.measured.notes = {
        "measured by plan calibrate with the engine's kernels, every rank at once, median of the repetitions",
        "gemm_efficiency: rate / device.peak_tflops of the dtype (its largest measured rate) at 2n^3 FLOPs per call",
        "gemm_{forward,dgrad,wgrad}_efficiency: a linear's products as the engine calls them (y = x.w^T, dx = dy.w, "
        "dw += dy^T.x) at gemm_tokens x gemm_weights (n x n), tokens-major; they price the engine's GEMMs",
        "attention_*_us: one (sequence, head) at attention_head_dim; memory: bytes per call (kernel_costs.h formulas)"};
  }
  s.intra.kind = LinkKind::kSharedMemory;
  s.intra.bandwidth_bytes_per_s = c.exchange.bandwidth_bytes_per_s;
  s.intra.latency_s = c.link.latency_s;
  if (nodes > 1) {  // the hosts' network as the collectives see it: the exchange's bandwidth, the ping-pong's α
    s.inter = InterNodeNetwork{.kind = NetworkKind::kEthernet,
                               .nics_per_node = 1,
                               .nic_bandwidth_bytes_per_s = c.inter_exchange.bandwidth_bytes_per_s,
                               .latency_s = c.inter_link.latency_s};
  }
  return s;
}

std::vector<std::string> calibration_comment(const Calibration& c, const std::string& when) {
  std::vector<std::string> lines = {
      fmt::format("written by `shardproof plan calibrate` on {} at {}; run it again to refresh.",
                  c.hosts.size() > 1 ? fmt::format("{}", fmt::join(c.hosts, ", ")) : c.host, when),
      fmt::format("load average at the start: {:.2f} on {} CPUs{}", c.load_average, c.cores,
                  c.load_average > c.cores ? " (busy: other processes shared the cores, so the figures are "
                                             "pessimistic; calibrate again on a quiet machine)"
                                           : ""),
      fmt::format(
          "sgemm: kernels::gemm (the fp32 backend, 1 thread), n = {}, all {} ranks at once, best of the repetitions; "
          "GFLOP/s by rank:",
          c.gemm_n, c.ranks),
  };
  std::string per;
  for (double g : c.gflops_per_rank) per += fmt::format("{}{:.2f}", per.empty() ? "  " : ", ", g);
  lines.push_back(per);
  lines.push_back("device.peak_tflops.fp32 is their mean; device.memory_gib is a host's memory / its ranks.");
  lines.push_back("MPI ping-pong between ranks 0 and 1 (Communicator send/recv), one-way = best round trip / 2:");
  for (const auto& s : c.samples)
    lines.push_back(fmt::format("  {:>9} bytes: {:.3f} us", s.bytes, s.one_way_seconds * 1e6));
  lines.push_back(
      fmt::format("fit: bandwidth = least-squares slope over messages >= 64 KiB = {:.3f} GB/s; latency = "
                  "smallest message's time - bytes/bandwidth = {:.3f} us",
                  c.link.bandwidth_bytes_per_s / 1e9, c.link.latency_s * 1e6));
  lines.push_back("MPI exchange between ranks 0 and 1 (both isend + irecv at once), best time for both:");
  for (const auto& s : c.exchange_samples)
    lines.push_back(fmt::format("  {:>9} bytes: {:.3f} us", s.bytes, s.one_way_seconds * 1e6));
  lines.push_back(fmt::format(
      "fit: bandwidth = {:.3f} GB/s per direction while both run: intra.gbytes_per_s (the collectives' steps are "
      "exchanges); intra.latency_us is the ping-pong's",
      c.exchange.bandwidth_bytes_per_s / 1e9));
  if (c.hosts.size() > 1) {
    const int peer = c.ranks_per_host;
    lines.push_back(
        fmt::format("hosts (rank r on host floor(r / {})): {}", c.ranks_per_host, fmt::join(c.hosts, ", ")));
    lines.push_back(fmt::format("MPI ping-pong between ranks 0 ({}) and {} ({}), TCP between hosts:", c.hosts[0], peer,
                                c.hosts[1]));
    for (const auto& s : c.inter_samples)
      lines.push_back(fmt::format("  {:>9} bytes: {:.3f} us", s.bytes, s.one_way_seconds * 1e6));
    lines.push_back(fmt::format("fit: bandwidth = {:.4f} GB/s; latency = {:.3f} us: inter_node.latency_us",
                                c.inter_link.bandwidth_bytes_per_s / 1e9, c.inter_link.latency_s * 1e6));
    lines.push_back(fmt::format("MPI exchange between ranks 0 and {} (both isend + irecv at once):", peer));
    for (const auto& s : c.inter_exchange_samples)
      lines.push_back(fmt::format("  {:>9} bytes: {:.3f} us", s.bytes, s.one_way_seconds * 1e6));
    lines.push_back(fmt::format(
        "fit: bandwidth = {:.4f} GB/s per direction while both run = {:.4g} Gbit/s: inter_node.nic_gbits_per_s (one "
        "NIC per host); sizes whose one transfer took more than 0.5 s are not measured",
        c.inter_exchange.bandwidth_bytes_per_s / 1e9, c.inter_exchange.bandwidth_bytes_per_s * 8 / 1e9));
  }
  if (!c.kernels_measured) return lines;
  const KernelCalibration& k = c.kernels;
  for (const auto& [d, rates] : k.gemm_flops_per_s) {
    std::string row =
        fmt::format("GEMM {} ({}), GFLOP/s at 2n^3 =", d, k.gemm_backend.count(d) ? k.gemm_backend.at(d) : "?");
    for (size_t i = 0; i < rates.size(); ++i) row += fmt::format(" {:.3g}:{:.1f}", k.gemm_flops[i], rates[i] / 1e9);
    lines.push_back(row);
  }
  for (const auto& [d, forms] : k.gemm_form_flops_per_s)
    for (const auto& [f, rates] : forms) {
      std::string row = fmt::format("GEMM {} {}, GFLOP/s at tokens x n =", d, gemm_form_name(f));
      for (size_t i = 0; i < rates.size(); ++i) {
        const size_t nw = k.gemm_weights.size();
        row += fmt::format(" {:.0f}x{:.0f}:{:.1f}", k.gemm_tokens[i / nw], std::sqrt(k.gemm_weights[i % nw]),
                           rates[i] / 1e9);
      }
      lines.push_back(row);
    }
  for (const auto& [d, rates] : k.gemm_shape_flops_per_s) {
    std::string row = fmt::format("GEMM {} at the model's own calls, GFLOP/s at form:m x n x k =", d);
    for (size_t i = 0; i < rates.size() && i < k.gemm_shapes.size(); ++i) {
      const GemmShape& g = k.gemm_shapes[i];
      row += fmt::format(" {}:{:.0f}x{:.0f}x{:.0f}:{:.1f}", gemm_form_name(g.form), g.m, g.n, g.k, rates[i] / 1e9);
    }
    lines.push_back(row);
  }
  for (const auto& [d, s] : k.attention_forward_s) {
    std::string row =
        fmt::format("attention {} (D = {}), forward / backward us per head at T =", d, k.attention_head_dim);
    for (size_t i = 0; i < s.size(); ++i)
      row +=
          fmt::format(" {:.0f}:{:.1f}/{:.1f}", k.attention_seq[i], s[i] * 1e6, k.attention_backward_s.at(d)[i] * 1e6);
    lines.push_back(row);
  }
  for (const auto& [f, bw] : k.memory_bytes_per_s) {
    std::string row = fmt::format("{} GB/s at bytes per call =", memory_family_name(f));
    for (size_t i = 0; i < bw.size(); ++i) row += fmt::format(" {:.3g}:{:.1f}", k.memory_bytes.at(f)[i], bw[i] / 1e9);
    lines.push_back(row);
  }
  return lines;
}

}  // namespace sp::planner
