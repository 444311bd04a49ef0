#include "data/token_dataset.h"

#include <filesystem>

#include "core/check.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "data/tokenizer.h"

namespace sp::data {
namespace {

bool plain_file_name(const std::string& f) {
  return !f.empty() && f.size() < 256 && f.find('/') == std::string::npos && f.find('\\') == std::string::npos &&
         f != "." && f != ".." && f.find('\0') == std::string::npos;
}

bool is_sha(const nlohmann::json& v) {
  if (!v.is_string() || v.get<std::string>().size() != 64) return false;
  for (char c : v.get<std::string>())
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Result<std::vector<ShardEntry>> parse_shards(const nlohmann::json& split, const std::string& mpath, const char* name) {
  auto bad = [&](const std::string& what) { return corrupt("manifest '{}': splits.{}: {}", mpath, name, what); };
  if (!split.is_object() || !split.contains("shards") || !split["shards"].is_array()) return bad("no 'shards' array");
  std::vector<ShardEntry> out;
  int64_t tokens = 0, docs = 0;
  for (size_t i = 0; i < split["shards"].size(); ++i) {
    const auto& s = split["shards"][i];
    if (!s.is_object()) return bad(fmt::format("shard {} is not an object", i));
    ShardEntry e;
    if (!s.contains("file") || !s["file"].is_string() || !plain_file_name(s["file"].get<std::string>()))
      return bad(fmt::format("shard {}: 'file' must be a plain file name inside the directory", i));
    e.file = s["file"].get<std::string>();
    for (const char* k : {"bytes", "num_tokens", "num_documents"})
      if (!s.contains(k) || !s[k].is_number_unsigned()) return bad(fmt::format("shard {}: '{}' must be a count", i, k));
    if (!is_sha(s.value("sha256", nlohmann::json())))
      return bad(fmt::format("shard {}: 'sha256' must be 64 hex digits", i));
    e.bytes = s["bytes"].get<int64_t>();
    e.num_tokens = s["num_tokens"].get<int64_t>();
    e.num_documents = s["num_documents"].get<int64_t>();
    e.sha256 = s["sha256"].get<std::string>();
    if (e.bytes < 0 || e.num_tokens < 0 || e.num_documents < 0) return bad(fmt::format("shard {}: negative count", i));
    tokens += e.num_tokens, docs += e.num_documents;
    out.push_back(std::move(e));
  }
  if (split.value("num_tokens", int64_t{-1}) != tokens || split.value("num_documents", int64_t{-1}) != docs)
    return bad(
        fmt::format("num_tokens/num_documents disagree with the shard list ({} tokens, {} documents)", tokens, docs));
  return out;
}

}  // namespace

const char* split_name(Split s) { return s == Split::kTrain ? "train" : "eval"; }

nlohmann::ordered_json identity_to_json(const DatasetIdentity& id) {
  return {{"corpus_sha256", id.corpus_sha256},
          {"tokenizer_sha256", id.tokenizer_sha256},
          {"split_sha256", id.split_sha256},
          {"shards_sha256", id.shards_sha256},
          {"vocab_size", id.vocab_size}};
}

std::string shards_digest(const std::vector<ShardEntry>& train, const std::vector<ShardEntry>& eval) {
  Sha256 h;
  for (const auto* list : {&train, &eval})
    for (const ShardEntry& e : *list) {
      const std::string line = fmt::format("{} {} {}\n", list == &train ? "train" : "eval", e.file, e.sha256);
      h.update(line.data(), line.size());
    }
  return h.hex_digest();
}

uint32_t TokenDataset::token(int64_t i) const {
  SP_CHECK(i >= 0 && i < num_tokens(), "token index {} outside [0, {})", i, num_tokens());
  return tokens_[static_cast<size_t>(i)];
}

Result<TokenDataset> TokenDataset::open(const std::string& dir, Split split) {
  const std::string mpath = (std::filesystem::path(dir) / kManifestFile).string();
  auto text = read_file(mpath, uint64_t{64} << 20);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return not_found("'{}' is not a prepared dataset: {} is missing", dir, mpath)
          .with_hint("run `shardproof data prepare --sources data/sources.json --out DIR` first");
    return text.status();
  }
  const auto m = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) return corrupt("manifest '{}' is not a JSON object", mpath);
  if (m.value("format", "") != kManifestFormat)
    return corrupt("manifest '{}': 'format' must be \"{}\"", mpath, kManifestFormat);
  if (!m.contains("version") || m["version"] != 1)
    return corrupt("manifest '{}': 'version' must be 1 (the only version this build reads)", mpath);
  if (!m.contains("vocab_size") || !m["vocab_size"].is_number_integer() ||
      m["vocab_size"].get<int64_t>() < kFirstMergeId || m["vocab_size"].get<int64_t>() > kMaxVocabSize)
    return corrupt("manifest '{}': 'vocab_size' must be an integer in [257, {}]", mpath, kMaxVocabSize);
  const int64_t vocab = m["vocab_size"].get<int64_t>();
  // The id after every document: 256 (<|endoftext|>) for the engine's BPE, a user tokenizer's end of sequence.
  if (!m.contains("eot_id") || !m["eot_id"].is_number_unsigned() || m["eot_id"].get<uint64_t>() >= uint64_t(vocab))
    return corrupt("manifest '{}': 'eot_id' must be an integer in [0, vocab_size {})", mpath, vocab);
  const auto eot = m["eot_id"].get<uint32_t>();
  const uint32_t dtype = shard_dtype_bytes(vocab);
  if (m.value("dtype", "") != (dtype == 2 ? "uint16" : "uint32"))
    return corrupt("manifest '{}': 'dtype' must be \"{}\" for vocab_size {}", mpath, dtype == 2 ? "uint16" : "uint32",
                   vocab);

