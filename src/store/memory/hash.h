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

}  // namespace rk::store
