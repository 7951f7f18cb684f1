// ratekeeper/units.h: the one time type, and durations as people write them.
//
// All time in ratekeeper is integer nanoseconds (rk::Nanos). A time point is nanoseconds since the clock's epoch
// (the Unix epoch for SystemClock). Durations parse from the forms used in configs and on the command line:
//
//   rk::parse_duration("10s")    -> 10'000'000'000ns
//   rk::parse_duration("1.5m")   -> 90s        units: ns us ms s m h d w
//   rk::format_seconds(rk::Nanos{1'500'000'000}) -> "1.5"
#pragma once

#include "ratekeeper/export.h"
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rk {

using Nanos = std::chrono::nanoseconds;

// Nanoseconds in a second: where a count of nanoseconds meets one of seconds.
inline constexpr std::int64_t kNanosPerSecond = 1'000'000'000;

// "Never": a retry_after that no amount of waiting satisfies (a cost above what the limit can ever admit).
inline constexpr Nanos kNever = Nanos::max();

// Parses "<decimal><unit>" (units ns, us, ms, s, m, h, d, w). A bare number is seconds. Rejects negative values,
// garbage and values beyond ~292 years; returns nullopt for those.
RK_EXPORT std::optional<Nanos> parse_duration(std::string_view text);

// Parses a decimal number of seconds ("12", "0.25", "-3.000000001") exactly to nanoseconds (at most 9 decimals).
RK_EXPORT std::optional<Nanos> parse_seconds(std::string_view text);

// Seconds with up to 9 decimals and no trailing zeros: 1.5, 0.000000001, 12.
RK_EXPORT std::string format_seconds(Nanos d);

// Seconds as double; Nanos from seconds, rounded up and saturated to [Nanos::min(), Nanos::max()] (NaN -> 0).
RK_EXPORT double to_seconds(Nanos d);
RK_EXPORT Nanos nanos_from_seconds_ceil(double seconds);

}  // namespace rk
