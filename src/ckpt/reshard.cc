#include "ckpt/reshard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

#include "ckpt/names.h"
#include "core/check.h"
#include "core/threads.h"

namespace sp::ckpt {
namespace {

constexpr int64_t kDirectRun = int64_t{1} << 16;  // runs of at least this many floats are read in place
constexpr int64_t kWindow = int64_t{1} << 21;     // staging window, floats (8 MiB)
constexpr int64_t kMaxGap = int64_t{1} << 14;     // unneeded floats a window may read across

}  // namespace

std::vector<Overlap> overlaps_of(const Geometry& s, int64_t sa, int64_t sb, const Geometry& t, int64_t ta, int64_t tb) {
  std::vector<Overlap> out;
  if (sa >= sb || ta >= tb) return out;
  SP_CHECK_EQ(s.cols, t.cols, "overlaps of two geometries of different tensors");
  if (s.full_rows() && t.full_rows()) {
    // Both contiguous in logical order: one interval intersection.
    const int64_t sbase = s.row0 * s.cols + s.col0, tbase = t.row0 * t.cols + t.col0;
    const int64_t x = std::max(sbase + sa, tbase + ta), y = std::min(sbase + sb, tbase + tb);
    if (x < y) out.push_back({x - sbase, x - tbase, y - x});
    return out;
  }
  // Row by row: within row r each side holds one run of columns.
  const int64_t rs0 = s.row0 + sa / s.width, rs1 = s.row0 + (sb - 1) / s.width;
  const int64_t rt0 = t.row0 + ta / t.width, rt1 = t.row0 + (tb - 1) / t.width;
  for (int64_t r = std::max(rs0, rt0); r <= std::min(rs1, rt1); ++r) {
    const int64_t ks = (r - s.row0) * s.width, kt = (r - t.row0) * t.width;  // k of column col0 in row r
    const int64_t s0 = s.col0 + std::max(sa, ks) - ks, s1 = s.col0 + std::min(sb, ks + s.width) - ks;
    const int64_t t0 = t.col0 + std::max(ta, kt) - kt, t1 = t.col0 + std::min(tb, kt + t.width) - kt;
    const int64_t c0 = std::max(s0, t0), c1 = std::min(s1, t1);
    if (c0 < c1) out.push_back({ks + c0 - s.col0, kt + c0 - t.col0, c1 - c0});
  }
  return out;
}

struct CheckpointSource::Impl {
  struct Shard {
    std::string path;
    int fd = -1;
    uint64_t data_offset = 0;
    ShardContent content;
    ~Shard() {
      if (fd >= 0) ::close(fd);
    }
  };
  Manifest manifest;
  WeightIndex weights;
  std::vector<std::unique_ptr<Shard>> shards;
  // (tensor, kind) -> (shard, fragment) in shard order
  std::map<std::pair<std::string, StateKind>, std::vector<std::pair<size_t, size_t>>, std::less<>> index;
  size_t fragments = 0;
  mutable std::atomic<uint64_t> bytes_read{0};

