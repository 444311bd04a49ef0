#include "core/rng.h"

#include <xxhash.h>

#include <cmath>
#include <numbers>

namespace sp {
namespace {
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace

PhiloxBlock philox4x32(PhiloxBlock c, PhiloxKey k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

PhiloxKey philox_key(uint64_t seed, std::string_view stream_name) {
  const uint64_t h = XXH3_64bits_withSeed(stream_name.data(), stream_name.size(), seed);
  return {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

static PhiloxBlock block_at(PhiloxKey key, uint64_t j, uint32_t lane) {
  return philox4x32({static_cast<uint32_t>(j), static_cast<uint32_t>(j >> 32), lane, 0u}, key);
}

uint64_t random_u64(PhiloxKey key, uint64_t j, uint32_t lane) {
  const PhiloxBlock b = block_at(key, j, lane);
  return (static_cast<uint64_t>(b[0]) << 32) | b[1];
}

static double uniform_from(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;  // 53 bits
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

double random_uniform(PhiloxKey key, uint64_t j, uint32_t lane) {
  const PhiloxBlock b = block_at(key, j, lane);
  return uniform_from(b[0], b[1]);
}

double random_normal(PhiloxKey key, uint64_t j, uint32_t lane) {
  const PhiloxBlock b = block_at(key, j, lane);
  const double u1 = uniform_from(b[0], b[1]);
  const double u2 = uniform_from(b[2], b[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace sp
