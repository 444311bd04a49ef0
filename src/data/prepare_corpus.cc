// Steps 1–6 of `data prepare` (prepare_steps.h): from the sources file to the kept, split and
// decontaminated documents. Thresholds and their reasons: docs/data.md.
#include <map>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/log.h"
#include "data/prepare_steps.h"
#include "data/text_units.h"

namespace sp::data {
namespace {

constexpr uint64_t kMaxCorpusFileBytes = uint64_t{1} << 32;

// The drop reason of a failed quality filter (kNone: passed).
DropReason drop_for(FilterReason r) {
  switch (r) {
    case FilterReason::kBinary:
      return DropReason::kBinary;
    case FilterReason::kInvalidUtf8:
      return DropReason::kInvalidUtf8;
    case FilterReason::kTooShort:
      return DropReason::kTooShort;
    case FilterReason::kBoilerplate:
      return DropReason::kBoilerplate;
    case FilterReason::kNone:
      break;
  }
  return DropReason::kNone;
}

}  // namespace

Result<Corpus> read_corpus(const PrepareOptions& opt) {
  Corpus c;
  SP_ASSIGN_OR_RETURN(c.src, load_sources(opt.sources_file));
  c.files.resize(c.src.sources.size());
  c.file_sha.resize(c.src.sources.size());
  for (size_t s = 0; s < c.src.sources.size(); ++s) {
    const SourceSpec& spec = c.src.sources[s];
    auto bytes = read_file(spec.resolved_path, kMaxCorpusFileBytes);
    if (!bytes.ok()) return bytes.status().with_context(fmt::format("source '{}' listed in '{}'", spec.id, c.src.path));
    c.files[s] = std::move(bytes).value();
    c.file_sha[s] = sha256_hex(c.files[s]);
    if (!spec.sha256.empty() && spec.sha256 != c.file_sha[s])
      return corrupt("corpus file '{}' (source '{}') has SHA-256 {} but '{}' records {}", spec.resolved_path, spec.id,
                     c.file_sha[s], c.src.path, spec.sha256)
          .with_hint("restore the file, or update its sha256 in the sources file if the change is intended");
    const auto spans = split_documents(c.files[s], spec.format);
    if (spans.empty())  // nothing to learn from: named with its size, before any filter runs
      return failed_precondition("corpus file '{}' (source '{}' of '{}') holds no document: {} bytes{}",
                                 spec.resolved_path, spec.id, c.src.path, c.files[s].size(),
                                 c.files[s].empty() ? "" : ", only separators and blank lines")
          .with_hint("give the source some text, or remove it from the sources file");
    for (size_t i = 0; i < spans.size(); ++i) {
      DocRecord d;
      d.source = static_cast<uint32_t>(s);
      d.index = static_cast<int64_t>(i);
      d.offset = spans[i].offset;
      d.bytes = spans[i].size;
      d.id = fmt::format("{}/{:06d}", spec.id, i);
      c.docs.push_back(std::move(d));
    }
  }
  log_info("data prepare: {} documents from {} sources", c.docs.size(), c.src.sources.size());
  return c;
}

void filter_and_scrub(Corpus& c, const PrepareOptions& opt) {
  std::map<std::pair<uint64_t, uint64_t>, int64_t> first_of;  // exact-duplicate key → first ordinal
  for (size_t k = 0; k < c.docs.size(); ++k) {
    DocRecord& d = c.docs[k];
    const std::string_view raw =
        std::string_view(c.files[d.source]).substr(static_cast<size_t>(d.offset), static_cast<size_t>(d.bytes));
    d.quality = quality_check(raw, opt.filter);
    d.drop = drop_for(d.quality.reason);
    if (d.drop != DropReason::kNone) continue;
    d.text = scrub_pii(raw, &d.pii);
    const std::string norm = normalize_text(d.text);
    // The split hash of step 5, from the same normalized text.
    d.split_u = static_cast<double>(xxh3_64(norm, opt.seed) >> 11) * 0x1.0p-53;
    const Digest128 key = xxh3_128(norm.data(), norm.size());
    const auto [it, inserted] = first_of.emplace(std::make_pair(key.hi, key.lo), static_cast<int64_t>(k));
    if (!inserted) {
      d.drop = DropReason::kExactDuplicate;
      d.exact_duplicate_of = it->second;
      continue;
    }
    d.units = text_units(d.text);
  }
}

void remove_near_duplicates(Corpus& c, const PrepareOptions& opt, CorpusDecisions& out) {
  std::vector<size_t> live;
  for (size_t k = 0; k < c.docs.size(); ++k)
    if (c.docs[k].drop == DropReason::kNone) live.push_back(k);
  std::vector<std::vector<uint64_t>> shingles(live.size());
  for (size_t i = 0; i < live.size(); ++i) shingles[i] = shingle_set(c.docs[live[i]].units, opt.minhash.shingle);
  out.near = near_duplicates(shingles, opt.minhash);
  std::vector<int64_t> cluster_size(live.size(), 0);
  for (size_t i = 0; i < live.size(); ++i) ++cluster_size[static_cast<size_t>(out.near.representative[i])];
  for (size_t i = 0; i < live.size(); ++i) {
    const size_t rep = static_cast<size_t>(out.near.representative[i]);
    if (cluster_size[rep] < 2) continue;
    DocRecord& d = c.docs[live[i]];
    d.cluster = static_cast<int64_t>(live[rep]);
    d.cluster_size = cluster_size[rep];
    if (rep != i) {
      d.drop = DropReason::kNearDuplicate;
      d.cluster_jaccard = jaccard(shingles[i], shingles[rep]);
      ++out.near_removed;
    }
  }
}

void split_and_decontaminate(Corpus& c, const PrepareOptions& opt, CorpusDecisions& out) {
  NgramIndex index(opt.contamination_ngram);
  for (DocRecord& d : c.docs) {
    if (d.drop != DropReason::kNone) continue;
    d.split = d.split_u < opt.eval_fraction ? 1 : 0;
    if (d.split == 0) index.add(d.units);
  }
  index.finalize();
  out.train_ngrams = index.size();
  for (DocRecord& d : c.docs) {
    if (d.drop != DropReason::kNone || d.split != 1) continue;
    d.contamination_checked = true;
    d.overlap = index.overlap(d.units);
    ++out.eval_checked;
    if (d.overlap.overlapping > 0) {
      d.drop = DropReason::kContaminated;
      d.split = -1;
      ++out.contaminated;
    }
  }
}

}  // namespace sp::data
