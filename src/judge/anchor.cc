#include "judge/anchor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <set>

#include "ckpt/safetensors.h"
#include "core/file_io.h"
#include "core/json_io.h"

namespace sp::judge {
namespace {

// What a file of each directory holds, and its metadata "format".
struct FileKind {
  std::string_view dir, format, what;
  std::vector<std::string_view> kinds;
};
const FileKind kAnchorFile{
    kAnchorsDir, "shardproof-torch-anchor", "anchor", {"param", "grad", "exp_avg", "exp_avg_sq", "param_after"}};
const FileKind kGradsFile{kGradsDir, "shardproof-torch-grads", "gradients", {"grad"}};
const FileKind kStateFile{kStateDir, "shardproof-torch-state", "state", {"param", "exp_avg", "exp_avg_sq"}};

std::vector<float>& slot(AnchorTensor& t, std::string_view kind) {
  if (kind == "param") return t.param;
  if (kind == "grad") return t.grad;
  if (kind == "exp_avg") return t.exp_avg;
  if (kind == "exp_avg_sq") return t.exp_avg_sq;
  return t.param_after;
}

// Copies a piece (shard `s` of `shape`, its elements in local order) into the logical tensor.
void place(std::vector<float>& dst, const Shape& shape, const std::optional<Shard>& s, const std::vector<float>& src) {
  if (!s) {
    dst = src;
    return;
  }
  s->for_each_run(shape, [&](int64_t logical, int64_t local, int64_t count) {
    std::copy_n(src.begin() + local, count, dst.begin() + logical);
  });
}

// The file's metadata "shards" (HF name → shard field), each parsed against its tensor's shape (judge/shard.h).
Result<std::map<std::string, std::optional<Shard>>> shard_map(
    const ckpt::SafetensorsReader& f, const std::string& label,
    const std::map<std::string, const model::WeightSpec*>& specs) {
  std::map<std::string, std::optional<Shard>> out;
  const auto it = f.metadata().find("shards");
  if (it == f.metadata().end()) return invalid_argument("{}: no \"shards\" in its metadata", label);
  auto j = parse_json_strict(it->second, label + " metadata shards");
  if (!j.ok() || !j->is_object()) return invalid_argument("{}: metadata \"shards\" is not a JSON object", label);
  for (const auto& [name, v] : j->items()) {
    const auto spec = specs.find(name);
    if (spec == specs.end())
      return invalid_argument("{}: metadata shards names '{}', not a tensor of the model", label, name.substr(0, 120));
    auto s = parse_shard(v, spec->second->shape);
    if (!s.ok())
      return invalid_argument("{}: metadata shards[{}] {}", label, name, s.status().message()).with_hint(kShardHint);
    out[name] = *s;
  }
  return out;
}

Result<AnchorState> read_files(const Recording& rec, int64_t step, const FileKind& fk) {
  AnchorState a{.step = step};
  const auto refuse = [&](const std::string& why) {
    return invalid_argument("recording '{}' refused: {} step {}: {}", rec.dir(), fk.what, step, why)
        .with_hint("judge only what a run recorded in full: rerun it (or resume it) with the recorder to the end");
  };
  std::map<std::string, const model::WeightSpec*> specs;
  for (const model::WeightSpec& w : rec.weights()) specs[w.name] = &w;
  // (tensor, kind) → the pieces seen (by key: the same elements whatever form wrote them) and their ranks
  std::map<std::pair<std::string, std::string>, std::map<PieceKey, std::pair<std::optional<Shard>, int>>> seen;
  std::map<std::string, int> parts_of;  // the even form's piece count of each tensor (0: a box or fragment)
  for (int rank = 0; rank < rec.contract().world; ++rank) {
    const std::string rel = recording_step_file(fk.dir, step, rank);
    if (!path_exists(rec.path(rel))) continue;
    auto f = ckpt::SafetensorsReader::open(rec.path(rel));
    if (!f.ok()) return refuse(f.status().message());
    ++a.files;
    std::error_code ec;
    a.bytes += static_cast<int64_t>(std::filesystem::file_size(rec.path(rel), ec));
    const auto& md = f->metadata();
    if (md.count("step") == 0 || md.at("step") != std::to_string(step) || md.count("rank") == 0 ||
        md.at("rank") != std::to_string(rank))
      return refuse(fmt::format("{}: its metadata names another step or rank", rel));
    if (md.count("format") == 0 || md.at("format") != fk.format)
      return refuse(fmt::format("{}: metadata format is not \"{}\"", rel, fk.format));
    auto shards_read = shard_map(*f, rel, specs);
    if (!shards_read.ok()) return refuse(shards_read.status().message()).with_hint(shards_read.status().hint());
    const auto& shards = *shards_read;
    nlohmann::json steps = nlohmann::json::object();
    if (md.count("optimizer_steps")) {
      auto j = parse_json_strict(md.at("optimizer_steps"), rel + " metadata optimizer_steps");
      if (!j.ok() || !j->is_object()) return refuse(fmt::format("{}: metadata optimizer_steps is not an object", rel));
      steps = *j;
    }
    for (const ckpt::SafetensorsEntry& e : f->tensors()) {
      const size_t slash = e.name.find('/');
      const std::string kind = e.name.substr(0, slash),
                        name = slash == std::string::npos ? "" : e.name.substr(slash + 1);
      const auto spec = specs.find(name);
      if (std::find(fk.kinds.begin(), fk.kinds.end(), kind) == fk.kinds.end() || spec == specs.end())
        return refuse(fmt::format("{}: tensor '{}' is not <{}>/<a tensor of the model>", rel, e.name.substr(0, 120),
                                  fmt::join(fk.kinds, "|")));
      const Shape& shape = spec->second->shape;
      const auto sh = shards.count(name) ? shards.at(name) : std::optional<Shard>();
      // A whole tensor held as one fragment of its flattened elements (DeepSpeed) is written 1-D: the same bytes.
      const Shape flat = {shape_numel(shape)};
      const Shape local = sh ? sh->local_shape() : e.shape == flat ? flat : shape;
      std::vector<float> values(static_cast<size_t>(shape_numel(local)));
      if (Status s = f->read_f32(e.name, local, values.data()); !s.ok()) return refuse(s.message());
      const int parts = !sh ? 1 : sh->form == Shard::Form::kEven ? sh->parts : 0;
      if (auto [it, added] = parts_of.emplace(name, parts); !added && it->second != parts) {
        if (parts > 0 && it->second > 0)
          return refuse(
              fmt::format("{}: {} is split in {} pieces here and {} elsewhere", rel, name, parts, it->second));
        it->second = 0;  // the even form beside a box or fragment: checked as a tiling
      }
      if (auto [it, added] = seen[{name, kind}].emplace(piece_key(sh, shape), std::pair{sh, rank}); !added)
        return refuse(fmt::format("{} of {} ({}) is recorded by rank {} and rank {}", kind, name, piece_name(sh),
                                  it->second.second, rank));
      AnchorTensor& t = a.tensors[name];
      std::vector<float>& dst = slot(t, kind);
      if (dst.empty()) dst.assign(static_cast<size_t>(shape_numel(shape)), 0.0f);
      place(dst, shape, sh, values);
      if (kind == "exp_avg") {
        t.moment_ranks.push_back(rank);
        if (!steps.contains(name) || !steps[name].is_number_integer())
          return refuse(fmt::format("{}: no optimizer step count for {} (metadata optimizer_steps)", rel, name));
        t.optimizer_step = steps[name].get<int64_t>();
      }
      if (kind == "param_after") t.after_ranks.push_back(rank);
      if (kind == "grad") t.grad_pieces.push_back({sh, rank});
    }
  }
  // Every tensor of every kind tiled exactly once: the even form named by its missing piece (as it always was),
  // boxes and fragments by the elements no piece, or two, hold.
  for (const model::WeightSpec& w : rec.weights())
    for (std::string_view kind : fk.kinds) {
      const auto it = seen.find({w.name, std::string(kind)});
      const int parts = parts_of.count(w.name) ? parts_of.at(w.name) : 1;
      if (parts > 0) {
        std::set<int> indices;
        if (it != seen.end())
          for (const auto& [key, piece] : it->second) indices.insert(piece.first ? piece.first->index : 0);
        for (int i = 0; i < parts; ++i)
          if (!indices.count(i))
            return refuse(
                fmt::format("{} of {} (piece {}/{}) is in no rank's {} file", kind, w.name, i, parts, fk.what));
        continue;
      }
      std::vector<std::pair<std::optional<Shard>, int>> pieces;
      if (it != seen.end())
        for (const auto& [key, piece] : it->second) pieces.push_back(piece);
      if (const std::string problem = tiling_problem(w.shape, pieces); !problem.empty())
        return refuse(fmt::format("{} of {}: {} of the {} files", kind, w.name, problem, fk.what))
            .with_hint(
                "the pieces of a tensor must hold each of its elements exactly once: a file was edited, or a "
                "rank's pieces were not all written");
    }
  return a;
}

}  // namespace

Result<AnchorState> read_anchor(const Recording& rec, int64_t step) { return read_files(rec, step, kAnchorFile); }
Result<AnchorState> read_grads(const Recording& rec, int64_t step) { return read_files(rec, step, kGradsFile); }
Result<AnchorState> read_state(const Recording& rec, int64_t step) { return read_files(rec, step, kStateFile); }

Result<RootValues> read_sqrt(const Recording& rec, int64_t step) {
  RootValues out;
  const auto refuse = [&](const std::string& why) {
    return invalid_argument("recording '{}' refused: square roots of step {}: {}", rec.dir(), step, why)
        .with_hint("judge only what a run recorded in full: rerun it (or resume it) with the recorder to the end");
  };
  std::map<std::string, const model::WeightSpec*> specs;
  for (const model::WeightSpec& w : rec.weights()) specs[w.name] = &w;
  for (int rank = 0; rank < rec.contract().world; ++rank) {
    const std::string rel = recording_step_file(kSqrtDir, step, rank);
    if (!path_exists(rec.path(rel))) continue;
    auto f = ckpt::SafetensorsReader::open(rec.path(rel));
    if (!f.ok()) return refuse(f.status().message());
    for (const ckpt::SafetensorsEntry& e : f->tensors()) {
      if (e.name.rfind("index/", 0) != 0) continue;
      const std::string name = e.name.substr(6);
      const auto spec = specs.find(name);
      const ckpt::SafetensorsEntry* values = f->find("value/" + name);
      if (spec == specs.end() || values == nullptr || e.dtype != DType::kI64 || values->dtype != DType::kF32 ||
          e.shape.size() != 1 || values->shape != e.shape)
        return refuse(fmt::format("{}: '{}' is not an I64 index/<tensor> with its F32 value/<tensor>", rel,
                                  e.name.substr(0, 120)));
      std::vector<int64_t> index(static_cast<size_t>(e.shape[0]));
      std::vector<float> value(index.size());
      if (Status s = f->read(e, index.data()); !s.ok()) return refuse(s.message());
      if (Status s = f->read(*values, value.data()); !s.ok()) return refuse(s.message());
      std::vector<kernels::SqrtValue>& dst = out[name];
      const int64_t numel = shape_numel(spec->second->shape);
      for (size_t i = 0; i < index.size(); ++i) {
        if (index[i] < 0 || index[i] >= numel)
          return refuse(fmt::format("{}: {} index {} is outside [0, {})", rel, name, index[i], numel));
        dst.push_back({index[i], value[i]});
      }
    }
  }
  for (auto& [name, v] : out) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.index < b.index; });
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].index == v[i - 1].index) return refuse(fmt::format("{} element {} is recorded twice", name, v[i].index));
  }
  return out;
}

}  // namespace sp::judge
