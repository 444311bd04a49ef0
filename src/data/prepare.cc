#include "data/prepare.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/bpe_train.h"
#include "data/contamination.h"
#include "data/lineage.h"
#include "data/sources.h"
#include "data/text_units.h"
#include "data/tokenizer.h"

namespace sp::data {
namespace {

constexpr uint64_t kMaxCorpusFileBytes = uint64_t{1} << 32;

std::string path_in(const std::string& dir, std::string_view file) {
  return (std::filesystem::path(dir) / file).string();
}

// Cuts a split's token stream into shard files; returns their manifest entries.
Result<std::vector<ShardEntry>> write_shards(const std::string& dir, Split split, const std::vector<uint32_t>& stream,
                                             const PrepareOptions& opt) {
  std::vector<ShardEntry> entries;
  const uint32_t dtype = shard_dtype_bytes(opt.vocab_size);
  for (size_t begin = 0, index = 0; begin < stream.size(); ++index) {
    const size_t end = std::min(stream.size(), begin + static_cast<size_t>(opt.shard_tokens));
    const std::span<const uint32_t> part(stream.data() + begin, end - begin);
    ShardHeader h;
    h.dtype_bytes = dtype;
    h.split = split == Split::kTrain ? 0 : 1;
    h.vocab_size = static_cast<uint64_t>(opt.vocab_size);
    h.num_tokens = part.size();
    h.num_documents = static_cast<uint64_t>(std::count(part.begin(), part.end(), kEndOfTextId));
    h.shard_index = index;
    const std::string bytes = shard_encode(h, part);
    ShardEntry e;
    e.file = fmt::format("{}-{:05d}.bin", split_name(split), index);
    e.bytes = static_cast<int64_t>(bytes.size());
    e.num_tokens = static_cast<int64_t>(h.num_tokens);
    e.num_documents = static_cast<int64_t>(h.num_documents);
    e.sha256 = sha256_hex(bytes);
    SP_RETURN_IF_ERROR(write_file(path_in(dir, e.file), bytes));
    entries.push_back(std::move(e));
    begin = end;
  }
  return entries;
}

nlohmann::ordered_json shards_json(const std::vector<ShardEntry>& shards) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const ShardEntry& e : shards)
    a.push_back({{"file", e.file},
                 {"bytes", e.bytes},
                 {"num_tokens", e.num_tokens},
                 {"num_documents", e.num_documents},
                 {"sha256", e.sha256}});
  return a;
}

nlohmann::ordered_json split_json(const std::vector<ShardEntry>& shards) {
  int64_t tokens = 0, docs = 0;
  for (const ShardEntry& e : shards) tokens += e.num_tokens, docs += e.num_documents;
  return {{"num_tokens", tokens}, {"num_documents", docs}, {"shards", shards_json(shards)}};
}

}  // namespace

Status validate_prepare_options(const PrepareOptions& o) {
  SP_RETURN_IF_ERROR(validate_vocab_size(o.vocab_size));
  if (!(o.eval_fraction > 0.0 && o.eval_fraction < 1.0))
    return invalid_argument("eval_fraction {} must be in (0, 1)", o.eval_fraction).with_hint("the default is 0.05");
  if (o.contamination_ngram < 1 || o.contamination_ngram > 64)
    return invalid_argument("contamination n-gram {} must be in [1, 64]", o.contamination_ngram);
  if (o.filter.min_units < o.contamination_ngram)
    return invalid_argument(
        "min_units {} is below the contamination n-gram {}: short eval documents could not be checked",
        o.filter.min_units, o.contamination_ngram);
  if (!(o.filter.boilerplate_line_share > 0.0 && o.filter.boilerplate_line_share <= 1.0))
    return invalid_argument("boilerplate line share {} must be in (0, 1]", o.filter.boilerplate_line_share);
  if (!(o.filter.max_control_share >= 0.0 && o.filter.max_control_share < 1.0))
    return invalid_argument("max control share {} must be in [0, 1)", o.filter.max_control_share);
  if (o.minhash.shingle < 1 || o.minhash.bands < 1 || o.minhash.rows < 1 || o.minhash.bands * o.minhash.rows > 1024)
    return invalid_argument("MinHash needs shingle ≥ 1, bands ≥ 1, rows ≥ 1 and bands·rows ≤ 1024 (got {}, {}, {})",
                            o.minhash.shingle, o.minhash.bands, o.minhash.rows);
  if (!(o.minhash.threshold > 0.0 && o.minhash.threshold <= 1.0))
    return invalid_argument("Jaccard threshold {} must be in (0, 1]", o.minhash.threshold);
  if (o.shard_tokens < 1) return invalid_argument("shard_tokens {} must be ≥ 1", o.shard_tokens);
  return Status();
}

