#include "ratekeeper/units.h"

#include <cmath>
#include <cstdio>

#include "core/numeric.h"

namespace rk {

namespace {

// Parses "[-]digits[.digits]" exactly into whole and nanosecond-fraction parts scaled by `unit_ns`.
std::optional<std::int64_t> parse_decimal(std::string_view s, std::int64_t unit_ns, bool allow_negative) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    if (!allow_negative) return std::nullopt;
    negative = true;
    s.remove_prefix(1);
  }
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (whole.empty() && frac.empty()) return std::nullopt;
  if (dot != std::string_view::npos && frac.empty()) return std::nullopt;
  core::i128 total = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return std::nullopt;
    total = total * 10 + (c - '0');
    if (total > core::kMaxI64) return std::nullopt;
  }
  total *= unit_ns;
  // The fraction, in units of unit_ns / 10^k, must come out whole in nanoseconds.
  core::i128 scale = unit_ns;
  core::i128 frac_ns = 0;
  core::i128 denom = 1;
  for (char c : frac) {
    if (c < '0' || c > '9') return std::nullopt;
    if (denom > 1'000'000'000'000'000'000LL) return std::nullopt;  // more digits than any unit needs
    frac_ns = frac_ns * 10 + (c - '0');
    denom *= 10;
  }
  const core::i128 scaled = frac_ns * scale;
  if (scaled % denom != 0) return std::nullopt;  // finer than a nanosecond
  total += scaled / denom;
  if (total > core::kMaxI64) return std::nullopt;
  return negative ? -static_cast<std::int64_t>(total) : static_cast<std::int64_t>(total);
}

}  // namespace

std::optional<Nanos> parse_duration(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    std::int64_t ns;
  };
  // Longest suffixes first, so "ms" is not read as "m" + "s".
  static constexpr Unit kUnits[] = {{"ns", 1},
                                    {"us", 1'000},
                                    {"ms", 1'000'000},
                                    {"s", kNanosPerSecond},
                                    {"m", 60'000'000'000},
                                    {"h", 3'600'000'000'000},
                                    {"d", 86'400'000'000'000},
                                    {"w", 604'800'000'000'000}};
  for (const Unit& u : kUnits) {
    if (text.size() > u.suffix.size() && text.ends_with(u.suffix)) {
      const std::string_view number = text.substr(0, text.size() - u.suffix.size());
      if (number.back() < '0' || number.back() > '9') continue;  // "10ms" must not match "s" with "10m"
      if (auto v = parse_decimal(number, u.ns, false)) return Nanos{*v};
      return std::nullopt;
    }
  }
  if (auto v = parse_decimal(text, kNanosPerSecond, false)) return Nanos{*v};
  return std::nullopt;
}

std::optional<Nanos> parse_seconds(std::string_view text) {
  if (auto v = parse_decimal(text, kNanosPerSecond, true)) return Nanos{*v};
  return std::nullopt;
}

std::string format_seconds(Nanos d) {
  const std::int64_t ns = d.count();
  const bool negative = ns < 0;
  const core::u128 mag = negative ? static_cast<core::u128>(-(ns + 1)) + 1 : static_cast<core::u128>(ns);
  const auto whole = static_cast<unsigned long long>(mag / kNanosPerSecond);
  const auto frac = static_cast<unsigned long long>(mag % kNanosPerSecond);
  char buf[48];
  int n = std::snprintf(buf, sizeof buf, "%s%llu", negative ? "-" : "", whole);
  if (frac != 0) {
    n += std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), ".%09llu", frac);
    while (buf[n - 1] == '0') --n;
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

double to_seconds(Nanos d) { return static_cast<double>(d.count()) / kNanosPerSecond; }

Nanos nanos_from_seconds_ceil(double seconds) {
  if (std::isnan(seconds)) return Nanos{0};
  const double ns = std::ceil(seconds * kNanosPerSecond);
  if (ns >= 9.2e18) return Nanos::max();
  if (ns <= -9.2e18) return Nanos::min();
  return Nanos{static_cast<std::int64_t>(ns)};
}

}  // namespace rk
