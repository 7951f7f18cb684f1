// core/numeric.h: saturating integer time arithmetic, so that absurd costs, clocks at the ends of their range and
// durations of centuries give clamped numbers instead of overflow (undefined behaviour) or NaN.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace rk::core {

__extension__ typedef unsigned __int128 u128;  // GCC and Clang; -Wpedantic wants the __extension__
__extension__ typedef __int128 i128;

inline constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kMinI64 = std::numeric_limits<std::int64_t>::min();

inline std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMaxI64 : kMinI64;
  return r;
}

inline std::int64_t sat_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kMaxI64 : kMinI64;
  return r;
}

// count * unit for unit >= 0, clamped to kMaxI64.
inline std::int64_t sat_mul(std::uint64_t count, std::int64_t unit) {
  const u128 r = static_cast<u128>(count) * static_cast<u128>(unit);
  return r > static_cast<u128>(kMaxI64) ? kMaxI64 : static_cast<std::int64_t>(r);
}

inline std::uint64_t sat_add_u(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::numeric_limits<std::uint64_t>::max();
  return r;
}

// Floor division for a possibly negative time and a positive divisor.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}

// Start of the window of length `w` holding time `t`, windows aligned to time 0.
inline std::int64_t window_start(std::int64_t t, std::int64_t w) {
  const std::int64_t q = floor_div(t, w);
  return (q < 0 ? -sat_mul(static_cast<std::uint64_t>(-q), w) : sat_mul(static_cast<std::uint64_t>(q), w));
}

// A duration in (fractional) nanoseconds as whole nanoseconds, rounded up and clamped to [0, kMaxI64].
inline std::int64_t ceil_ns(double ns) {
  if (!(ns > 0)) return 0;  // also NaN
  if (ns >= 9.2e18) return kMaxI64;
  return static_cast<std::int64_t>(std::ceil(ns));
}

// ln(x) for x > 1, never below the true value and above it by less than 6e-11: for durations that must not come
// early (EARRRL's reset_after), at a third of std::log's cost. x = 2^e * m with m in [sqrt(1/2), sqrt(2)), and
// ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716, summed to s^11: the rest is below 1.8e-11, rounding
// below 1e-12, and 4e-11 is added so the result is an upper bound.
inline double ln_at_least(double x) {
  if (!(x < std::numeric_limits<double>::max())) return std::numeric_limits<double>::infinity();
  const auto bits = std::bit_cast<std::uint64_t>(x);
  int e = static_cast<int>(bits >> 52) - 1023;
  double m = std::bit_cast<double>((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;
  const double ln_m = s * (2 + s2 * (2.0 / 3 + s2 * (2.0 / 5 + s2 * (2.0 / 7 + s2 * (2.0 / 9 + s2 * (2.0 / 11))))));
  return e * 0.6931471805599453 + ln_m + 4e-11;
}

}  // namespace rk::core
