#include "data/prepare.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/bpe_train.h"
#include "data/prepare_steps.h"
#include "data/tokenizer.h"

namespace sp::data {
namespace {

std::string path_in(const std::string& dir, std::string_view file) {
  return (std::filesystem::path(dir) / file).string();
}

// Cuts a split's token stream into shard files; returns their manifest entries.
Result<std::vector<ShardEntry>> write_shards(const std::string& dir, Split split, const std::vector<uint32_t>& stream,
                                             const PrepareOptions& opt, uint32_t eot) {
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
    h.num_documents = static_cast<uint64_t>(std::count(part.begin(), part.end(), eot));
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

// The dataset identity: corpus (sources file and every corpus file), tokenizer, split and shards.
DatasetIdentity dataset_identity(const Corpus& c, const PrepareOptions& opt, const PreparedTokenizer& tok,
                                 const std::vector<ShardEntry>& train, const std::vector<ShardEntry>& eval) {
  DatasetIdentity id;
  id.vocab_size = opt.vocab_size;
  id.tokenizer_sha256 = tok.sha256;
  id.shards_sha256 = shards_digest(train, eval);
  Sha256 corpus;
  const std::string head = fmt::format("sources {}\n", c.src.sha256);
  corpus.update(head.data(), head.size());
  for (size_t s = 0; s < c.src.sources.size(); ++s) {
    const std::string line = fmt::format("{} {}\n", c.src.sources[s].id, c.file_sha[s]);
    corpus.update(line.data(), line.size());
  }
  id.corpus_sha256 = corpus.hex_digest();
  Sha256 split;
  for (const DocRecord& d : c.docs)
    if (d.drop == DropReason::kNone) {
      const std::string line = fmt::format("{} {}\n", d.id, d.split == 0 ? "train" : "eval");
      split.update(line.data(), line.size());
    }
  id.split_sha256 = split.hex_digest();
  return id;
}

nlohmann::ordered_json lineage_json(const Corpus& c, const PrepareOptions& opt, const CorpusDecisions& k,
                                    const PreparedTokenizer& tok, const std::vector<ShardEntry>& train,
                                    const std::vector<ShardEntry>& eval, const DatasetIdentity& id) {
  nlohmann::ordered_json lin;
  lin["format"] = "shardproof-lineage";
  lin["version"] = 1;
  lin["pipeline_version"] = kPipelineVersion;
  lin["sources_file"] = {{"path", c.src.path}, {"sha256", c.src.sha256}};
  lin["options"] = prepare_options_json(opt);
  lin.update(lineage_totals(c.docs, c.src));
  for (size_t s = 0; s < c.src.sources.size(); ++s) lin["sources"][c.src.sources[s].id]["sha256"] = c.file_sha[s];
  std::map<int64_t, int64_t> groups;
  int64_t exact_removed = 0;
  for (const DocRecord& d : c.docs)
    if (d.drop == DropReason::kExactDuplicate) ++groups[d.exact_duplicate_of], ++exact_removed;
  lin["dedup"] = {{"exact_duplicate_groups", static_cast<int64_t>(groups.size())},
                  {"exact_duplicates_removed", exact_removed},
                  {"near_duplicate_clusters", k.near.clusters},
                  {"near_duplicates_removed", k.near_removed},
                  {"lsh_candidate_pairs", k.near.candidate_pairs},
                  {"similar_pairs", k.near.similar_pairs},
                  {"jaccard_threshold", opt.minhash.threshold},
                  {"lsh_bands", opt.minhash.bands},
                  {"lsh_rows", opt.minhash.rows},
                  {"shingle_units", opt.minhash.shingle}};
  lin["contamination"] = {{"ngram", opt.contamination_ngram}, {"train_ngrams", k.train_ngrams},
                          {"eval_checked", k.eval_checked},   {"eval_contaminated", k.contaminated},
                          {"eval_removed", k.contaminated},   {"eval_kept", k.eval_checked - k.contaminated}};
  lin["tokenizer"] = tok.lineage;
  lin["shards"] = {{"train", shards_json(train)}, {"eval", shards_json(eval)}};
  lin["identity"] = identity_to_json(id);
  return lin;
}

nlohmann::ordered_json manifest_json(const PrepareOptions& opt, const PreparedTokenizer& tok,
                                     const std::vector<ShardEntry>& train, const std::vector<ShardEntry>& eval,
                                     const DatasetIdentity& id) {
  nlohmann::ordered_json man;
  man["format"] = kManifestFormat;
  man["version"] = 1;
  man["pipeline_version"] = kPipelineVersion;
  man["vocab_size"] = opt.vocab_size;
  man["dtype"] = shard_dtype_bytes(opt.vocab_size) == 2 ? "uint16" : "uint32";
  man["eot_id"] = tok.encoder->eos_id();
  man["tokenizer"] = {{"file", tok.file}, {"sha256", tok.sha256}};
  if (!opt.tokenizer_file.empty()) man["tokenizer"]["kind"] = tok.encoder->kind();
  man["identity"] = identity_to_json(id);
  man["splits"] = {{"train", split_json(train)}, {"eval", split_json(eval)}};
  return man;
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

namespace {
Status vocab_mismatch(const std::string& file, int64_t have, int64_t want) {
  if (have == want) return Status();
  return invalid_argument("tokenizer '{}' has {} tokens but the vocabulary size is {}", file, have, want)
      .with_hint(fmt::format("set data.vocab_size = {} (data prepare --vocab-size {}): the model's vocabulary is the "
                             "tokenizer's",
                             have, have));
}
}  // namespace

Status check_tokenizer_vocab(const std::string& tokenizer_file, int64_t vocab_size) {
  SP_ASSIGN_OR_RETURN(const TokenizerFile f, read_tokenizer_file(tokenizer_file));
  return vocab_mismatch(tokenizer_file, f.encoder->vocab_size(), vocab_size);
}

Result<PreparedTokenizer> make_tokenizer(const Corpus& c, const PrepareOptions& opt) {
  PreparedTokenizer t;
  if (!opt.tokenizer_file.empty()) {  // a user's tokenizer, as given
    SP_ASSIGN_OR_RETURN(TokenizerFile f, read_tokenizer_file(opt.tokenizer_file));
    SP_RETURN_IF_ERROR(vocab_mismatch(opt.tokenizer_file, f.encoder->vocab_size(), opt.vocab_size));
    t.file = f.encoder->kind() == "sentencepiece" ? "tokenizer.model" : "tokenizer.json";
    t.bytes = std::move(f.bytes);
    t.sha256 = sha256_hex(t.bytes);
    t.encoder = std::move(f.encoder);
    t.lineage = {{"file", t.file},
                 {"sha256", t.sha256},
                 {"kind", t.encoder->kind()},
                 {"given", std::filesystem::path(opt.tokenizer_file).filename().string()},
                 {"vocab_size", t.encoder->vocab_size()},
                 {"eos_id", t.encoder->eos_id()},
                 {"eos_token", t.encoder->eos_token()}};
    return t;
  }
  BpeTrainer trainer;  // the engine's BPE, trained on the train split only
  int64_t train_docs = 0, train_bytes = 0;
  for (const DocRecord& d : c.docs)
    if (d.drop == DropReason::kNone && d.split == 0)
      trainer.add_text(d.text), ++train_docs, train_bytes += static_cast<int64_t>(d.text.size());
  if (train_docs == 0) {
    std::map<std::string, int64_t> dropped;  // why, for the message (lineage.jsonl has every document's reason)
    for (const DocRecord& d : c.docs)
      ++dropped[d.split == 1 ? std::string("the eval split") : std::string(drop_reason_name(d.drop))];
    std::string why;
    for (const auto& [reason, n] : dropped) why += fmt::format("{}{} to {}", why.empty() ? "" : ", ", n, reason);
    return failed_precondition("no document of '{}' is left for the train split after filtering ({} documents: {})",
                               c.src.path, c.docs.size(), why)
        .with_hint("see lineage.jsonl reasons; add text or relax the filters");
  }
  BpeTrainStats stats;
  SP_ASSIGN_OR_RETURN(Tokenizer tok, trainer.train(opt.vocab_size, &stats));
  t.file = "tokenizer.json";
  t.bytes = tok.to_json();
  t.sha256 = sha256_hex(t.bytes);
  t.lineage = {{"file", t.file},
               {"sha256", t.sha256},
               {"vocab_size", tok.vocab_size()},
               {"merges", stats.merges},
               {"trained_on_documents", train_docs},
               {"trained_on_bytes", train_bytes},
               {"unique_pieces", stats.unique_pieces}};
  t.encoder = std::make_unique<Tokenizer>(std::move(tok));
  return t;
}

Result<PrepareSummary> prepare(const PrepareOptions& opt, const std::string& out_dir) {
  SP_RETURN_IF_ERROR(validate_prepare_options(opt));
  std::error_code ec;
  if (std::filesystem::exists(out_dir, ec) && !std::filesystem::is_empty(out_dir, ec))
    return failed_precondition("output directory '{}' is not empty", out_dir)
        .with_hint("choose a new --out directory, or remove this one");
  const Stopwatch total;
  SP_ASSIGN_OR_RETURN(Corpus c, read_corpus(opt));
  CorpusDecisions k;
  filter_and_scrub(c, opt);
  remove_near_duplicates(c, opt, k);
  split_and_decontaminate(c, opt, k);
  log_info("data prepare: filters, dedup, split and contamination check done in {:.2f} s", total.seconds());
  SP_ASSIGN_OR_RETURN(const PreparedTokenizer tok, make_tokenizer(c, opt));
  log_info("data prepare: tokenizer ({}, {} tokens) ready at {:.2f} s", tok.encoder->kind(), tok.encoder->vocab_size(),
           total.seconds());

  // Token streams: each kept document followed by the end-of-sequence id.
  std::vector<uint32_t> stream[2];
  const uint32_t eot = tok.encoder->eos_id();
  for (DocRecord& d : c.docs) {
    if (d.drop != DropReason::kNone) continue;
    std::vector<uint32_t>& s = stream[d.split];
    const size_t before = s.size();
    tok.encoder->encode_append(d.text, s);
    s.push_back(eot);
    d.tokens = static_cast<int64_t>(s.size() - before);
  }
  SP_RETURN_IF_ERROR(make_directories(out_dir));
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, tok.file), tok.bytes));
  SP_ASSIGN_OR_RETURN(const auto train_shards, write_shards(out_dir, Split::kTrain, stream[0], opt, eot));
  SP_ASSIGN_OR_RETURN(const auto eval_shards, write_shards(out_dir, Split::kEval, stream[1], opt, eot));
  const DatasetIdentity id = dataset_identity(c, opt, tok, train_shards, eval_shards);

