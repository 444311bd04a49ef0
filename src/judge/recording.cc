// Reading a recording (judge/recording.h): the contract and topology, the seals, then every rank's records,
// each record strictly (exactly its keys, its types), then completeness across ranks and steps.
#include "judge/recording.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "comm/topology.h"
#include "core/exact_sum.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_io.h"
#include "judge/records.h"

namespace sp::judge {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string Shard::to_string() const { return fmt::format("{} {}/{}", dim == 0 ? "rows" : "columns", index, parts); }

std::string recording_rank_file(std::string_view dir, int rank, std::string_view ext) {
  return fmt::format("{}/rank-{:05d}.{}", dir, rank, ext);
}
std::string recording_tokens_file(int rank, int64_t step) {
  return fmt::format("{}/rank-{:05d}/step-{:06d}.bin", kTokensDir, rank, step);
}
config::RunConfig RecordingContract::single_device_config() const {
  config::RunConfig rc;
  rc.model = model.model;
  rc.data.vocab_size = model.model.vocab_size;
  rc.train.micro_batch_size = strategy.micro_batch_size;
  rc.train.global_batch = strategy.micro_batch_size * micro_batches;
  rc.train.seq_len = seq_len;
  rc.train.steps = steps;
  rc.train.eval_batches = 0;
  return rc;
}

std::string Recording::path(std::string_view rel) const { return dir_ + "/" + std::string(rel); }
std::string Recording::anchor_file(int64_t step, int rank) const {
  return fmt::format("{}/step-{:06d}/rank-{:05d}.safetensors", kAnchorsDir, step, rank);
}

struct RecordingReader {
  Recording& r;

  Status refuse(const std::string& what) const {
    return invalid_argument("recording '{}' refused: {}", r.dir_, what)
        .with_hint("judge only what a run recorded in full: rerun it (or resume it) with the recorder to the end");
  }

  Status contract() {
    const std::string label = std::string(kContractName);
    auto doc = read_json_file(r.path(label));
    if (!doc.ok()) return refuse(doc.status().message());
    auto c = parse_recording_contract(*doc, label);
    if (!c.ok()) return refuse(c.status().message());
    r.contract_ = std::move(c).value();
    return Status();
  }

  Status topology() {
    auto doc = read_json_file(r.path("topology.json"));
    if (!doc.ok()) return refuse(doc.status().message());
    if (Status s = comm::validate_topology(*doc); !s.ok()) return refuse("topology.json: " + s.message());
    const RecordingContract& c = r.contract_;
    const plan::Strategy& s = c.strategy;
    if ((*doc)["dp"] != s.dp || (*doc)["tp"] != s.tp || (*doc)["pp"] != s.pp)
      return refuse(fmt::format("topology.json is dp {} × tp {} × pp {}; contract.json declares dp {} × tp {} × pp {}",
                                (*doc)["dp"].dump(), (*doc)["tp"].dump(), (*doc)["pp"].dump(), s.dp, s.tp, s.pp));
    r.topology_ = *doc;
    SP_ASSIGN_OR_RETURN(r.grid_, comm::grid_from_topology(*doc));
    return Status();
  }

