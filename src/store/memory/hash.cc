#include "store/memory/hash.h"

#include "core/numeric.h"

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

std::uint64_t random_seed() {
  std::random_device rd;
  std::uint64_t s = (std::uint64_t{rd()} << 32) ^ rd();
  return s ? s : kP0;
}

}  // namespace rk::store
