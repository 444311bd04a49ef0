// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). A value is a pure function
// of (key, counter): no state advances, so element j of tensor `name` is the same number whichever
// rank computes it and in whatever order. This is what makes initialization shard-invariant
// (docs/architecture.md, "Shard-invariant initialization") and data order topology-free.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace sp {

using PhiloxKey = std::array<uint32_t, 2>;
using PhiloxBlock = std::array<uint32_t, 4>;

// Ten rounds of Philox4x32 on `counter` under `key`.
PhiloxBlock philox4x32(PhiloxBlock counter, PhiloxKey key);

// Key for a named stream: mixes the seed with a 64-bit hash of the name.
PhiloxKey philox_key(uint64_t seed, std::string_view stream_name);

// The j-th 64-bit word of stream `key`; `lane` selects an independent sub-stream.
uint64_t random_u64(PhiloxKey key, uint64_t j, uint32_t lane = 0);
// Uniform double in (0, 1), 53 random bits, never 0 or 1.
double random_uniform(PhiloxKey key, uint64_t j, uint32_t lane = 0);
// Standard normal (Box–Muller on one Philox block).
double random_normal(PhiloxKey key, uint64_t j, uint32_t lane = 0);

}  // namespace sp
