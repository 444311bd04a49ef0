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

std::string recording_rank_file(std::string_view dir, int rank, std::string_view ext) {
  return fmt::format("{}/rank-{:05d}.{}", dir, rank, ext);
}
std::string recording_tokens_file(int rank, int64_t step) {
  return fmt::format("{}/rank-{:05d}/step-{:06d}.bin", kTokensDir, rank, step);
}
std::string recording_step_file(std::string_view dir, int64_t step, int rank) {
  return fmt::format("{}/step-{:06d}/rank-{:05d}.safetensors", dir, step, rank);
}
std::string judge_file(std::string_view name) { return fmt::format("{}/{}", kJudgeDir, name); }
config::RunConfig RecordingContract::single_device_config() const {
  config::RunConfig rc;
  rc.model = model.model;
  rc.data.vocab_size = model.model.vocab_size;
  rc.train.micro_batch_size = strategy.micro_batch_size;
  rc.train.global_batch = strategy.micro_batch_size * micro_batches;
  rc.train.seq_len = seq_len;
  rc.train.steps = steps;
  rc.train.eval_batches = 0;
  if (param_bf16) rc.train.precision.compute = DType::kBF16;  // FSDP2's bf16 gathers, the engine's bf16
  return rc;
}

std::string Recording::path(std::string_view rel) const { return dir_ + "/" + std::string(rel); }
std::string Recording::anchor_file(int64_t step, int rank) const {
  return recording_step_file(kAnchorsDir, step, rank);
}
std::string Recording::grads_file(int64_t step, int rank) const { return recording_step_file(kGradsDir, step, rank); }
std::string Recording::state_file(int64_t step, int rank) const { return recording_step_file(kStateDir, step, rank); }
bool Recording::present(std::string_view rel) const { return path_exists(path(rel)); }

struct RecordingReader {
  Recording& r;

  Status refuse(const std::string& what) const {
    return invalid_argument("recording '{}' refused: {}", r.dir_, what)
        .with_hint("judge only what a run recorded in full: rerun it (or resume it) with the recorder to the end");
  }
  Status refuse(const Status& s) const {
    return invalid_argument("recording '{}' refused: {}", r.dir_, s.message()).with_hint(s.hint());
  }

  // A directory that is another kind of bundle says what to run instead.
  Status kind() {
    if (path_exists(r.path("prove.json")))
      return invalid_argument("'{}' is a proof bundle (prove.json), not a PyTorch recording", r.dir_)
          .with_hint(fmt::format("check it with `shardproof verify {}`; `judge` reads what "
                                 "python/shardproof_torch's Recorder wrote",
                                 r.dir_));
    auto doc = read_json_file(r.path(std::string(kContractName)));
    if (doc.ok() && doc->is_object() && !doc->contains("format") && doc->contains("engine"))
      return invalid_argument(
                 "'{}' is a run of the engine (its contract.json is `shardproof train`'s), not a PyTorch "
                 "recording",
                 r.dir_)
          .with_hint(fmt::format("check it with `shardproof verify {}` or draw it with `shardproof report {}`; "
                                 "`judge` reads what python/shardproof_torch's Recorder wrote",
                                 r.dir_, r.dir_));
    return Status();
  }

  Status contract() {
    const std::string label = std::string(kContractName);
    if (Status s = no_link(label); !s.ok()) return s;
    auto doc = read_json_file(r.path(label));
    if (!doc.ok()) return refuse(doc.status().message());
    auto c = parse_recording_contract(*doc, label);
    if (!c.ok()) return refuse(c.status());
    r.contract_ = std::move(c).value();
    return Status();
  }

  // A recording holds its own files: a symbolic link (to anything) is refused, naming the link.
  Status no_link(const std::string& rel) const {
    std::error_code ec;
    if (!fs::is_symlink(r.path(rel), ec)) return Status();
    return invalid_argument("recording '{}' refused: {} is a symbolic link (to {}): a recording holds its own files",
                            r.dir_, rel, fs::read_symlink(r.path(rel), ec).string())
        .with_hint("copy the file the link points to in its place, if it is the one the recorder wrote");
  }

