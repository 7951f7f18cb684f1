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

// count * unit for unit >= 0, clamped to kMaxI64. (One multiplication and an overflow flag: GCC makes a 128-bit
// product and two compares of it otherwise, on every gcra decision.)
inline std::int64_t sat_mul(std::uint64_t count, std::int64_t unit) {
  std::uint64_t r;
  if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(unit), &r) || r > static_cast<std::uint64_t>(kMaxI64)) {
    return kMaxI64;
  }
  return static_cast<std::int64_t>(r);
}

inline std::uint64_t sat_add_u(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::numeric_limits<std::uint64_t>::max();
  return r;
}

// a / b (b > 0) with one 64-bit division when both fit in 64 bits, the usual case: a 128-bit quotient is otherwise
// a call to the compiler's __udivti3 and a dozen instructions more.
inline u128 div_u128(u128 a, u128 b) {
  if ((static_cast<std::uint64_t>(a >> 64) | static_cast<std::uint64_t>(b >> 64)) == 0) {
    return static_cast<std::uint64_t>(a) / static_cast<std::uint64_t>(b);
  }
  return a / b;
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

// n / d for a divisor fixed in advance, as a multiplication (Granlund and Montgomery, "Division by invariant
// integers using multiplication", 1994, section 4): a 64-bit division takes tens of cycles on many x86-64 cores,
// and GCRA's `remaining` divides by its interval on every decision. Exact for every n and every d >= 1.
class Divider {
 public:
  Divider() = default;
  explicit Divider(std::uint64_t d) {
    const int l = d == 1 ? 0 : 64 - __builtin_clzll(d - 1);  // ceil(log2 d)
    // m = floor(2^64 * (2^l - d) / d) + 1 < 2^64
    m_ = static_cast<std::uint64_t>((static_cast<u128>((u128{1} << l) - d) << 64) / d) + 1;
    shift1_ = l > 0 ? 1 : 0;
    shift2_ = l > 0 ? l - 1 : 0;
  }
  std::uint64_t divide(std::uint64_t n) const {
    const auto t = static_cast<std::uint64_t>((static_cast<u128>(m_) * n) >> 64);
    return (t + ((n - t) >> shift1_)) >> shift2_;
  }

 private:
  std::uint64_t m_ = 1;  // with the shifts 0: divides by 1
  int shift1_ = 0;
  int shift2_ = 0;
};

}  // namespace rk::core
