// base/ascii.h: ASCII letters compared and lowered byte by byte, whatever the process's locale (std::tolower
// follows it): header names, tokens, host names, unit names, the words that mark a secret.
//
//   ascii_lower("Content-Type") -> "content-type"        iequals("Bearer", "bearer") -> true
//
// Bytes outside 'A'..'Z' are left as they are, so UTF-8 passes through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace rk::base {

constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

constexpr char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

inline std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_upper(c);
  return out;
}

constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

}  // namespace rk::base
