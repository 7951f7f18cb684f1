// cli/csv.h: how the command-line tools write numbers and fields in CSV.
//
//   csv_number(0.5) -> "0.5"   csv_number(2.0) -> "2"   csv_number(0.1 + 0.2) -> "0.30000000000000004"
//   csv_field("a,b") -> "\"a,b\""
#pragma once

#include <string>
#include <string_view>

namespace rk::cli {

// The shortest text that reads back as exactly v (std::to_chars; 1e-05 style for very small or large values),
// never "-0". Durations are not numbers here: they are written with format_seconds (exact, up to 9 decimals).
std::string csv_number(double v);

// The field as is, or quoted when it holds a comma, a quote or a newline.
std::string csv_field(std::string_view s);

}  // namespace rk::cli