  // Every file but the judge's own must be in exactly one rank's seal, with its size and SHA-256.
  Status seals() {
    std::map<std::string, int> sealed;
    for (int rank = 0; rank < r.contract_.world; ++rank) {
      const std::string label = recording_rank_file(kRecordingSealDir, rank, "json");
      if (!path_exists(r.path(label)))
        return refuse(
            fmt::format("{} is missing: rank {} never finished its recording (Recorder.finish)", label, rank));
      auto doc = read_json_file(r.path(label));
      if (!doc.ok()) return refuse(doc.status().message());
      SP_ASSIGN_OR_RETURN(auto listed, parse_seal(*doc, label, rank));
      for (const auto& [file, entry] : listed) {
        if (auto [it, added] = sealed.emplace(file, rank); !added)
          return refuse(fmt::format("{} is sealed by rank {} and by rank {}", file, it->second, rank));
        const std::string p = r.path(file);
        std::error_code ec;
        if (!fs::is_regular_file(p, ec)) return refuse(fmt::format("{}: listed in {}, missing", file, label));
        const auto size = static_cast<int64_t>(fs::file_size(p, ec));
        if (size != entry.first)
          return refuse(
              fmt::format("{}: {} bytes, its seal ({}) says {}: edited or truncated", file, size, label, entry.first));
        SP_ASSIGN_OR_RETURN(const std::string sha, sha256_file(p));
        if (sha != entry.second)
          return refuse(
              fmt::format("{}: SHA-256 {} differs from its seal ({}): the file was edited", file, sha, label));
      }
    }
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(r.dir_, ec); it != fs::recursive_directory_iterator(); ++it) {
      if (!it->is_regular_file()) continue;
      const std::string rel = fs::relative(it->path(), r.dir_).string();
      if (rel.rfind(std::string(kRecordingSealDir) + "/", 0) == 0) continue;
      if (std::find(kJudgeDerivedFiles.begin(), kJudgeDerivedFiles.end(), rel) != kJudgeDerivedFiles.end()) continue;
      if (!sealed.contains(rel)) return refuse(fmt::format("{} is in no rank's seal: added after the run", rel));
    }
    r.files_sealed_ = static_cast<int>(sealed.size());
    return Status();
  }

  Status records() {
    r.ranks_.resize(static_cast<size_t>(r.contract_.world));
    for (int rank = 0; rank < r.contract_.world; ++rank) {
      const std::string label = recording_rank_file(kRecordsDir, rank, "jsonl");
      auto doc = read_jsonl_file(r.path(label));
      if (!doc.ok()) return refuse(doc.status().message());
      for (size_t i = 0; i < doc->records.size(); ++i) {
        const std::string where = fmt::format("{}:{}", label, doc->line_numbers[i]);
        if (Status s = parse_rank_record(doc->records[i], where, rank, doc->line_numbers[i], r.ranks_[rank]); !s.ok())
          return refuse(s.message());
      }
    }
    return Status();
  }

  // Each rank: one step record per step; at checksum steps one tensor record per local tensor and phase.
  Status completeness() {
    const RecordingContract& c = r.contract_;
    std::map<std::string, const model::WeightSpec*> specs;
    for (const model::WeightSpec& w : r.weights_) specs[w.name] = &w;
    for (int rank = 0; rank < c.world; ++rank) {
      RankRecords& rr = r.ranks_[static_cast<size_t>(rank)];
      const std::string label = recording_rank_file(kRecordsDir, rank, "jsonl");
      std::sort(rr.steps.begin(), rr.steps.end(), [](auto& a, auto& b) { return a.step < b.step; });
      for (int64_t s = 0; s < c.steps; ++s)
        if (static_cast<int64_t>(rr.steps.size()) <= s || rr.steps[static_cast<size_t>(s)].step != s)
          return refuse(
              fmt::format("{} has no step record for step {} (of {}): the recording is incomplete", label, s, c.steps));
      if (static_cast<int64_t>(rr.steps.size()) != c.steps)
        return refuse(
            fmt::format("{} holds {} step records; contract.json declares {} steps", label, rr.steps.size(), c.steps));
      std::map<std::pair<int64_t, std::string>, std::set<std::string>> seen;
      for (const TensorRecord& t : rr.tensors) {
        const auto spec = specs.find(t.tensor);
        if (spec == specs.end())
          return refuse(fmt::format("{}:{}: tensor '{}' is not in the model contract.json's config describes", label,
                                    t.line, t.tensor));
        const int64_t numel = shape_numel(spec->second->shape);
        if (t.numel != numel)
          return refuse(fmt::format("{}:{}: tensor '{}' has {} elements; the config gives {} (another model?)", label,
                                    t.line, t.tensor, t.numel, numel));
        if (t.step >= c.steps || !c.checksums_at(t.step))
          return refuse(fmt::format("{}:{}: a tensor record at step {}, not a checksum step of the contract", label,
                                    t.line, t.step));
        if (!seen[{t.step, t.phase}].insert(t.tensor).second)
          return refuse(fmt::format("{}:{}: step {} {} '{}' recorded twice", label, t.line, t.step, t.phase, t.tensor));
      }
      const std::set<std::string>* first = nullptr;
      for (int64_t s = 0; s < c.steps; ++s)
        for (const char* phase : {"grad", "param"}) {
          if (!c.checksums_at(s)) continue;
          const auto it = seen.find({s, phase});
          if (it == seen.end())
            return refuse(
                fmt::format("{} has no {} checksums at step {}: the recording is incomplete", label, phase, s));
          if (first == nullptr) first = &it->second;
          if (it->second != *first) {
            std::string odd;
            for (const std::string& n : *first)
              if (!it->second.contains(n)) odd = "lacks " + n + ", which other steps record";
            for (const std::string& n : it->second)
              if (!first->contains(n) && odd.empty()) odd = "records " + n + ", which other steps lack";
            return refuse(fmt::format("{}: step {} {} checksums {}", label, s, phase, odd));
          }
        }
    }
    return batches_complete();
  }