  TokenDataset ds;
  ds.dir_ = dir;
  ds.split_ = split;
  const auto& idj = m.value("identity", nlohmann::json());
  for (const char* k : {"corpus_sha256", "tokenizer_sha256", "split_sha256", "shards_sha256"})
    if (!idj.is_object() || !is_sha(idj.value(k, nlohmann::json())))
      return corrupt("manifest '{}': identity.{} must be 64 hex digits", mpath, k);
  ds.identity_ = {idj["corpus_sha256"].get<std::string>(), idj["tokenizer_sha256"].get<std::string>(),
                  idj["split_sha256"].get<std::string>(), idj["shards_sha256"].get<std::string>(), vocab};
  if (idj.value("vocab_size", int64_t{-1}) != vocab)
    return corrupt("manifest '{}': identity.vocab_size differs from vocab_size {}", mpath, vocab);

  // The tokenizer the shards were made with.
  const auto& tj = m.value("tokenizer", nlohmann::json());
  if (!tj.is_object() || !tj.contains("file") || !tj["file"].is_string() ||
      !plain_file_name(tj["file"].get<std::string>()) || !is_sha(tj.value("sha256", nlohmann::json())))
    return corrupt("manifest '{}': 'tokenizer' must name a file in the directory and its sha256", mpath);
  if (tj["sha256"].get<std::string>() != ds.identity_.tokenizer_sha256)
    return corrupt("manifest '{}': tokenizer.sha256 differs from identity.tokenizer_sha256", mpath);
  const std::string tpath = (std::filesystem::path(dir) / tj["file"].get<std::string>()).string();
  SP_ASSIGN_OR_RETURN(const std::string tsha, sha256_file(tpath));
  if (tsha != ds.identity_.tokenizer_sha256)
    return corrupt("tokenizer '{}' has SHA-256 {} but the manifest records {}", tpath, tsha,
                   ds.identity_.tokenizer_sha256);

  if (!m.contains("splits") || !m["splits"].is_object()) return corrupt("manifest '{}': no 'splits' object", mpath);
  SP_ASSIGN_OR_RETURN(auto train, parse_shards(m["splits"].value("train", nlohmann::json()), mpath, "train"));
  SP_ASSIGN_OR_RETURN(auto eval, parse_shards(m["splits"].value("eval", nlohmann::json()), mpath, "eval"));
  if (shards_digest(train, eval) != ds.identity_.shards_sha256)
    return corrupt("manifest '{}': identity.shards_sha256 does not match its shard list", mpath);

  const std::vector<ShardEntry>& shards = split == Split::kTrain ? train : eval;
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardEntry& e = shards[i];
    const std::string path = (std::filesystem::path(dir) / e.file).string();
    auto bytes = read_file(path, static_cast<uint64_t>(e.bytes) + 1);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kCorrupt)
        return corrupt(
            "token shard '{}' is larger than the {} bytes the manifest records (trailing bytes from offset {})", path,
            e.bytes, e.bytes);
      return bytes.status();
    }
    ShardHeader expect;
    expect.dtype_bytes = dtype;
    expect.split = split == Split::kTrain ? 0 : 1;
    expect.vocab_size = static_cast<uint64_t>(vocab);
    expect.shard_index = i;
    SP_ASSIGN_OR_RETURN(const ShardHeader h, shard_decode(*bytes, path, &expect, &ds.tokens_, eot));
    if (static_cast<int64_t>(bytes->size()) != e.bytes)
      return corrupt("token shard '{}' is {} bytes but the manifest records {} (the file ends at offset {})", path,
                     bytes->size(), e.bytes, bytes->size());
    const std::string sha = sha256_hex(*bytes);
    if (sha != e.sha256)
      return corrupt("token shard '{}' has SHA-256 {} but the manifest records {}: the file was modified", path, sha,
                     e.sha256);
    if (static_cast<int64_t>(h.num_tokens) != e.num_tokens || static_cast<int64_t>(h.num_documents) != e.num_documents)
      return corrupt("token shard '{}' holds {} tokens / {} documents, the manifest records {} / {}", path,
                     h.num_tokens, h.num_documents, e.num_tokens, e.num_documents);
    ds.num_documents_ += e.num_documents;
  }
  return ds;
}

}  // namespace sp::data
