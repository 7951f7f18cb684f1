// store/memory/hash.h: a seeded 64-bit hash for keys that attackers choose.
//
// Folded multiplication (the 128-bit product's halves xor-ed) over 16-byte blocks, mixed with a per-store secret
// seed, so that colliding keys cannot be computed offline. Fast on short keys (IP addresses, API keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/numeric.h"

namespace rk::store {

namespace hash_detail {

// Odd constants with well-spread bits: the golden ratio's and two of splitmix64's multipliers.
constexpr std::uint64_t kP0 = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kP1 = 0xBF58476D1CE4E5B9ULL;
constexpr std::uint64_t kP2 = 0x94D049BB133111EBULL;

inline std::uint64_t fold_mul(std::uint64_t a, std::uint64_t b) {
  const core::u128 r = static_cast<core::u128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline std::uint64_t load32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Keys over 16 bytes: their 16-byte blocks but the last, folded into h.
std::uint64_t hash_long_prefix(const unsigned char* p, std::size_t n, std::uint64_t h, std::uint64_t seed);

}  // namespace hash_detail

namespace hash_detail {

// What the hash starts from: the seed and the key's length.
inline std::uint64_t start(std::uint64_t seed, std::size_t n) { return seed ^ fold_mul(seed ^ kP0, n ^ kP1); }

// The hash of `key` from h0 = start(seed, key.size()); seed_p2 = seed ^ kP2.
[[gnu::always_inline]] inline std::uint64_t hash_from(std::string_view key, std::uint64_t seed, std::uint64_t seed_p2,
                                                      std::uint64_t h0) {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  const std::size_t n = key.size();
  std::uint64_t h = h0;
  std::uint64_t a = 0, b = 0;
  if (n <= 16) [[likely]] {
    if (n >= 8) {
      a = load64(p);
      b = load64(p + n - 8);
    } else if (n >= 4) {
      a = load32(p);
      b = load32(p + n - 4);
    } else if (n > 0) {
      a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[n / 2]} << 8) | p[n - 1];
    }
  } else {
    h = hash_long_prefix(p, n, h, seed);
    a = load64(p + n - 16);
    b = load64(p + n - 8);
  }
  h = fold_mul(a ^ kP1 ^ h, b ^ seed_p2);
  return fold_mul(h ^ kP0, seed_p2);
}

}  // namespace hash_detail

// Inline: a decision hashes its key first, and a call there is a measurable part of a hot key's ~20 ns. Keys
// over 16 bytes fold their leading blocks out of line.
[[gnu::always_inline]] inline std::uint64_t hash_key(std::string_view key, std::uint64_t seed) {
  using namespace hash_detail;
  return hash_from(key, seed, seed ^ kP2, start(seed, key.size()));
}

// hash_key(key, seed) for one seed, with what depends on the seed alone computed once, and for keys up to 16 bytes
// the start from their length: one multiplication fewer on a decision's longest chain of dependent ones.
class KeyHasher {
 public:
  explicit KeyHasher(std::uint64_t seed) : seed_(seed), seed_p2_(seed ^ hash_detail::kP2) {
    for (std::size_t n = 0; n <= kShort; ++n) start_[n] = hash_detail::start(seed, n);
  }
  [[gnu::always_inline]] std::uint64_t operator()(std::string_view key) const {
    const std::size_t n = key.size();
    return hash_detail::hash_from(key, seed_, seed_p2_, n <= kShort ? start_[n] : hash_detail::start(seed_, n));
  }
  std::uint64_t seed() const { return seed_; }

 private:
  static constexpr std::size_t kShort = 16;
  std::uint64_t seed_, seed_p2_;
  std::uint64_t start_[kShort + 1];
};

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
