#include "store/memory/key_digest.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "base/hash.h"

namespace rk::store::memory {

namespace {

std::uint64_t load_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

void store_le(std::uint64_t v, std::uint8_t* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

// The same SipHash-2-4-128 the in-process store digests long keys with (base/hash.h), under the caller's seed.
KeyDigest key_digest(const KeyDigestSeed& seed, std::string_view key) {
  const base::Digest128 d = base::siphash128(key, base::DigestKey{load_le(seed.data()), load_le(seed.data() + 8)});
  KeyDigest out;
  store_le(d.lo, out.data());
  store_le(d.hi, out.data() + 8);
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

}  // namespace rk::store::memory