  // Files a judge following the run judged and then discarded: judge/consumed.jsonl, {"file", "sha256"} each.
  Status consumed() {
    const std::string label = judge_file("consumed.jsonl");
    if (!path_exists(r.path(label))) return Status();
    auto doc = read_jsonl_file(r.path(label));
    if (!doc.ok()) return refuse(doc.status().message());
    for (size_t i = 0; i < doc->records.size(); ++i) {
      const JsonFields f(doc->records[i], fmt::format("{}:{}", label, doc->line_numbers[i]), "record");
      SP_RETURN_IF_ERROR(f.expect_keys({"file", "sha256"}));
      SP_ASSIGN_OR_RETURN(const std::string file, f.string("file"));
      SP_ASSIGN_OR_RETURN(const std::string sha, f.sha256("sha256"));
      r.consumed_[file] = sha;
    }
    return Status();
  }

  // Every trace file ends with a whole record: one cut mid-line was not finished by its recorder.
  Status traces_whole() {
    for (int rank = 0; rank < r.contract_.world; ++rank) {
      const std::string rel = recording_rank_file("trace", rank, "jsonl");
      auto bytes = read_file(r.path(rel));
      if (!bytes.ok() && r.contract_.flight_recorder_trace)
        return refuse(
            fmt::format("{} is missing: the run is traced by PyTorch's Flight Recorder and its dumps were "
                        "not converted (hint: python -m shardproof_torch.flight_recorder {})",
                        rel, r.dir_));
      if (!bytes.ok()) continue;  // a missing trace is the trace check's finding (collectives)
      if (!bytes->empty() && bytes->back() != '\n') {
        const size_t last = bytes->rfind('\n');
        return refuse(
            fmt::format("{} ends mid-line ({} bytes after its last newline): the trace was cut, not "
                        "finished by its recorder",
                        rel, bytes->size() - (last == std::string::npos ? 0 : last + 1)));
      }
    }
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
      auto parsed = parse_seal(*doc, label, rank);
      if (!parsed.ok()) return refuse(parsed.status().message());
      const auto& listed = *parsed;
      for (const auto& [file, entry] : listed) {
        if (auto [it, added] = sealed.emplace(file, rank); !added)
          return refuse(fmt::format("{} is sealed by rank {} and by rank {}", file, it->second, rank));
        const std::string p = r.path(file);
        std::error_code ec;
        SP_RETURN_IF_ERROR(no_link(file));
        if (!fs::exists(p, ec) && r.consumed_.count(file)) {
          if (r.consumed_.at(file) != entry.second)
            return refuse(fmt::format("{}: judged and discarded with SHA-256 {} ({}), but its seal ({}) says {}", file,
                                      r.consumed_.at(file), judge_file("consumed.jsonl"), label, entry.second));
          continue;
        }
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
      const std::string rel = fs::relative(it->path(), r.dir_).string();
      if (rel == kJudgeDir) {  // the judge's own folder: never the recorder's
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_symlink()) SP_RETURN_IF_ERROR(no_link(rel));
      if (!it->is_regular_file()) continue;
      if (rel.rfind(std::string(kRecordingSealDir) + "/", 0) == 0) continue;
      if (!r.contract_.every_step() &&
          std::find(kLegacyJudgeFiles.begin(), kLegacyJudgeFiles.end(), rel) != kLegacyJudgeFiles.end())
        continue;
      if (sealed.contains(rel)) continue;
      // A file in the recorder's namespace that no seal lists was added; anything else is the user's own (never
      // read, never overwritten: the judge writes under judge/ only).
      const std::string top = rel.substr(0, rel.find('/'));
      if (rel.find('/') == std::string::npos
              ? (rel == kContractName || rel == "topology.json")
              : std::find(kRecorderDirs.begin(), kRecorderDirs.end(), top) != kRecorderDirs.end())
        return refuse(fmt::format("{} is in no rank's seal: added after the run", rel));
      r.foreign_.push_back(rel);
    }
    // Format 2: the steps with a state file (every segment's first), from the sealed names.
    for (const auto& [file, rank] : sealed)
      if (file.rfind(std::string(kStateDir) + "/step-", 0) == 0) {
        const int64_t step = std::strtoll(file.c_str() + kStateDir.size() + 6, nullptr, 10);
        if (std::find(r.state_steps_.begin(), r.state_steps_.end(), step) == r.state_steps_.end())
          r.state_steps_.push_back(step);
      }
    std::sort(r.state_steps_.begin(), r.state_steps_.end());
    r.files_sealed_ = static_cast<int>(sealed.size());
    return Status();
  }

