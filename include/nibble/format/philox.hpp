// Counter-based random bits for stochastic rounding: Philox-4x32 with 10 rounds (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11). The bits for element i depend only on
// (seed, stream, i), so CPU and GPU, and any split of work across threads, agree bit for bit.
#pragma once
#include "nibble/format/host_device.hpp"

namespace nibble::fmt {

struct Philox4 {
  uint32_t v[4];
};

NIBBLE_HD constexpr void mulhilo32(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// The key of every round: (k0, k1) + round * (Weyl increments). A kernel that draws many blocks
// computes them once on the host and keeps them in its parameters, so that each round reads its key
// from constant memory (two 32-bit adds per round and block less on the GPU).
struct PhiloxKeys {
  uint32_t k0[10], k1[10];
};
NIBBLE_HD constexpr PhiloxKeys philox_round_keys(uint32_t k0, uint32_t k1) {
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  PhiloxKeys k{};
  for (int round = 0; round < 10; ++round) {
    k.k0[round] = k0;
    k.k1[round] = k1;
    k0 += kW0;
    k1 += kW1;
  }
  return k;
}

NIBBLE_HD constexpr Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, const PhiloxKeys& k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
    mulhilo32(kM0, c0, hi0, lo0);
    mulhilo32(kM1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k.k0[round], n1 = lo1, n2 = hi0 ^ c3 ^ k.k1[round], n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
  }
  return Philox4{{c0, c1, c2, c3}};
}
NIBBLE_HD constexpr Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                         uint32_t k0, uint32_t k1) {
  return philox4x32_10(c0, c1, c2, c3, philox_round_keys(k0, k1));
}

// Philox block `block` of stream `stream`: the counter is (block, stream, "nibl"), the key the seed
// (as round keys: a kernel passes them precomputed). Block b holds the bits of elements 4b .. 4b + 3.
inline constexpr uint32_t kRandomBitsTag = 0x6e69626cu;  // "nibl"
NIBBLE_HD constexpr Philox4 random_block(const PhiloxKeys& keys, uint32_t stream, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), stream, kRandomBitsTag, keys);
}
NIBBLE_HD constexpr PhiloxKeys seed_round_keys(uint64_t seed) {
  return philox_round_keys(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// 32 random bits for element `index` of stream `stream` under `seed`. One Philox block serves four
// consecutive elements (index / 4 is the counter, index % 4 picks the word).
NIBBLE_HD constexpr uint32_t random_bits(uint64_t seed, uint32_t stream, uint64_t index) {
  return random_block(seed_round_keys(seed), stream, index >> 2).v[index & 3];
}

}  // namespace nibble::fmt