nlohmann::ordered_json prepare_options_json(const PrepareOptions& o) {
  return {{"vocab_size", o.vocab_size},
          {"eval_fraction", o.eval_fraction},
          {"seed", o.seed},
          {"min_units", o.filter.min_units},
          {"boilerplate_line_share", o.filter.boilerplate_line_share},
          {"max_control_share", o.filter.max_control_share},
          {"shingle_units", o.minhash.shingle},
          {"lsh_bands", o.minhash.bands},
          {"lsh_rows", o.minhash.rows},
          {"jaccard_threshold", o.minhash.threshold},
          {"minhash_seed", o.minhash.seed},
          {"contamination_ngram", o.contamination_ngram},
          {"shard_tokens", o.shard_tokens}};
}

nlohmann::ordered_json summary_to_json(const PrepareSummary& s) {
  return {{"dir", s.dir},
          {"cache_hit", s.cache_hit},
          {"documents", s.documents},
          {"train_documents", s.train_documents},
          {"eval_documents", s.eval_documents},
          {"dropped_documents", s.dropped_documents},
          {"eval_contaminated", s.eval_contaminated},
          {"train_tokens", s.train_tokens},
          {"eval_tokens", s.eval_tokens},
          {"tokenizer_sha256", s.tokenizer_sha256},
          {"identity", identity_to_json(s.identity)}};
}

