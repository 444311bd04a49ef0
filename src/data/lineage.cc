#include "data/lineage.h"

#include <map>

namespace sp::data {
namespace {

nlohmann::ordered_json pii_json(const PiiCounts& p) {
  return {{"email", p.email}, {"phone", p.phone}, {"ipv4", p.ipv4}, {"ipv6", p.ipv6}};
}

nlohmann::ordered_json ref(const std::vector<DocRecord>& all, int64_t ordinal) {
  return ordinal < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(all[static_cast<size_t>(ordinal)].id);
}

const char* split_str(int s) { return s == 0 ? "train" : s == 1 ? "eval" : nullptr; }

}  // namespace

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kNone:
      return "none";
    case DropReason::kBinary:
      return "binary";
    case DropReason::kInvalidUtf8:
      return "invalid_utf8";
    case DropReason::kTooShort:
      return "too_short";
    case DropReason::kBoilerplate:
      return "boilerplate";
    case DropReason::kExactDuplicate:
      return "exact_duplicate";
    case DropReason::kNearDuplicate:
      return "near_duplicate";
    case DropReason::kContaminated:
      return "contaminated";
  }
  return "unknown";
}

nlohmann::ordered_json lineage_record(const DocRecord& d, const std::vector<DocRecord>& all, const SourcesFile& src,
                                      int contamination_ngram) {
  const SourceSpec& s = src.sources[d.source];
  const ScriptGuess g = detect_script(d.quality.counts);
  nlohmann::ordered_json r;
  r["id"] = d.id;
  r["source"] = s.id;
  r["file"] = s.path;
  r["offset"] = d.offset;
  r["bytes"] = d.bytes;
  r["chars"] = d.quality.counts.chars;
  r["licence"] = s.licence;
  r["planted"] = s.planted;
  r["declared_language"] = s.language;
  r["script"] = g.script;
  r["language"] = g.language;
  r["han_share"] = g.han_share;
  r["latin_share"] = g.latin_share;
  r["filters"] = d.quality.decisions;
  r["pii"] = pii_json(d.pii);
  r["exact_duplicate_of"] = ref(all, d.exact_duplicate_of);
  r["near_duplicate_cluster"] = ref(all, d.cluster);
  if (d.cluster >= 0) {
    r["cluster_size"] = d.cluster_size;
    if (d.drop == DropReason::kNearDuplicate) r["jaccard_with_representative"] = d.cluster_jaccard;
  }
  const char* sp = split_str(d.split);
  r["split"] = sp ? nlohmann::ordered_json(sp) : nlohmann::ordered_json();
  if (d.split >= 0 || d.drop == DropReason::kContaminated) r["split_hash"] = d.split_u;
  if (d.contamination_checked) {
    r["contamination"] = {{"ngram", contamination_ngram},
                          {"ngrams", d.overlap.ngrams},
                          {"overlapping", d.overlap.overlapping},
                          {"decision", d.overlap.overlapping > 0 ? "removed" : "clean"}};
  } else {
    r["contamination"] = nullptr;
  }
  r["status"] = d.drop == DropReason::kNone ? "kept" : "dropped";
  r["reason"] =
      d.drop == DropReason::kNone ? nlohmann::ordered_json() : nlohmann::ordered_json(drop_reason_name(d.drop));
  r["tokens"] = d.drop == DropReason::kNone ? nlohmann::ordered_json(d.tokens) : nlohmann::ordered_json();
  return r;
}

nlohmann::ordered_json lineage_totals(const std::vector<DocRecord>& docs, const SourcesFile& src) {
  struct Tally {
    int64_t documents = 0, bytes = 0, kept = 0, train = 0, eval = 0, train_tokens = 0, eval_tokens = 0;
    std::map<std::string, int64_t> dropped;
    nlohmann::ordered_json json() const {
      nlohmann::ordered_json j = {{"documents", documents},
                                  {"bytes", bytes},
                                  {"kept", kept},
                                  {"train", train},
                                  {"eval", eval},
                                  {"dropped", documents - kept},
                                  {"train_tokens", train_tokens},
                                  {"eval_tokens", eval_tokens}};
      nlohmann::ordered_json r = nlohmann::ordered_json::object();
      for (DropReason reason : kAllDropReasons) {
        const auto it = dropped.find(drop_reason_name(reason));
        r[drop_reason_name(reason)] = it == dropped.end() ? 0 : it->second;
      }
      j["dropped_by_reason"] = r;
      return j;
    }
    void add(const DocRecord& d) {
      ++documents, bytes += d.bytes;
      if (d.drop == DropReason::kNone) {
        ++kept;
        (d.split == 0 ? train : eval) += 1;
        (d.split == 0 ? train_tokens : eval_tokens) += d.tokens;
      } else {
        ++dropped[drop_reason_name(d.drop)];
      }
    }
  };
  Tally all;
  std::vector<Tally> per_source(src.sources.size());
  std::map<std::string, Tally> per_language;
  PiiCounts pii;
  int64_t pii_docs = 0;
  for (const DocRecord& d : docs) {
    all.add(d);
    per_source[d.source].add(d);
    per_language[detect_script(d.quality.counts).language].add(d);
    pii += d.pii;
    pii_docs += d.pii.total() > 0 ? 1 : 0;
  }
  nlohmann::ordered_json t;
  t["documents"] = all.json();
  nlohmann::ordered_json s = nlohmann::ordered_json::object();
  for (size_t i = 0; i < src.sources.size(); ++i) {
    nlohmann::ordered_json j = {{"file", src.sources[i].path},
                                {"licence", src.sources[i].licence},
                                {"declared_language", src.sources[i].language},
                                {"planted", src.sources[i].planted}};
    j.update(per_source[i].json());
    s[src.sources[i].id] = j;
  }
  t["sources"] = s;
  nlohmann::ordered_json l = nlohmann::ordered_json::object();
  for (const auto& [lang, tally] : per_language) l[lang] = tally.json();
  t["languages"] = l;
  t["pii"] = pii_json(pii);
  t["pii"]["documents"] = pii_docs;
  return t;
}

}  // namespace sp::data