  // Every micro-batch of every step: its ids in exactly one token file and its loss from exactly one rank.
  Status batches_complete() {
    const RecordingContract& c = r.contract_;
    for (int64_t s = 0; s < c.steps; ++s) {
      std::map<int64_t, int> tokens, losses;
      for (int rank = 0; rank < c.world; ++rank) {
        const StepRecord& st = r.ranks_[static_cast<size_t>(rank)].steps[static_cast<size_t>(s)];
        if (!st.tokens.empty() && !path_exists(r.path(recording_tokens_file(rank, s))))
          return refuse(fmt::format("{}: rank {} recorded micro-batches of step {}, but not their ids",
                                    recording_tokens_file(rank, s), rank, s));
        for (int64_t i : st.tokens)
          if (auto [it, added] = tokens.emplace(i, rank); !added || i < 0 || i >= c.micro_batches)
            return refuse(
                fmt::format("step {}: micro-batch {} has tokens from rank {} and rank {} (or is out of "
                            "[0, {}))",
                            s, i, it->second, rank, c.micro_batches));
        for (const LossRecord& l : st.losses)
          if (auto [it, added] = losses.emplace(l.index, rank); !added || l.index < 0 || l.index >= c.micro_batches)
            return refuse(
                fmt::format("step {}: micro-batch {} has a loss from rank {} and rank {} (or is out of "
                            "[0, {}))",
                            s, l.index, it->second, rank, c.micro_batches));
      }
      if (static_cast<int64_t>(tokens.size()) != c.micro_batches ||
          static_cast<int64_t>(losses.size()) != c.micro_batches)
        return refuse(
            fmt::format("step {}: {} of {} micro-batches have recorded tokens and {} a loss: the recording "
                        "is incomplete",
                        s, tokens.size(), c.micro_batches, losses.size()));
    }
    return Status();
  }
};

Result<Recording> Recording::open(const std::string& given) {
  std::error_code ec;
  if (!fs::is_directory(given, ec))
    return invalid_argument("'{}' is not a directory", given)
        .with_hint("pass the directory a run recorded into with shardproof_torch.Recorder");
  Recording rec;
  rec.dir_ = fs::weakly_canonical(fs::absolute(given), ec).string();
  RecordingReader reader{rec};
  SP_RETURN_IF_ERROR(reader.contract());
  rec.weights_ = model::weight_table(rec.contract_.model.model);
  SP_RETURN_IF_ERROR(reader.topology());
  SP_RETURN_IF_ERROR(reader.seals());
  SP_RETURN_IF_ERROR(reader.records());
  SP_RETURN_IF_ERROR(reader.completeness());
  return rec;
}

std::vector<Recording::TokenPiece> Recording::token_pieces(int64_t step) const {
  std::vector<TokenPiece> out;
  for (int rank = 0; rank < contract_.world; ++rank) {
    const StepRecord& st = ranks_[static_cast<size_t>(rank)].steps[static_cast<size_t>(step)];
    if (!st.tokens.empty()) out.push_back({rank, recording_tokens_file(rank, step), st.tokens});
  }
  return out;
}

std::vector<std::pair<LossRecord, int>> Recording::losses(int64_t step) const {
  std::vector<std::pair<LossRecord, int>> out;
  for (int rank = 0; rank < contract_.world; ++rank)
    for (const LossRecord& l : ranks_[static_cast<size_t>(rank)].steps[static_cast<size_t>(step)].losses)
      out.push_back({l, rank});
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first.index < b.first.index; });
  return out;
}

}  // namespace sp::judge