Result<PrepareSummary> prepare(const PrepareOptions& opt, const std::string& out_dir) {
  SP_RETURN_IF_ERROR(validate_prepare_options(opt));
  std::error_code ec;
  if (std::filesystem::exists(out_dir, ec) && !std::filesystem::is_empty(out_dir, ec))
    return failed_precondition("output directory '{}' is not empty", out_dir)
        .with_hint("choose a new --out directory, or remove this one");
  const Stopwatch total;
  SP_ASSIGN_OR_RETURN(const SourcesFile src, load_sources(opt.sources_file));

  // 1. Read every corpus file, check its SHA-256 against the sources file, cut it into documents.
  std::vector<std::string> files(src.sources.size());
  std::vector<std::string> file_sha(src.sources.size());
  std::vector<DocRecord> docs;
  for (size_t s = 0; s < src.sources.size(); ++s) {
    const SourceSpec& spec = src.sources[s];
    auto bytes = read_file(spec.resolved_path, kMaxCorpusFileBytes);
    if (!bytes.ok()) return bytes.status().with_context(fmt::format("source '{}' listed in '{}'", spec.id, src.path));
    files[s] = std::move(bytes).value();
    file_sha[s] = sha256_hex(files[s]);
    if (!spec.sha256.empty() && spec.sha256 != file_sha[s])
      return corrupt("corpus file '{}' (source '{}') has SHA-256 {} but '{}' records {}", spec.resolved_path, spec.id,
                     file_sha[s], src.path, spec.sha256)
          .with_hint("restore the file, or update its sha256 in the sources file if the change is intended");
    const auto spans = split_documents(files[s], spec.format);
    if (spans.empty())  // nothing to learn from: named with its size, before any filter runs
      return failed_precondition("corpus file '{}' (source '{}' of '{}') holds no document: {} bytes{}",
                                 spec.resolved_path, spec.id, src.path, files[s].size(),
                                 files[s].empty() ? "" : ", only separators and blank lines")
          .with_hint("give the source some text, or remove it from the sources file");
    for (size_t i = 0; i < spans.size(); ++i) {
      DocRecord d;
      d.source = static_cast<uint32_t>(s);
      d.index = static_cast<int64_t>(i);
      d.offset = spans[i].offset;
      d.bytes = spans[i].size;
      d.id = fmt::format("{}/{:06d}", spec.id, i);
      docs.push_back(std::move(d));
    }
  }
  log_info("data prepare: {} documents from {} sources", docs.size(), src.sources.size());

  // 2. Quality filters, then PII scrubbing and units of the documents that pass.
  std::vector<uint64_t> split_hash(docs.size(), 0);
  std::map<std::pair<uint64_t, uint64_t>, int64_t> first_of;  // exact-duplicate key → first ordinal
  for (size_t k = 0; k < docs.size(); ++k) {
    DocRecord& d = docs[k];
    const std::string_view raw =
        std::string_view(files[d.source]).substr(static_cast<size_t>(d.offset), static_cast<size_t>(d.bytes));
    d.quality = quality_check(raw, opt.filter);
    switch (d.quality.reason) {
      case FilterReason::kBinary:
        d.drop = DropReason::kBinary;
        continue;
      case FilterReason::kInvalidUtf8:
        d.drop = DropReason::kInvalidUtf8;
        continue;
      case FilterReason::kTooShort:
        d.drop = DropReason::kTooShort;
        continue;
      case FilterReason::kBoilerplate:
        d.drop = DropReason::kBoilerplate;
        continue;
      case FilterReason::kNone:
        break;
    }
    d.text = scrub_pii(raw, &d.pii);
    const std::string norm = normalize_text(d.text);
    split_hash[k] = xxh3_64(norm, opt.seed);
    // 3. Exact duplicates: same normalized text; the first in corpus order is kept.
    const Digest128 key = xxh3_128(norm.data(), norm.size());
    const auto [it, inserted] = first_of.emplace(std::make_pair(key.hi, key.lo), static_cast<int64_t>(k));
    if (!inserted) {
      d.drop = DropReason::kExactDuplicate;
      d.exact_duplicate_of = it->second;
      continue;
    }
    d.units = text_units(d.text);
  }

  // 4. Near duplicates among the remaining documents.
  std::vector<size_t> live;
  for (size_t k = 0; k < docs.size(); ++k)
    if (docs[k].drop == DropReason::kNone) live.push_back(k);
  std::vector<std::vector<uint64_t>> shingles(live.size());
  for (size_t i = 0; i < live.size(); ++i) shingles[i] = shingle_set(docs[live[i]].units, opt.minhash.shingle);
  const NearDupResult near = near_duplicates(shingles, opt.minhash);
  std::vector<int64_t> cluster_size(live.size(), 0);
  for (size_t i = 0; i < live.size(); ++i) ++cluster_size[static_cast<size_t>(near.representative[i])];
  int64_t near_removed = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    const size_t rep = static_cast<size_t>(near.representative[i]);
    if (cluster_size[rep] < 2) continue;
    DocRecord& d = docs[live[i]];
    d.cluster = static_cast<int64_t>(live[rep]);
    d.cluster_size = cluster_size[rep];
    if (rep != i) {
      d.drop = DropReason::kNearDuplicate;
      d.cluster_jaccard = jaccard(shingles[i], shingles[rep]);
      ++near_removed;
    }
  }
  shingles.clear();

  // 5. Split by a stable hash of the normalized text, 6. remove contaminated eval documents.
  NgramIndex index(opt.contamination_ngram);
  for (size_t k = 0; k < docs.size(); ++k) {
    DocRecord& d = docs[k];
    if (d.drop != DropReason::kNone) continue;
    d.split_u = static_cast<double>(split_hash[k] >> 11) * 0x1.0p-53;
    d.split = d.split_u < opt.eval_fraction ? 1 : 0;
    if (d.split == 0) index.add(d.units);
  }
  index.finalize();
  int64_t eval_checked = 0, contaminated = 0;
  for (DocRecord& d : docs) {
    if (d.drop != DropReason::kNone || d.split != 1) continue;
    d.contamination_checked = true;
    d.overlap = index.overlap(d.units);
    ++eval_checked;
    if (d.overlap.overlapping > 0) {
      d.drop = DropReason::kContaminated;
      d.split = -1;
      ++contaminated;
    }
  }
  log_info("data prepare: filters, dedup, split and contamination check done in {:.2f} s", total.seconds());

  // 7. The tokenizer, trained on the train split only.
  BpeTrainer trainer;
  int64_t train_docs = 0, train_bytes = 0;
  for (const DocRecord& d : docs)
    if (d.drop == DropReason::kNone && d.split == 0)
      trainer.add_text(d.text), ++train_docs, train_bytes += static_cast<int64_t>(d.text.size());
  if (train_docs == 0) {
    std::map<std::string, int64_t> dropped;  // why, for the message (lineage.jsonl has every document's reason)
    for (const DocRecord& d : docs)
      ++dropped[d.split == 1 ? std::string("the eval split") : std::string(drop_reason_name(d.drop))];
    std::string why;
    for (const auto& [reason, n] : dropped) why += fmt::format("{}{} to {}", why.empty() ? "" : ", ", n, reason);
    return failed_precondition("no document of '{}' is left for the train split after filtering ({} documents: {})",
                               src.path, docs.size(), why)
        .with_hint("see lineage.jsonl reasons; add text or relax the filters");
  }
  BpeTrainStats stats;
  SP_ASSIGN_OR_RETURN(const Tokenizer tok, trainer.train(opt.vocab_size, &stats));
  const std::string tok_json = tok.to_json();
  const std::string tok_sha = sha256_hex(tok_json);
  log_info("data prepare: tokenizer with {} merges trained at {:.2f} s", stats.merges, total.seconds());

  // 8. Token streams (each document followed by <|endoftext|>), shards, manifest, lineage.
  std::vector<uint32_t> stream[2];
  for (DocRecord& d : docs) {
    if (d.drop != DropReason::kNone) continue;
    std::vector<uint32_t>& s = stream[d.split];
    const size_t before = s.size();
    tok.encode_append(d.text, s);
    s.push_back(kEndOfTextId);
    d.tokens = static_cast<int64_t>(s.size() - before);
  }
  SP_RETURN_IF_ERROR(make_directories(out_dir));
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, "tokenizer.json"), tok_json));
  SP_ASSIGN_OR_RETURN(const auto train_shards, write_shards(out_dir, Split::kTrain, stream[0], opt));
  SP_ASSIGN_OR_RETURN(const auto eval_shards, write_shards(out_dir, Split::kEval, stream[1], opt));

  DatasetIdentity id;
  id.vocab_size = opt.vocab_size;
  id.tokenizer_sha256 = tok_sha;
  id.shards_sha256 = shards_digest(train_shards, eval_shards);
  {
    Sha256 h;
    const std::string head = fmt::format("sources {}\n", src.sha256);
    h.update(head.data(), head.size());
    for (size_t s = 0; s < src.sources.size(); ++s) {
      const std::string line = fmt::format("{} {}\n", src.sources[s].id, file_sha[s]);
      h.update(line.data(), line.size());
    }
    id.corpus_sha256 = h.hex_digest();
  }
  {
    Sha256 h;
    for (const DocRecord& d : docs)
      if (d.drop == DropReason::kNone) {
        const std::string line = fmt::format("{} {}\n", d.id, d.split == 0 ? "train" : "eval");
        h.update(line.data(), line.size());
      }
    id.split_sha256 = h.hex_digest();
  }

  std::string jsonl;
  for (const DocRecord& d : docs) jsonl += lineage_record(d, docs, src, opt.contamination_ngram).dump() + "\n";
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, "lineage.jsonl"), jsonl));

  nlohmann::ordered_json lin;
  lin["format"] = "shardproof-lineage";
  lin["version"] = 1;
  lin["pipeline_version"] = kPipelineVersion;
  lin["sources_file"] = {{"path", src.path}, {"sha256", src.sha256}};
  lin["options"] = prepare_options_json(opt);
  lin.update(lineage_totals(docs, src));
  for (size_t s = 0; s < src.sources.size(); ++s) lin["sources"][src.sources[s].id]["sha256"] = file_sha[s];
  int64_t exact_groups = 0, exact_removed = 0;
  {
    std::map<int64_t, int64_t> groups;
    for (const DocRecord& d : docs)
      if (d.drop == DropReason::kExactDuplicate) ++groups[d.exact_duplicate_of], ++exact_removed;
    exact_groups = static_cast<int64_t>(groups.size());
  }
  lin["dedup"] = {{"exact_duplicate_groups", exact_groups},
                  {"exact_duplicates_removed", exact_removed},
                  {"near_duplicate_clusters", near.clusters},
                  {"near_duplicates_removed", near_removed},
                  {"lsh_candidate_pairs", near.candidate_pairs},
                  {"similar_pairs", near.similar_pairs},
                  {"jaccard_threshold", opt.minhash.threshold},
                  {"lsh_bands", opt.minhash.bands},
                  {"lsh_rows", opt.minhash.rows},
                  {"shingle_units", opt.minhash.shingle}};
  lin["contamination"] = {{"ngram", opt.contamination_ngram}, {"train_ngrams", index.size()},
                          {"eval_checked", eval_checked},     {"eval_contaminated", contaminated},
                          {"eval_removed", contaminated},     {"eval_kept", eval_checked - contaminated}};
  lin["tokenizer"] = {{"file", "tokenizer.json"},
                      {"sha256", tok_sha},
                      {"vocab_size", tok.vocab_size()},
                      {"merges", stats.merges},
                      {"trained_on_documents", train_docs},
                      {"trained_on_bytes", train_bytes},
                      {"unique_pieces", stats.unique_pieces}};
  lin["shards"] = {{"train", shards_json(train_shards)}, {"eval", shards_json(eval_shards)}};
  lin["identity"] = identity_to_json(id);
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, "lineage.json"), lin.dump(2) + "\n"));

  nlohmann::ordered_json man;
  man["format"] = kManifestFormat;
  man["version"] = 1;
  man["pipeline_version"] = kPipelineVersion;
  man["vocab_size"] = opt.vocab_size;
  man["dtype"] = shard_dtype_bytes(opt.vocab_size) == 2 ? "uint16" : "uint32";
  man["eot_id"] = kEndOfTextId;
  man["tokenizer"] = {{"file", "tokenizer.json"}, {"sha256", tok_sha}};
  man["identity"] = identity_to_json(id);
  man["splits"] = {{"train", split_json(train_shards)}, {"eval", split_json(eval_shards)}};
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, kManifestFile), man.dump(2) + "\n"));  // last: marks completion
  SP_RETURN_IF_ERROR(fsync_directory(out_dir));

  PrepareSummary sum;
  sum.dir = out_dir;
  sum.tokenizer_sha256 = tok_sha;
  sum.identity = id;
  sum.documents = static_cast<int64_t>(docs.size());
  for (const DocRecord& d : docs) {
    if (d.drop != DropReason::kNone)
      ++sum.dropped_documents;
    else
      (d.split == 0 ? sum.train_documents : sum.eval_documents) += 1;
  }
  sum.eval_contaminated = contaminated;
  sum.train_tokens = static_cast<int64_t>(stream[0].size());
  sum.eval_tokens = static_cast<int64_t>(stream[1].size());
  log_info("data prepare: wrote '{}' ({} train / {} eval tokens) in {:.2f} s", out_dir, sum.train_tokens,
           sum.eval_tokens, total.seconds());
  return sum;
}

}  // namespace sp::data
