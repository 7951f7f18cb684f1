// base/number_text.h: a double as text, in the C locale whatever the process's (printf would write "0,5" under
// de_DE). Two ways, for two readers:
//
//   shortest_number(0.1)        -> "0.1"          the shortest text that reads back as exactly v: for machines (a
//   shortest_number(1e13)       -> "1e+13"        Redis script's ARGV, a CSV checked against the maths) and for
//                                                 messages that name a value exactly
//   digits_number(1e7, 10)      -> "10000000"     printf's %.<digits>g: whole numbers below 10^digits written out,
//   digits_number(0.1, 17)      -> "0.10000000000000001"                  for messages a person reads
//
// Both write nan, inf and -inf for those, and keep the sign of -0. Header-only, so that libratekeeper, which
// links nothing of rk_base, words its messages the same way.
#pragma once

#include <charconv>
#include <string>

namespace rk::base {

inline std::string shortest_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// As printf's "%.*g" in the C locale, digits from 1 to 17 (the most a double has).
inline std::string digits_number(double v, int digits) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
  return std::string(buf, r.ptr);
}

}  // namespace rk::base
