// base/hex.h: hexadecimal digits read and written: percent-escapes, JSON's \u escapes, short names made of a hash.
//
//   hex_value('b') -> 11     hex_value('g') -> -1
//   hex16(0xcbf29ce484222325) -> "cbf29ce484222325"     append_hex(out, 0x1f) appends "1f"
//   hex_text(bytes) -> "00ff..."     parse_hex("00ff", bytes) -> true, bytes = {0x00, 0xff}
//
// Header-only, so that libratekeeper, which links nothing of rk_base, writes its names the same way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace rk::base {

// The value of one hex digit, either case; -1 for any other byte.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline constexpr char kHexDigits[] = "0123456789abcdef";

// A byte as two lower-case digits.
inline void append_hex(std::string& out, unsigned char byte) {
  out += kHexDigits[byte >> 4];
  out += kHexDigits[byte & 15];
}

// All 64 bits as 16 lower-case digits, leading zeros kept.
inline std::string hex16(std::uint64_t v) {
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = kHexDigits[v & 15];
  return out;
}

// Bytes as two lower-case digits each (lease ids).
inline std::string hex_text(std::span<const std::uint8_t> bytes) {
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) append_hex(out, b);
  return out;
}

// Exactly 2 * out.size() hex digits into out; false, out unspecified, for any other text.
inline bool parse_hex(std::string_view text, std::span<std::uint8_t> out) {
  if (text.size() != 2 * out.size()) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

}  // namespace rk::base
