// core/numeric.h: saturating integer time arithmetic, so that absurd costs, clocks at the ends of their range and
// durations of centuries give clamped numbers instead of overflow (undefined behaviour) or NaN.
#pragma once

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

}  // namespace rk::core
