// store/memory/hash.h: a seeded 64-bit hash for keys that attackers choose.
//
// Folded multiplication (the 128-bit product's halves xor-ed) over 16-byte blocks, mixed with a per-store secret
// seed, so that colliding keys cannot be computed offline. Fast on short keys (IP addresses, API keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rk::store {

std::uint64_t hash_key(std::string_view key, std::uint64_t seed);

// A seed from std::random_device, never 0.
std::uint64_t random_seed();

// SipHash-2-4 with its 128-bit output (Aumasson and Bernstein's keyed PRF): a digest of an attacker's key that
// stands for it, collision-resistant while the 128-bit secret is unknown (2^64 keys for an even chance).
struct DigestKey {
  std::uint64_t k0, k1;
};
struct Digest128 {
  std::uint64_t lo, hi;
};
Digest128 siphash128(std::string_view data, const DigestKey& key);

// A secret drawn from std::random_device once per process.
const DigestKey& process_digest_key();

}  // namespace rk::store