  std::string jsonl;
  for (const DocRecord& d : c.docs) jsonl += lineage_record(d, c.docs, c.src, opt.contamination_ngram).dump() + "\n";
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, "lineage.jsonl"), jsonl));
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, "lineage.json"),
                                lineage_json(c, opt, k, tok, train_shards, eval_shards, id).dump(2) + "\n"));
  // The manifest last: it marks the directory complete.
  SP_RETURN_IF_ERROR(write_file(path_in(out_dir, kManifestFile),
                                manifest_json(opt, tok, train_shards, eval_shards, id).dump(2) + "\n"));
  SP_RETURN_IF_ERROR(fsync_directory(out_dir));

  PrepareSummary sum;
  sum.dir = out_dir;
  sum.tokenizer_sha256 = tok.sha256;
  sum.identity = id;
  sum.documents = static_cast<int64_t>(c.docs.size());
  for (const DocRecord& d : c.docs) {
    if (d.drop != DropReason::kNone)
      ++sum.dropped_documents;
    else
      (d.split == 0 ? sum.train_documents : sum.eval_documents) += 1;
  }
  sum.eval_contaminated = k.contaminated;
  sum.train_tokens = static_cast<int64_t>(stream[0].size());
  sum.eval_tokens = static_cast<int64_t>(stream[1].size());
  log_info("data prepare: wrote '{}' ({} train / {} eval tokens) in {:.2f} s", out_dir, sum.train_tokens,
           sum.eval_tokens, total.seconds());
  return sum;
}

}  // namespace sp::data
