// store/memory/key_digest.h: a key too long for a fixed-size slot, said in 16 bytes that an attacker cannot make
// collide.
//
// SipHash-2-4 with its 128-bit output (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed
// pseudo-random function, so without the 16-byte seed nobody can compute, offline or by probing, two keys with one
// digest. The nginx module stores a key longer than its zone's key_size this way (docs/nginx.md).
//
//   const KeyDigestSeed seed = random_digest_seed();   // once per zone, kept as long as its state
//   const KeyDigest d = key_digest(seed, long_api_key);
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace rk::store::memory {

using KeyDigestSeed = std::array<std::uint8_t, 16>;
using KeyDigest = std::array<std::uint8_t, 16>;

KeyDigest key_digest(const KeyDigestSeed& seed, std::string_view key);

// From the operating system's random source (getrandom); throws if it has none to give.
KeyDigestSeed random_digest_seed();

}  // namespace rk::store::memory
