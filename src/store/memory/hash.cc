#include "store/memory/hash.h"

#include <bit>
#include <cstring>
#include <random>

namespace rk::store {

using hash_detail::kP0;
using hash_detail::load64;

std::uint64_t hash_detail::hash_long_prefix(const unsigned char* p, std::size_t n, std::uint64_t h,
                                            std::uint64_t seed) {
  while (n > 16) {
    h = fold_mul(load64(p) ^ kP1 ^ h, load64(p + 8) ^ seed ^ kP2);
    p += 16;
    n -= 16;
  }
  return h;
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
