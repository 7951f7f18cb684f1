// cli/csv.h: how the command-line tools write numbers and fields in CSV.
//
//   csv_number(0.5) -> "0.5"   csv_number(2.0) -> "2"   csv_field("a,b") -> "\"a,b\""
#pragma once

#include <string>
#include <string_view>

namespace rk::cli {

// Up to 6 decimals, no trailing zeros, never "-0".
std::string csv_number(double v);

// The field as is, or quoted when it holds a comma, a quote or a newline.
std::string csv_field(std::string_view s);

}  // namespace rk::cli
