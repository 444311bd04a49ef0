#include "data/dedup.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "core/check.h"
#include "core/hash.h"

namespace sp::data {
namespace {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int64_t find_root(std::vector<int64_t>& parent, int64_t x) {
  while (parent[static_cast<size_t>(x)] != x) {
    parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    x = parent[static_cast<size_t>(x)];
  }
  return x;
}

}  // namespace

std::vector<uint64_t> shingle_set(const std::vector<uint64_t>& units, int k) {
  std::vector<uint64_t> out;
  if (units.empty()) return out;
  const size_t kk = std::min(units.size(), static_cast<size_t>(k));
  for (size_t i = 0; i + kk <= units.size(); ++i)
    out.push_back(xxh3_64(units.data() + i, kk * sizeof(uint64_t), 0x7368696e676c65ull));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<uint64_t> minhash_signature(const std::vector<uint64_t>& shingles, int num_hashes, uint64_t seed) {
  std::vector<uint64_t> sig(static_cast<size_t>(num_hashes), UINT64_MAX);
  std::vector<uint64_t> salt(static_cast<size_t>(num_hashes));
  for (int i = 0; i < num_hashes; ++i)
    salt[static_cast<size_t>(i)] = splitmix64(seed * 0x100000001B3ull + static_cast<uint64_t>(i));
  for (uint64_t x : shingles)
    for (size_t i = 0; i < sig.size(); ++i) sig[i] = std::min(sig[i], splitmix64(x ^ salt[i]));
  return sig;
}

double jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t i = 0, j = 0, inter = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j])
      ++inter, ++i, ++j;
    else if (a[i] < b[j])
      ++i;
    else
      ++j;
  }
  return static_cast<double>(inter) / static_cast<double>(a.size() + b.size() - inter);
}

double lsh_candidate_probability(double s, int bands, int rows) {
  return 1.0 - std::pow(1.0 - std::pow(s, rows), bands);
}

NearDupResult near_duplicates(const std::vector<std::vector<uint64_t>>& sets, const MinHashOptions& opt) {
  SP_CHECK(opt.bands > 0 && opt.rows > 0, "MinHash needs bands > 0 and rows > 0");
  const int64_t n = static_cast<int64_t>(sets.size());
  const int num_hashes = opt.bands * opt.rows;
  std::vector<std::vector<uint64_t>> sig(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d)
    sig[static_cast<size_t>(d)] = minhash_signature(sets[static_cast<size_t>(d)], num_hashes, opt.seed);

  // Candidate pairs (lo, hi) from every band bucket, in document order within each bucket.
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int band = 0; band < opt.bands; ++band) {
    std::unordered_map<uint64_t, std::vector<int64_t>> buckets;
    for (int64_t d = 0; d < n; ++d) {
      if (sets[static_cast<size_t>(d)].empty()) continue;
      const uint64_t* rows =
          sig[static_cast<size_t>(d)].data() + static_cast<size_t>(band) * static_cast<size_t>(opt.rows);
      buckets[xxh3_64(rows, static_cast<size_t>(opt.rows) * sizeof(uint64_t), static_cast<uint64_t>(band))].push_back(
          d);
    }
    for (auto& [key, docs] : buckets)
      for (size_t i = 0; i < docs.size(); ++i)
        for (size_t j = i + 1; j < docs.size(); ++j) pairs.push_back({docs[i], docs[j]});
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());

  NearDupResult r;
  r.candidate_pairs = static_cast<int64_t>(pairs.size());
  std::vector<int64_t> parent(static_cast<size_t>(n));
  std::iota(parent.begin(), parent.end(), int64_t{0});
  for (const auto& [a, b] : pairs) {
    if (jaccard(sets[static_cast<size_t>(a)], sets[static_cast<size_t>(b)]) < opt.threshold) continue;
    ++r.similar_pairs;
    const int64_t ra = find_root(parent, a), rb = find_root(parent, b);
    if (ra != rb) parent[static_cast<size_t>(std::max(ra, rb))] = std::min(ra, rb);  // the lowest index is the root
  }
  r.representative.resize(static_cast<size_t>(n));
  std::vector<int64_t> size(static_cast<size_t>(n), 0);
  for (int64_t d = 0; d < n; ++d) {
    r.representative[static_cast<size_t>(d)] = find_root(parent, d);
    ++size[static_cast<size_t>(r.representative[static_cast<size_t>(d)])];
  }
  for (int64_t d = 0; d < n; ++d) r.clusters += size[static_cast<size_t>(d)] >= 2 ? 1 : 0;
  return r;
}

}  // namespace sp::data
