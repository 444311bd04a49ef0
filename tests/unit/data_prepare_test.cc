// `data prepare` end to end: the planted cases (near duplicates clustered, PII scrubbed and counted,
// the planted eval/train overlap removed, exact duplicate, short and boilerplate documents dropped),
// lineage totals that add up on a subset of the bundled corpus, decoding the shards back to the
// kept documents, byte-identical reruns, the bundled sources file matching its files, every bad
// input as a clear Status, and the content-addressed cache (hit, repair, concurrent callers).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/file_io.h"
#include "core/hash.h"
#include "data/pii.h"
#include "data/prepare.h"
#include "data/sources.h"
#include "data/tokenizer.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::data {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

using sp::test::source_dir;
using sp::test::TempDir;

std::string read(const std::string& p) { return read_file(p).value(); }
void write(const std::string& p, const std::string& b) { ASSERT_TRUE(write_file(p, b).ok()); }

std::vector<nlohmann::json> lineage(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream f(dir + "/lineage.jsonl");
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

PrepareOptions planted_options() {
  PrepareOptions o;
  o.sources_file = source_dir() + "/data/planted/sources.json";
  o.vocab_size = 300;
  o.eval_fraction = 0.5;
  return o;
}

// A sources file over a few bundled files (absolute paths) + the planted file: fast, both languages.
std::string subset_sources(const TempDir& t) {
  const nlohmann::json all = nlohmann::json::parse(read(source_dir() + "/data/sources.json"));
  nlohmann::json sub = {{"format", "shardproof-sources"}, {"version", 1}, {"sources", nlohmann::json::array()}};
  for (const auto& s : all["sources"]) {
    const std::string id = s["id"];
    if (id != "us-constitution" && id != "us-declaration" && id != "song100" && id != "daxue-zhongyong") continue;
    nlohmann::json e = s;
    e["path"] = source_dir() + "/data/" + s["path"].get<std::string>();
    sub["sources"].push_back(e);
  }
  nlohmann::json planted = nlohmann::json::parse(read(source_dir() + "/data/planted/sources.json"))["sources"][0];
  planted["path"] = source_dir() + "/data/planted/planted.txt";
  sub["sources"].push_back(planted);
  const std::string p = t.path() + "/subset.json";
  write(p, sub.dump(2));
  return p;
}

TEST(Prepare, PlantedCasesAreFound) {
  TempDir t;
  auto r = prepare(planted_options(), t.path() + "/out");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::map<std::string, nlohmann::json> by_label;  // "[planted:xxx]" → records with that label
  std::vector<nlohmann::json> recs = lineage(t.path() + "/out");
  const std::string raw = read(source_dir() + "/data/planted/planted.txt");
  std::map<std::string, std::vector<nlohmann::json>> label;
  for (const auto& rec : recs) {
    const std::string text = raw.substr(rec["offset"].get<size_t>(), rec["bytes"].get<size_t>());
    label[text.substr(0, text.find(']') + 1)].push_back(rec);
  }
  // PII: counted per kind; the document itself is kept.
  const auto& pii = label["[planted:pii]"].at(0);
  EXPECT_EQ(pii["pii"], nlohmann::json({{"email", 2}, {"phone", 3}, {"ipv4", 2}, {"ipv6", 2}}));
  EXPECT_EQ(pii["status"], "kept");
  // Near duplicates: A, A with one word changed, A with a sentence appended → one cluster of 3 led by A.
  const auto& near = label["[planted:near-duplicate]"];
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0]["status"], "kept");
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(near[i]["reason"], "near_duplicate");
    EXPECT_EQ(near[i]["near_duplicate_cluster"], near[0]["id"]);
    EXPECT_GE(near[i]["jaccard_with_representative"].get<double>(), 0.8);
  }
  EXPECT_EQ(near[0]["cluster_size"], 3);
  EXPECT_EQ(label["[planted:far-from-duplicate]"].at(0)["status"], "kept");  // shares half of A: not a duplicate
  const auto& zh = label["[planted:near-duplicate-zh]"];
  ASSERT_EQ(zh.size(), 2u);
  EXPECT_EQ(zh[1]["reason"], "near_duplicate");
  EXPECT_EQ(zh[1]["near_duplicate_cluster"], zh[0]["id"]);
  // Exact duplicate (differs only in case and white space).
  const auto& ex = label["[planted:exact-duplicate]"];
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[1]["reason"], "exact_duplicate");
  EXPECT_EQ(ex[1]["exact_duplicate_of"], ex[0]["id"]);
  // Contamination: the eval document sharing a 19-word sentence with a train document is removed.
  const auto& ct = label["[planted:contamination-train]"].at(0);
  const auto& ce = label["[planted:contamination-eval]"].at(0);
  EXPECT_EQ(ct["split"], "train");
  EXPECT_EQ(ce["reason"], "contaminated");
  EXPECT_EQ(ce["contamination"]["decision"], "removed");
  EXPECT_EQ(ce["contamination"]["overlapping"], 7);  // 19 shared words → 19 − 13 + 1 shared 13-grams
  EXPECT_EQ(label["[planted:too-short]"].at(0)["reason"], "too_short");
  EXPECT_EQ(label["[planted:boilerplate]"].at(0)["reason"], "boilerplate");
  // Clean eval documents were checked too.
  int clean = 0;
  for (const auto& rec : recs)
    if (rec["split"] == "eval") clean += rec["contamination"]["decision"] == "clean";
  EXPECT_GE(clean, 1);
  const auto lin = nlohmann::json::parse(read(t.path() + "/out/lineage.json"));
  EXPECT_EQ(lin["contamination"]["eval_contaminated"], 1);
  EXPECT_EQ(lin["dedup"]["near_duplicate_clusters"], 2);
  EXPECT_EQ(lin["dedup"]["near_duplicates_removed"], 3);
  EXPECT_EQ(lin["pii"]["email"], 2);
  EXPECT_EQ(r->eval_contaminated, 1);
}

