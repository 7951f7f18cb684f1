#include "store/memory/hash.h"

#include "core/numeric.h"

#include <bit>
#include <cstring>
#include <random>

namespace rk::store {

namespace {

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

}  // namespace

std::uint64_t hash_key(std::string_view key, std::uint64_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  std::size_t n = key.size();
  std::uint64_t h = seed ^ fold_mul(seed ^ kP0, n ^ kP1);
  std::uint64_t a = 0, b = 0;
  if (n <= 16) {
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
    const unsigned char* end = p + n;
    while (n > 16) {
      h = fold_mul(load64(p) ^ kP1 ^ h, load64(p + 8) ^ seed ^ kP2);
      p += 16;
      n -= 16;
    }
    a = load64(end - 16);
    b = load64(end - 8);
  }
  h = fold_mul(a ^ kP1 ^ h, b ^ seed ^ kP2);
  return fold_mul(h ^ kP0, seed ^ kP2);
}

namespace {

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

}  // namespace

Digest128 siphash128(std::string_view data, const DigestKey& key) {
  // The constants spell "somepseudorandomlygeneratedbytes"; v1 carries 0xee (its 0x6d ^ 0xee = 0x83), which marks
  // the 128-bit variant. Loads are little-endian (as the reference), which the platforms we build for are.
  SipState s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f83ULL, key.k0 ^ 0x6c7967656e657261ULL,
             key.k1 ^ 0x7465646279746573ULL};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t n = data.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) s.absorb(load64(p + i));
  std::uint64_t last = static_cast<std::uint64_t>(n & 0xff) << 56;
  for (std::size_t j = 0; i + j < n; ++j) last |= std::uint64_t{p[i + j]} << (8 * j);
  s.absorb(last);
  const std::uint64_t lo = s.squeeze(0xee);
  s.v1 ^= 0xdd;
  for (int r = 0; r < 4; ++r) s.round();
  return {lo, s.v0 ^ s.v1 ^ s.v2 ^ s.v3};
}

const DigestKey& process_digest_key() {
  static const DigestKey key{random_seed(), random_seed()};
  return key;
}

std::uint64_t random_seed() {
  std::random_device rd;
  std::uint64_t s = (std::uint64_t{rd()} << 32) ^ rd();
  return s ? s : kP0;
}

}  // namespace rk::store
