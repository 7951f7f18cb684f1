// base/hash.h: a seeded 64-bit hash for keys that attackers choose.
//
// Folded multiplication (the 128-bit product's halves xor-ed) over 16-byte blocks, mixed with a per-store secret
// seed, so that colliding keys cannot be computed offline. Fast on short keys (IP addresses, API keys).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>

namespace rk::base {

namespace hash_detail {

// Odd constants with well-spread bits: the golden ratio's and two of splitmix64's multipliers.
constexpr std::uint64_t kP0 = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kP1 = 0xBF58476D1CE4E5B9ULL;
constexpr std::uint64_t kP2 = 0x94D049BB133111EBULL;

inline std::uint64_t fold_mul(std::uint64_t a, std::uint64_t b) {
  __extension__ using u128 = unsigned __int128;
  const u128 r = static_cast<u128>(a) * b;
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
[[gnu::noinline]] inline std::uint64_t hash_long_prefix(const unsigned char* p, std::size_t n, std::uint64_t h,
                                                        std::uint64_t seed) {
  while (n > 16) {
    h = fold_mul(load64(p) ^ kP1 ^ h, load64(p + 8) ^ seed ^ kP2);
    p += 16;
    n -= 16;
  }
  return h;
}

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
// over 16 bytes fold their leading blocks in a call of its own.
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
inline std::uint64_t random_seed() {
  std::random_device rd;
  std::uint64_t s = (std::uint64_t{rd()} << 32) ^ rd();
  return s ? s : hash_detail::kP0;
}

// SipHash-2-4 with its 128-bit output (Aumasson and Bernstein's keyed PRF): a digest of an attacker's key that
// stands for it, collision-resistant while the 128-bit secret is unknown (2^64 keys for an even chance).
struct DigestKey {
  std::uint64_t k0, k1;
};
struct Digest128 {
  std::uint64_t lo, hi;
};
namespace hash_detail {

struct SipState {
  std::uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1;
    v1 = std::rotl(v1, 13) ^ v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16) ^ v2;
    v0 += v3;
    v3 = std::rotl(v3, 21) ^ v0;
    v2 += v1;
    v1 = std::rotl(v1, 17) ^ v2;
    v2 = std::rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  std::uint64_t squeeze(std::uint64_t mark) {
    v2 ^= mark;
    for (int i = 0; i < 4; ++i) round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

}  // namespace hash_detail

inline Digest128 siphash128(std::string_view data, const DigestKey& key) {
  // The constants spell "somepseudorandomlygeneratedbytes"; v1 carries 0xee (its 0x6d ^ 0xee = 0x83), which marks
  // the 128-bit variant. Loads are little-endian (as the reference), which the platforms we build for are.
  hash_detail::SipState s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f83ULL,
                          key.k0 ^ 0x6c7967656e657261ULL, key.k1 ^ 0x7465646279746573ULL};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t n = data.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) s.absorb(hash_detail::load64(p + i));
  std::uint64_t last = static_cast<std::uint64_t>(n & 0xff) << 56;
  for (std::size_t j = 0; i + j < n; ++j) last |= std::uint64_t{p[i + j]} << (8 * j);
  s.absorb(last);
  const std::uint64_t lo = s.squeeze(0xee);
  s.v1 ^= 0xdd;
  for (int r = 0; r < 4; ++r) s.round();
  return {lo, s.v0 ^ s.v1 ^ s.v2 ^ s.v3};
}

// A secret drawn from std::random_device once per process.
inline const DigestKey& process_digest_key() {
  static const DigestKey key{random_seed(), random_seed()};
  return key;
}

}  // namespace rk::base