TEST(Prepare, LineageTotalsAddUpAndShardsDecodeToTheKeptDocuments) {
  TempDir t;
  PrepareOptions o;
  o.sources_file = subset_sources(t);
  o.vocab_size = 512;
  o.eval_fraction = 0.2;
  o.shard_tokens = 5000;
  auto r = prepare(o, t.path() + "/out");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto lin = nlohmann::json::parse(read(t.path() + "/out/lineage.json"));
  const auto recs = lineage(t.path() + "/out");
  const auto& d = lin["documents"];
  EXPECT_EQ(d["documents"].get<int64_t>(), static_cast<int64_t>(recs.size()));
  EXPECT_EQ(d["documents"], d["kept"].get<int64_t>() + d["dropped"].get<int64_t>());
  EXPECT_EQ(d["kept"], d["train"].get<int64_t>() + d["eval"].get<int64_t>());
  int64_t reasons = 0;
  for (const auto& [k, v] : d["dropped_by_reason"].items()) reasons += v.get<int64_t>();
  EXPECT_EQ(reasons, d["dropped"].get<int64_t>());
  int64_t per_source = 0, per_language = 0, bytes = 0;
  for (const auto& [k, v] : lin["sources"].items())
    per_source += v["documents"].get<int64_t>(), bytes += v["bytes"].get<int64_t>();
  for (const auto& [k, v] : lin["languages"].items()) per_language += v["documents"].get<int64_t>();
  EXPECT_EQ(per_source, d["documents"].get<int64_t>());
  EXPECT_EQ(per_language, d["documents"].get<int64_t>());
  EXPECT_EQ(bytes, d["bytes"].get<int64_t>());
  EXPECT_GT(lin["languages"]["zh"]["kept"].get<int64_t>(), 50);
  EXPECT_GT(lin["languages"]["en"]["kept"].get<int64_t>(), 0);
  EXPECT_EQ(d["train_tokens"].get<int64_t>(), r->train_tokens);
  EXPECT_EQ(r->train_documents, d["train"].get<int64_t>());
  EXPECT_EQ(lin["identity"]["tokenizer_sha256"], sha256_hex(read(t.path() + "/out/tokenizer.json")));

  // Decoding the train shards gives back, in corpus order, every kept train document (scrubbed)
  // followed by <|endoftext|>; the per-document token counts in lineage.jsonl add up to the stream.
  auto tok = Tokenizer::load(t.path() + "/out/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  auto train = TokenDataset::open(t.path() + "/out", Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().to_string();
  auto sources = load_sources(o.sources_file);
  ASSERT_TRUE(sources.ok());
  std::map<std::string, std::string> files;
  for (const auto& s : sources->sources) files[s.id] = read(s.resolved_path);
  std::string expect;
  int64_t tokens = 0;
  for (const auto& rec : recs) {
    if (rec["split"] != "train") continue;
    const std::string raw = files[rec["source"]].substr(rec["offset"].get<size_t>(), rec["bytes"].get<size_t>());
    expect += scrub_pii(raw, nullptr) + std::string(kEndOfTextText);
    tokens += rec["tokens"].get<int64_t>();
  }
  EXPECT_EQ(tok->decode(train->tokens()), expect);
  EXPECT_EQ(tokens, train->num_tokens());
}

TEST(Prepare, DeterministicByteIdenticalOutputs) {
  TempDir t;
  const PrepareOptions o = planted_options();
  ASSERT_TRUE(prepare(o, t.path() + "/a").ok());
  ASSERT_TRUE(prepare(o, t.path() + "/b").ok());
  int files = 0;
  for (const auto& e : fs::directory_iterator(t.path() + "/a")) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(read(e.path().string()), read(t.path() + "/b/" + name)) << name;
    ++files;
  }
  EXPECT_GE(files, 6);  // tokenizer, manifest, lineage.json(l), train and eval shards
  PrepareOptions other = o;
  other.seed = 99;
  ASSERT_TRUE(prepare(other, t.path() + "/c").ok());
  EXPECT_NE(read(t.path() + "/a/manifest.json"), read(t.path() + "/c/manifest.json"));
}

