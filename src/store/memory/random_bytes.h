// store/memory/random_bytes.h: bytes from the operating system's random source (getrandom), for what must not be
// guessed: digest seeds, lease and reservation ids.
//
//   std::array<std::uint8_t, 16> id;
//   random_bytes(id);  // throws std::runtime_error if the system has none to give
#pragma once

#include <cstdint>
#include <span>

namespace rk::store::memory {

void random_bytes(std::span<std::uint8_t> out);

}  // namespace rk::store::memory
