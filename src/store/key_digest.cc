#include "store/key_digest.h"

#include <sys/random.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rk::store {

namespace {

std::uint64_t load_le(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

void store_le(std::uint64_t v, std::uint8_t* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

struct Sip {
  std::uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1, v1 = std::rotl(v1, 13), v1 ^= v0, v0 = std::rotl(v0, 32);
    v2 += v3, v3 = std::rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = std::rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = std::rotl(v1, 17), v1 ^= v2, v2 = std::rotl(v2, 32);
  }
  void compress(std::uint64_t m) {
    v3 ^= m;
    round(), round();  // the "2" of SipHash-2-4
    v0 ^= m;
  }
  std::uint64_t finish_half() {
    for (int i = 0; i < 4; ++i) round();  // the "4"
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

}  // namespace

KeyDigest key_digest(const KeyDigestSeed& seed, std::string_view key) {
  const std::uint64_t k0 = load_le(seed.data(), 8), k1 = load_le(seed.data() + 8, 8);
  // The 128-bit variant differs from the 64-bit one by the 0xee and 0xdd below.
  Sip s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL ^ 0xee, k0 ^ 0x6c7967656e657261ULL,
        k1 ^ 0x7465646279746573ULL};
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  const std::size_t blocks = key.size() / 8;
  for (std::size_t i = 0; i < blocks; ++i) s.compress(load_le(p + 8 * i, 8));
  s.compress(load_le(p + 8 * blocks, key.size() % 8) | (std::uint64_t{key.size() & 0xff} << 56));
  s.v2 ^= 0xee;
  KeyDigest out;
  store_le(s.finish_half(), out.data());
  s.v1 ^= 0xdd;
  store_le(s.finish_half(), out.data() + 8);
  return out;
}

KeyDigestSeed random_digest_seed() {
  KeyDigestSeed seed;
  std::size_t got = 0;
  while (got < seed.size()) {
    const ssize_t n = getrandom(seed.data() + got, seed.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  return seed;
}

}  // namespace rk::store
