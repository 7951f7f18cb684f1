// library/random_id.h: the one shape of an id that proves its holder was given it (a lease's, a reservation's):
// 128 bits from the operating system's random source, written as 32 lowercase hex digits.
//
//   std::string id = library::random_id();  // "3f9c…", 32 digits
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/hex.h"
#include "store/memory/random_bytes.h"

namespace rk::library {

inline constexpr std::size_t kRandomIdDigits = 32;

inline std::string random_id() {
  std::array<std::uint8_t, kRandomIdDigits / 2> bytes;
  store::memory::random_bytes(bytes);
  std::string out;
  out.reserve(kRandomIdDigits);
  for (std::uint8_t b : bytes) base::append_hex(out, b);
  return out;
}

// Whether `text` has the shape random_id() gives (anything else names nothing that was handed out).
inline bool random_id_shaped(std::string_view text) {
  if (text.size() != kRandomIdDigits) return false;
  for (char c : text) {
    if (base::hex_value(c) < 0) return false;
  }
  return true;
}

}  // namespace rk::library