  Status read_floats(const Shard& sh, size_t frag, int64_t k0, int64_t n, float* dst) const {
    const Fragment& f = sh.content.fragments[frag];
    const SafetensorsEntry& e = sh.content.entries[frag];
    SP_CHECK(f.begin <= k0 && k0 + n <= f.end, "read outside fragment {}", f.stored);
    uint64_t offset = sh.data_offset + e.begin + sizeof(float) * static_cast<uint64_t>(k0 - f.begin);
    auto* p = reinterpret_cast<char*>(dst);
    uint64_t left = sizeof(float) * static_cast<uint64_t>(n);
    while (left > 0) {
      const ssize_t got = ::pread(sh.fd, p, left, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        return io_error("cannot read checkpoint shard '{}' at offset {}: {}", sh.path, offset, std::strerror(errno));
      if (got == 0)
        return corrupt("checkpoint shard '{}' ended at byte {} while reading {:?}", sh.path, offset, f.stored)
            .with_hint("the file was truncated after it was verified");
      p += got;
      offset += static_cast<uint64_t>(got);
      left -= static_cast<uint64_t>(got);
    }
    bytes_read += sizeof(float) * static_cast<uint64_t>(n);
    return Status();
  }
};

CheckpointSource::CheckpointSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointSource::CheckpointSource(CheckpointSource&&) noexcept = default;
CheckpointSource& CheckpointSource::operator=(CheckpointSource&&) noexcept = default;
CheckpointSource::~CheckpointSource() = default;

const Manifest& CheckpointSource::manifest() const { return impl_->manifest; }
const WeightIndex& CheckpointSource::weights() const { return impl_->weights; }
size_t CheckpointSource::fragment_count() const { return impl_->fragments; }
uint64_t CheckpointSource::bytes_read() const { return impl_->bytes_read; }

Result<CheckpointSource> CheckpointSource::open(const std::string& step_dir, const Manifest& manifest,
                                                const model::LlamaConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->manifest = manifest;
  impl->weights = weight_index(config);
  for (const ShardRecord& rec : manifest.shards) {
    auto sh = std::make_unique<Impl::Shard>();
    sh->path = CheckpointPaths::shard_in(step_dir, rec.rank);
    SP_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::open(sh->path));
    if (reader.data_offset() + reader.data_size() != rec.bytes)
      return corrupt("checkpoint shard '{}' is {} bytes; the manifest says {}", sh->path,
                     reader.data_offset() + reader.data_size(), rec.bytes);
    SP_ASSIGN_OR_RETURN(sh->content,
                        read_shard_metadata(reader, impl->weights, manifest.topology.tp, rec.rank, manifest.step));
    // The state a resume restores is recorded twice: the manifest's copy must be the shard's own.
    if (!sh->content.state.is_null() && sh->content.state != manifest.training_state())
      return corrupt("checkpoint shard '{}' records training state {}, its manifest says {}: the manifest was edited",
                     sh->path, sh->content.state.dump(), manifest.training_state().dump())
          .with_hint("a checkpoint whose manifest disagrees with its shards cannot be trusted; use another one");
    sh->data_offset = reader.data_offset();
    sh->fd = ::open(sh->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (sh->fd < 0) return io_error("cannot open checkpoint shard '{}': {}", sh->path, std::strerror(errno));
    struct stat st {};
    if (::fstat(sh->fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != rec.bytes)
      return corrupt("checkpoint shard '{}' changed size while it was being opened", sh->path);
    const size_t s = impl->shards.size();
    for (size_t i = 0; i < sh->content.fragments.size(); ++i) {
      const Fragment& f = sh->content.fragments[i];
      impl->index[{f.tensor, f.kind}].push_back({s, i});
    }
    impl->fragments += sh->content.fragments.size();
    impl->shards.push_back(std::move(sh));
  }
  return CheckpointSource(std::move(impl));
}

Status CheckpointSource::fill_region(const model::WeightSpec& spec, StateKind kind, const Geometry& target, int64_t ta,
                                     int64_t tb, float* dst, int target_tp) const {
  const Impl& im = *impl_;
  const int src_tp = im.manifest.topology.tp;
  const bool replicated = spec.tp_dim < 0;
  const int want_tp = target_tp < src_tp ? target_tp : 0;
  struct Run {
    int64_t tk, n;
    size_t shard;
  };
  std::vector<Run> runs;
  const auto it = im.index.find(std::pair<std::string, StateKind>{spec.name, kind});
  if (it != im.index.end()) {
    for (const auto& [s, i] : it->second) {
      const Impl::Shard& sh = *im.shards[s];
      const Fragment& f = sh.content.fragments[i];
      if (replicated && f.tp_rank != want_tp) continue;
      const std::vector<Overlap> ov = overlaps_of(geometry_of(f.shape, f.slice), f.begin, f.end, target, ta, tb);
      for (const Overlap& o : ov) runs.push_back({o.tk, o.n, s});
      if (dst == nullptr || ov.empty()) continue;
      // Copy: long runs straight into place, short neighbours through one staging window.
      std::vector<float> stage;
      for (size_t a = 0; a < ov.size();) {
        if (ov[a].n >= kDirectRun) {
          SP_RETURN_IF_ERROR(im.read_floats(sh, i, ov[a].sk, ov[a].n, dst + (ov[a].tk - ta)));
          ++a;
          continue;
        }
        size_t b = a + 1;
        while (b < ov.size() && ov[b].n < kDirectRun && ov[b].sk - (ov[b - 1].sk + ov[b - 1].n) <= kMaxGap &&
               ov[b].sk + ov[b].n - ov[a].sk <= kWindow)
          ++b;
        const int64_t w0 = ov[a].sk, w1 = ov[b - 1].sk + ov[b - 1].n;
        stage.resize(static_cast<size_t>(w1 - w0));
        SP_RETURN_IF_ERROR(im.read_floats(sh, i, w0, w1 - w0, stage.data()));
        for (size_t c = a; c < b; ++c)
          std::memcpy(dst + (ov[c].tk - ta), stage.data() + (ov[c].sk - w0),
                      sizeof(float) * static_cast<size_t>(ov[c].n));
        a = b;
      }
    }
  }
  // The runs must tile [ta, tb) exactly.
  std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.tk < y.tk; });
  const Geometry& g = target;
  int64_t pos = ta;
  for (const Run& r : runs) {
    if (r.tk > pos) break;
    if (r.tk < pos)
      return corrupt("checkpoint step {}: {} of tensor {:?}: logical element {} is stored twice (again in shard '{}')",
                     im.manifest.step, state_kind_name(kind), spec.name, g.logical(r.tk), im.shards[r.shard]->path);
    pos = r.tk + r.n;
  }
  if (pos < tb) {
    const int64_t gap_end = [&] {
      for (const Run& r : runs)
        if (r.tk > pos) return r.tk;
      return tb;
    }();
    return corrupt("checkpoint step {}: {} of tensor {:?}: logical elements {}..{} are in no shard", im.manifest.step,
                   state_kind_name(kind), spec.name, g.logical(pos), g.logical(gap_end - 1))
        .with_hint(replicated ? fmt::format("replicated tensor, looked for the copy of saving tp rank {}", want_tp)
                              : std::string("the checkpoint is incomplete; run `shardproof ckpt verify`"));
  }
  return Status();
}

Status CheckpointSource::fill(const std::vector<StateSpan>& spans, int tp_rank) const {
  struct Job {
    const model::WeightSpec* spec;
    StateKind kind;
    Geometry g;
    int64_t ta, tb;
    float* dst;
  };
  std::vector<Job> jobs;
  for (const StateSpan& span : spans)
    for (const model::TensorSlot& t : span.unit->tensors) {
      const int64_t lo = std::max(span.begin, t.offset), hi = std::min(span.end, t.offset + t.numel);
      if (lo >= hi) continue;
      const auto spec = impl_->weights.find(t.spec.name);
      SP_CHECK(spec != impl_->weights.end(), "tensor {} is not in the model's weight table", t.spec.name);
      for (StateKind kind : kStateKinds) {
        float* dst = span.data[static_cast<size_t>(kind)];
        SP_CHECK(dst != nullptr, "state span of unit {} has no {} buffer", span.unit->name, state_kind_name(kind));
        jobs.push_back({&spec->second, kind, geometry_of(t.spec.shape, t.slice), lo - t.offset, hi - t.offset,
                        dst + (lo - span.begin)});
      }
    }
  // The regions are disjoint, so they fill on every usable CPU; the error reported is the first in
  // job order, whichever thread met it.
  std::vector<Status> status(jobs.size());
  run_indexed(jobs.size(), usable_cpus(), [&](size_t i) {
    const Job& j = jobs[i];
    status[i] = fill_region(*j.spec, j.kind, j.g, j.ta, j.tb, j.dst, tp_rank);
  });
  for (Status& st : status) SP_RETURN_IF_ERROR(st);
  return Status();
}

Status CheckpointSource::read_logical(const std::string& tensor, StateKind kind, float* dst) const {
  const auto spec = impl_->weights.find(tensor);
  if (spec == impl_->weights.end()) return not_found("the model has no tensor {:?}", tensor);
  const Shape& shape = spec->second.shape;
  const Geometry g = geometry_of(shape, model::Slice{-1, 0, shape[0]});
  return fill_region(spec->second, kind, g, 0, shape_numel(shape), dst, 0);
}

Status CheckpointSource::check_coverage() const {
  for (const auto& [name, spec] : impl_->weights) {
    const Geometry g = geometry_of(spec.shape, model::Slice{-1, 0, spec.shape[0]});
    const int copies = spec.tp_dim < 0 ? impl_->manifest.topology.tp : 1;
    for (StateKind kind : kStateKinds)
      for (int t = 0; t < copies; ++t)
        SP_RETURN_IF_ERROR(fill_region(spec, kind, g, 0, shape_numel(spec.shape), nullptr, t));
  }
  return Status();
}

}  // namespace sp::ckpt
