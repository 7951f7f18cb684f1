// cli/trace.h: one attempt per line, "<time-seconds> <key> [cost]", as `ratekeeper replay` reads it.
//
// Blank lines and lines starting with '#' carry nothing. Times are decimal seconds with at most 9 decimals, read
// exactly; the cost is a whole number (default 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ratekeeper/units.h"

namespace rk::cli {

struct TraceLine {
  Nanos time{0};
  std::string_view key;  // points into the parsed line
  std::uint64_t cost = 1;
};

enum class TraceParse { kAttempt, kNothing, kError };

// Parses one line; on kError, `error` says what is wrong (without the line number).
TraceParse parse_trace_line(std::string_view line, std::size_t max_key_bytes, TraceLine& out, std::string& error);

}  // namespace rk::cli
