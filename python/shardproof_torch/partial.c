/* The partial checksum of contiguous fp32 values with consecutive logical indices: checksum.py's partial_of for
 * Contiguous indices, in C (native.py compiles it once per machine and loads it; NumPy's path is the definition and
 * the fallback, and both give the same bits: tests/python/test_checksum_native.py).
 *
 * Digest: lane l += fmix64((j * 0x100000001b3 + s_l) xor ((b << 17) xor b)) mod 2^64 over logical index j and bit
 * pattern b (docs/formats/checksums.md). Exact sums: a finite value is M * 2^(e - 150) with e = max(exponent field,
 * 1); its signed M is added into sums[e] and M^2 into squares[e] (two 64-bit words, low first), which native.py
 * shifts into the integers of units 2^-149 and 2^-298. NaN, Inf and the largest finite |x|'s bit pattern are
 * counted. No allocation, no state. */
#include <stdint.h>

static inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

/* lanes[2]; sums[256]; squares[512]; counts[3] = {NaN, Inf, absmax bits}. Every output is overwritten. */
void sp_partial_contiguous(const uint32_t* u, int64_t n, uint64_t first, uint64_t* lanes, int64_t* sums,
                           uint64_t* squares, uint64_t* counts) {
  const uint64_t prime = 0x100000001b3ULL;
  uint64_t l0 = 0, l1 = 0, nan = 0, inf = 0, j = first * prime;
  uint32_t absmax = 0;
  unsigned __int128 sq[256] = {0};
  for (int i = 0; i < 256; ++i) sums[i] = 0;
  for (int64_t i = 0; i < n; ++i, j += prime) {
    const uint64_t b = u[i], v = (b << 17) ^ b;
    l0 += fmix64((j + 0x9e3779b97f4a7c15ULL) ^ v);
    l1 += fmix64((j + 0xd6e8feb86659fd93ULL) ^ v);
    const uint32_t a = u[i] & 0x7fffffffu;
    if (a >= 0x7f800000u) {
      nan += a > 0x7f800000u;
      inf += a == 0x7f800000u;
      continue;
    }
    if (a > absmax) absmax = a;
    uint32_t e = a >> 23;
    int64_t m = a & 0x7fffff;
    if (e) m |= 0x800000;
    else e = 1;
    sums[e] += (u[i] >> 31) ? -m : m;
    sq[e] += (unsigned __int128)(m * m);
  }
  lanes[0] = l0, lanes[1] = l1;
  for (int i = 0; i < 256; ++i) squares[2 * i] = (uint64_t)sq[i], squares[2 * i + 1] = (uint64_t)(sq[i] >> 64);
  counts[0] = nan, counts[1] = inf, counts[2] = absmax;
}

/* A replicated piece in one pass: the partial of its covered elements [k0, k1) as sp_partial_contiguous gives it
 * (lanes, sums, squares, counts), and in whole[2] the digest lanes of all n elements — the identity of the piece's
 * bytes that its replicas compare (two pieces with the same lanes over the same logical indices are, but for a
 * 2^-128 chance, the same bits), for a fraction of a SHA-256's cost. */
static void add_lanes(const uint32_t* u, int64_t a, int64_t b, uint64_t first, uint64_t* w) {
  const uint64_t prime = 0x100000001b3ULL;
  uint64_t w0 = w[0], w1 = w[1], j = (first + (uint64_t)a) * prime;
  for (int64_t i = a; i < b; ++i, j += prime) {
    const uint64_t bits = u[i], v = (bits << 17) ^ bits;
    w0 += fmix64((j + 0x9e3779b97f4a7c15ULL) ^ v);
    w1 += fmix64((j + 0xd6e8feb86659fd93ULL) ^ v);
  }
  w[0] = w0, w[1] = w1;
}

void sp_partial_piece(const uint32_t* u, int64_t n, uint64_t first, int64_t k0, int64_t k1, uint64_t* lanes,
                      int64_t* sums, uint64_t* squares, uint64_t* counts, uint64_t* whole) {
  sp_partial_contiguous(u + k0, k1 - k0, first + (uint64_t)k0, lanes, sums, squares, counts);
  whole[0] = lanes[0], whole[1] = lanes[1];
  add_lanes(u, 0, k0, first, whole);
  add_lanes(u, k1, n, first, whole);
}
