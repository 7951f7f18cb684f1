#include "cli/csv.h"

#include "base/number_text.h"

namespace rk::cli {

std::string csv_number(double v) {
  if (v == 0) return "0";  // and never "-0"
  // Shortest text that reads back as exactly v, so the output can be checked against the maths.
  return base::shortest_number(v);
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