TEST(Prepare, BundledSourcesFileMatchesItsFiles) {
  auto src = load_sources(source_dir() + "/data/sources.json");
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_GE(src->sources.size(), 8u);
  std::map<std::string, int> languages;
  for (const SourceSpec& s : src->sources) {
    auto sha = sha256_file(s.resolved_path);
    ASSERT_TRUE(sha.ok()) << sha.status().to_string();
    EXPECT_EQ(*sha, s.sha256) << s.id;
    EXPECT_TRUE(path_exists(source_dir() + "/data/" + s.licence_file)) << s.licence_file;
    EXPECT_FALSE(s.origin.empty()) << s.id;
    ++languages[s.language];
  }
  EXPECT_GT(languages["en"], 0);
  EXPECT_GT(languages["zh"], 0);
}

void expect_status(const Result<PrepareSummary>& r, StatusCode code, std::initializer_list<std::string> needles) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  for (const std::string& n : needles)
    EXPECT_NE(r.status().to_string().find(n), std::string::npos) << "'" << n << "' not in: " << r.status().to_string();
}

TEST(Prepare, BadInputsAreClearErrors) {
  TempDir t;
  PrepareOptions o = planted_options();
  o.sources_file = t.path() + "/missing.json";
  expect_status(prepare(o, t.path() + "/o1"), StatusCode::kNotFound, {"missing.json", "hint"});
  write(t.path() + "/empty.json", "");
  o.sources_file = t.path() + "/empty.json";
  expect_status(prepare(o, t.path() + "/o2"), StatusCode::kInvalidArgument, {"empty.json", "empty"});
  write(t.path() + "/none.json", R"({"format": "shardproof-sources", "version": 1, "sources": []})");
  o.sources_file = t.path() + "/none.json";
  expect_status(prepare(o, t.path() + "/o3"), StatusCode::kInvalidArgument, {"lists no sources"});
  write(
      t.path() + "/nolicence.json",
      R"({"format": "shardproof-sources", "version": 1, "sources": [{"id": "x", "path": "x.txt", "language": "en"}]})");
  o.sources_file = t.path() + "/nolicence.json";
  expect_status(prepare(o, t.path() + "/o4"), StatusCode::kInvalidArgument, {"source 0", "'licence'"});
  write(t.path() + "/gone.json", R"({"format": "shardproof-sources", "version": 1, "sources": [
      {"id": "gone", "path": "gone.txt", "language": "en", "licence": "CC0-1.0"}]})");
  o.sources_file = t.path() + "/gone.json";
  expect_status(prepare(o, t.path() + "/o5"), StatusCode::kNotFound, {"gone.txt", "source 'gone'"});
  write(t.path() + "/x.txt", "some text");
  write(t.path() + "/badsha.json", R"({"format": "shardproof-sources", "version": 1, "sources": [
      {"id": "x", "path": "x.txt", "language": "en", "licence": "CC0-1.0", "sha256": ")" +
                                       std::string(64, 'a') + R"("}]})");
  o.sources_file = t.path() + "/badsha.json";
  expect_status(prepare(o, t.path() + "/o6"), StatusCode::kCorrupt, {"x.txt", "SHA-256"});

  o = planted_options();
  o.vocab_size = 256;
  expect_status(prepare(o, t.path() + "/o7"), StatusCode::kInvalidArgument, {"257"});
  o.vocab_size = 100000;
  expect_status(prepare(o, t.path() + "/o8"), StatusCode::kFailedPrecondition, {"merges", "hint"});
  o = planted_options();
  o.eval_fraction = 1.5;
  expect_status(prepare(o, t.path() + "/o9"), StatusCode::kInvalidArgument, {"eval_fraction"});
  fs::create_directories(t.path() + "/full");
  write(t.path() + "/full/keep", "x");
  expect_status(prepare(planted_options(), t.path() + "/full"), StatusCode::kFailedPrecondition, {"not empty"});
}

