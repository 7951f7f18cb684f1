#include "cli/trace.h"

#include <charconv>

namespace rk::cli {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view next_field(std::string_view& rest) {
  std::size_t i = 0;
  while (i < rest.size() && is_space(rest[i])) ++i;
  std::size_t j = i;
  while (j < rest.size() && !is_space(rest[j])) ++j;
  const std::string_view field = rest.substr(i, j - i);
  rest.remove_prefix(j);
  return field;
}

std::string quoted(std::string_view s) {
  constexpr std::size_t kShown = 40;
  return "'" + std::string(s.substr(0, kShown)) + (s.size() > kShown ? "...'" : "'");
}

}  // namespace

TraceParse parse_trace_line(std::string_view line, std::size_t max_key_bytes, TraceLine& out, std::string& error) {
  std::string_view rest = line;
  const std::string_view time = next_field(rest);
  if (time.empty() || time[0] == '#') return TraceParse::kNothing;
  const std::string_view key = next_field(rest);
  const std::string_view cost = next_field(rest);
  const std::string_view extra = next_field(rest);

  const auto t = parse_seconds(time);
  if (!t) {
    error = "time " + quoted(time) + " is not a number of seconds (digits, an optional '-', at most 9 decimals)";
    return TraceParse::kError;
  }
  if (key.empty()) {
    error = "missing key: expected '<time-seconds> <key> [cost]'";
    return TraceParse::kError;
  }
  if (key.size() > max_key_bytes) {
    error = "key is " + std::to_string(key.size()) + " bytes, above the limit of " + std::to_string(max_key_bytes);
    return TraceParse::kError;
  }
  std::uint64_t c = 1;
  if (!cost.empty()) {
    const auto [ptr, ec] = std::from_chars(cost.data(), cost.data() + cost.size(), c);
    if (ec != std::errc{} || ptr != cost.data() + cost.size()) {
      error = "cost " + quoted(cost) + " is not a whole number from 0 to 18446744073709551615";
      return TraceParse::kError;
    }
  }
  if (!extra.empty()) {
    error = "unexpected " + quoted(extra) + " after the cost: expected '<time-seconds> <key> [cost]'";
    return TraceParse::kError;
  }
  out.time = *t;
  out.key = key;
  out.cost = c;
  return TraceParse::kAttempt;
}

}  // namespace rk::cli
