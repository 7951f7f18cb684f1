#include "cli/csv.h"

#include <cstdio>

namespace rk::cli {

std::string csv_number(double v) {
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%.6f", v);
  if (n < 0 || n >= static_cast<int>(sizeof buf)) {  // beyond 1e50 or so: exponent notation, never truncated
    n = std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf, static_cast<std::size_t>(n));
  }
  while (n > 0 && buf[n - 1] == '0') --n;
  if (n > 0 && buf[n - 1] == '.') --n;
  std::string s(buf, static_cast<std::size_t>(n));
  return s == "-0" ? "0" : s;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace rk::cli