TEST(Prepare, NonUtf8AndBinaryDocumentsAreFilteredWithAReason) {
  TempDir t;
  const std::string good =
      "A perfectly ordinary paragraph of English text that is long enough to pass the length "
      "filter and has nothing to hide at all, really.";
  write(t.path() + "/mixed.txt",
        good +
            "\n%\nLatin-1 caf\xe9 text that is not UTF-8 at all but otherwise ordinary words "
            "here and more and more words to be long\n%\n" +
            std::string("ELF") + std::string(3, '\0') +
            "\x01\x02 binary blob with enough words to be counted as long text if it were text at "
            "all here");
  write(t.path() + "/latin1.txt",
        "entire file in Latin-1: d\xe9j\xe0 vu, na\xefve caf\xe9 and more words to be long enough "
        "for the filter to look at the encoding first");
  write(t.path() + "/s.json", R"({"format": "shardproof-sources", "version": 1, "sources": [
      {"id": "mixed", "path": "mixed.txt", "language": "en", "licence": "CC0-1.0"},
      {"id": "latin1", "path": "latin1.txt", "language": "fr", "licence": "CC0-1.0", "format": "whole_file"}]})");
  PrepareOptions o;
  o.sources_file = t.path() + "/s.json";
  o.vocab_size = 260;
  o.eval_fraction = 0.01;
  auto r = prepare(o, t.path() + "/out");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto recs = lineage(t.path() + "/out");
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0]["status"], "kept");
  EXPECT_EQ(recs[1]["reason"], "invalid_utf8");
  EXPECT_EQ(recs[1]["filters"][1]["first_invalid_byte"], 11);
  EXPECT_EQ(recs[2]["reason"], "binary");
  EXPECT_EQ(recs[3]["reason"], "invalid_utf8");
  EXPECT_EQ(recs[3]["source"], "latin1");
}

TEST(PrepareCached, HitRepairAndConcurrentCallers) {
  TempDir t;
  const PrepareOptions o = planted_options();
  auto first = prepare_cached(o, t.path() + "/cache");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_FALSE(first->cache_hit);
  auto key = prepare_cache_key(o);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(first->dir, t.path() + "/cache/" + *key);
  auto second = prepare_cached(o, t.path() + "/cache");
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->identity, first->identity);
  EXPECT_EQ(second->train_tokens, first->train_tokens);
  EXPECT_EQ(second->eval_contaminated, first->eval_contaminated);

  PrepareOptions other = o;
  other.vocab_size = 301;
  EXPECT_NE(prepare_cache_key(other).value(), *key);

  // A damaged entry is rebuilt, not used.
  std::string shard = read(first->dir + "/train-00000.bin");
  shard[100] ^= 1;
  write(first->dir + "/train-00000.bin", shard);
  auto repaired = prepare_cached(o, t.path() + "/cache");
  ASSERT_TRUE(repaired.ok()) << repaired.status().to_string();
  EXPECT_FALSE(repaired->cache_hit);
  EXPECT_EQ(repaired->identity, first->identity);

  // Several callers at once on an empty root: all succeed with the same dataset; nothing is left over.
  const std::string root = t.path() + "/race";
  std::vector<Result<PrepareSummary>> results(3, Result<PrepareSummary>(internal_error("unset")));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) threads.emplace_back([&, i] { results[i] = prepare_cached(o, root); });
  for (auto& th : threads) th.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->identity, first->identity);
    EXPECT_EQ(r->dir, root + "/" + *key);
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    ++entries;
    EXPECT_EQ(e.path().filename().string(), *key);
  }
  EXPECT_EQ(entries, 1);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::data