  Status records() {
    r.ranks_.resize(static_cast<size_t>(r.contract_.world));
    const ShapeMap shapes = shape_map(r.weights_);
    for (int rank = 0; rank < r.contract_.world; ++rank) {
      const std::string label = recording_rank_file(kRecordsDir, rank, "jsonl");
      auto doc = read_jsonl_file(r.path(label));
      if (!doc.ok()) return refuse(doc.status().message());
      for (size_t i = 0; i < doc->records.size(); ++i) {
        const std::string where = fmt::format("{}:{}", label, doc->line_numbers[i]);
        if (Status s = parse_rank_record(doc->records[i], where, rank, doc->line_numbers[i], r.contract_.format_version,
                                         shapes, r.ranks_[rank]);
            !s.ok())
          return s.hint().empty() ? refuse(s.message()) : refuse(s);
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
      for (const StepRecord& st : rr.steps)
        if (st.scaler.has_value() != c.grad_scaler.has_value())
          return refuse(
              fmt::format("{}:{}: step {} {} a \"scaler\" record; contract.json's precision.grad_scaler is "
                          "{}: every step of a run with a GradScaler records it, no other does",
                          label, st.line, st.step, st.scaler ? "has" : "lacks", c.grad_scaler ? "declared" : "false"));
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
  // As given (made absolute, not resolved): messages name what the user named, links included.
  rec.dir_ = fs::absolute(given, ec).lexically_normal().string();
  if (rec.dir_.size() > 1 && rec.dir_.back() == '/') rec.dir_.pop_back();
  RecordingReader reader{rec};
  SP_RETURN_IF_ERROR(reader.kind());
  SP_RETURN_IF_ERROR(reader.contract());
  rec.weights_ = model::weight_table(rec.contract_.model.model);
  SP_RETURN_IF_ERROR(reader.topology());
  SP_RETURN_IF_ERROR(reader.consumed());
  SP_RETURN_IF_ERROR(reader.seals());
  SP_RETURN_IF_ERROR(reader.traces_whole());
  SP_RETURN_IF_ERROR(reader.records());
  SP_RETURN_IF_ERROR(reader.completeness());
  return rec;
}

Result<Recording> Recording::follow(const std::string& given) {
  std::error_code ec;
  if (!fs::is_directory(given, ec))
    return invalid_argument("'{}' is not a directory", given)
        .with_hint("pass the directory the run records into (shardproof_torch.Recorder's out)");
  Recording rec;
  rec.dir_ = fs::absolute(given, ec).lexically_normal().string();
  if (rec.dir_.size() > 1 && rec.dir_.back() == '/') rec.dir_.pop_back();
  RecordingReader reader{rec};
  SP_RETURN_IF_ERROR(reader.kind());
  SP_RETURN_IF_ERROR(reader.contract());
  if (!rec.contract_.every_step())
    return invalid_argument("recording '{}': format 1 (anchors) cannot be followed", rec.dir_)
        .with_hint("judge it when it is finished: shardproof judge DIR");
  rec.weights_ = model::weight_table(rec.contract_.model.model);
  SP_RETURN_IF_ERROR(reader.topology());
  rec.ranks_.resize(static_cast<size_t>(rec.contract_.world));
  return rec;
}

Result<int64_t> Recording::refresh() {
  int64_t complete = contract_.steps;
  const ShapeMap shapes = shape_map(weights_);
  for (int rank = 0; rank < contract_.world; ++rank) {
    const std::string label = recording_rank_file(kRecordsDir, rank, "jsonl");
    RankRecords rr;
    if (path_exists(path(label))) {
      // A rank still writing: its last line may be half written (the recorder appends whole records).
      auto doc = read_jsonl_file(path(label), TornTail::kAllow);
      if (!doc.ok()) return doc.status();
      for (size_t i = 0; i < doc->records.size(); ++i) {
        const std::string where = fmt::format("{}:{}", label, doc->line_numbers[i]);
        SP_RETURN_IF_ERROR(parse_rank_record(doc->records[i], where, rank, doc->line_numbers[i],
                                             contract_.format_version, shapes, rr));
      }
    }
    std::sort(rr.steps.begin(), rr.steps.end(), [](auto& a, auto& b) { return a.step < b.step; });
    int64_t n = 0;
    while (n < static_cast<int64_t>(rr.steps.size()) && rr.steps[static_cast<size_t>(n)].step == n) ++n;
    complete = std::min(complete, n);
    ranks_[static_cast<size_t>(rank)] = std::move(rr);
  }
  return complete;
}

bool Recording::sealed() const {
  for (int rank = 0; rank < contract_.world; ++rank)
    if (!path_exists(path(recording_rank_file(kRecordingSealDir, rank, "json")))) return false;
  return true;
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
