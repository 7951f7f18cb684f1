// core/fluid.h: the token bucket and the leaky bucket as a meter, computed lazily with no background drip.
//
// They are one algorithm seen from two sides: a leaky bucket's level is what a token bucket lacks of being full
// (capacity - tokens). The level drains at `limit` per window, and an attempt of cost c is allowed when
// level + c <= capacity, and then adds c. A fresh key (level 0) is a full token bucket and an empty leaky bucket.
//
// The level is kept in time, as GCRA keeps its schedule: the state is when the bucket will be empty, in whole
// nanoseconds plus a fraction of one (a request is T = window / limit nanoseconds of level, a full bucket
// C * T). An attempt of cost c is allowed when the backlog b + f (whole nanoseconds until empty, and the fraction)
// satisfies b <= floor(C*T - c*T - f). retry_after is the exact distance to the first nanosecond at which that
// holds, so an attempt at now + retry_after is allowed and one a nanosecond earlier is not, at any rate (a level
// kept in requests, with a tolerance for rounding, admitted up to 31.5 ms early at one request a year). With a
// whole capacity and a whole number of nanoseconds per request this is GCRA's test, decision for decision.
// A refused attempt changes nothing, but with count_refused (max_backlog): then it is owed, the level rising to at
// most max_backlog (capacity + limit requests), and drains at the rate like any other.
//
// A clock that goes backwards finds more backlog, never less: as for every algorithm, an earlier clock never
// admits what the latest time seen would refuse, and retry_after counts from the attempt's own time.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/numeric.h"
#include "core/charge.h"
#include "core/derived_params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct FluidState {
  std::int64_t empty_ns = kMinI64;  // the bucket is empty at empty_ns + frac; kMinI64: a fresh key
  double frac = 0;                  // in [0, 1)
};

void fluid_absorb(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t hits);
bool fluid_forgettable(const FluidParams& p, const FluidState& s, std::int64_t now);
// Gives back `amount` requests of a charge (a reservation settled for less): the level goes down by amount, but by
// no more than what is left of the charge in the backlog (held_until - now), and never below empty.
void fluid_refund(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t amount, const Charge& charge);

namespace fluid_detail {

// floor(x) as nanoseconds, clamped to the int64 range (also NaN, to the bottom). Truncation and a correction
// rather than std::floor, which is a library call on x86-64 without SSE4.1: this runs four times a decision.
inline std::int64_t floor_ns(double x) {
  if (!(x > -9.2e18)) return kMinI64;
  if (x >= 9.2e18) return kMaxI64;
  const auto t = static_cast<std::int64_t>(x);
  return static_cast<double>(t) > x ? t - 1 : t;
}

struct Backlog {
  std::int64_t whole;  // nanoseconds until empty, at `now`
  double frac;
};

inline Backlog backlog(const FluidState& s, std::int64_t now) {
  if (s.empty_ns < now) return {0, 0};
  return {sat_sub(s.empty_ns, now), s.frac};
}

// Below this, a whole number of nanoseconds converts to a double exactly.
constexpr std::uint64_t kExactInDouble = std::uint64_t{1} << 53;

// Whether whole nanoseconds w are at most floor_ns(y). For an integer, w <= floor(y) is w <= y, which a double
// compares exactly while w is in [0, 2^53]; floor_ns's clamps agree there (y >= 9.2e18 holds every such w; y <=
// -9.2e18 and NaN hold none). Saves a round trip through an integer on the decision's path.
inline bool at_most_floor(std::int64_t w, double y) {
  if (static_cast<std::uint64_t>(w) <= kExactInDouble) [[likely]]
    return static_cast<double>(w) <= y;
  return w <= floor_ns(y);
}

// Whether `k` more requests fit on top of backlog b: b <= floor(C*T - k*T - f). The one test every answer uses.
inline bool fits(const FluidParams& p, const Backlog& b, double k) {
  return at_most_floor(b.whole, p.tolerance - k * p.interval - b.frac);
}

// The most whole requests that fit now (the predicate is monotone in k, so the answer does not depend on where the
// search starts).
inline double room(const FluidParams& p, const Backlog& b) {
  // A guess within a request or two of the answer, then the test itself settles it. The guess clamped to [0,
  // floor(capacity)] (NaN: 0) is at most 1e12 (rk::kMaxLimit): truncation floors it.
  const double guess = (p.tolerance - b.frac - static_cast<double>(b.whole)) * p.inv_interval;
  double k = static_cast<double>(static_cast<std::int64_t>(guess > 0 ? std::min(guess, p.whole_capacity) : 0.0));
  while (k > 0 && !fits(p, b, k)) --k;
  while (k + 1 <= p.capacity && fits(p, b, k + 1)) ++k;
  return k;
}

// count_refused: adds a refused charge of c requests to the level, up to p.max_backlog nanoseconds of backlog (a
// debt of one limit beyond a full bucket); a level already past that stays.
void owe(const FluidParams& p, FluidState& s, std::int64_t now, double c);

// The decision; `reset_after` only when kResetAfter (a caller that reads none is spared it).
template <bool kResetAfter>
[[gnu::always_inline]] inline Decision decide(const FluidParams& p, FluidState& s, std::int64_t now,
                                              std::uint64_t cost) {
  const double c = static_cast<double>(cost);
  Backlog b = backlog(s, now);
  Decision d;
  d.limit = p.capacity;
  const double most = p.tolerance - c * p.interval - b.frac;  // the backlog that still admits c, before the floor
  d.allowed = c <= p.capacity && at_most_floor(b.whole, most);
  if (d.allowed) [[likely]] {
    const double x = b.frac + c * p.interval;  // >= 0; below 2^63 for a valid spec (tolerance <= 100 years)
    std::int64_t whole, until, at;
    if (x < 9.2e18 && !__builtin_add_overflow(b.whole, whole = static_cast<std::int64_t>(x), &until) &&
        !__builtin_add_overflow(now, until, &at)) [[likely]] {
      // Nothing saturates: the new backlog is the old plus x, without reading the state back.
      b = {until, x - static_cast<double>(whole)};
      s.empty_ns = at;
      s.frac = b.frac;
    } else {
      whole = floor_ns(x);
      s.empty_ns = sat_add(sat_add(now, b.whole), whole);
      s.frac = whole == kMaxI64 ? 0 : x - static_cast<double>(whole);
      b = backlog(s, now);
    }
  } else if (p.max_backlog > 0) [[unlikely]] {
    // count_refused: the charge is owed all the same (fluid.cc), and the answer is the new level's.
    owe(p, s, now, c);
    b = backlog(s, now);
    d.retry_after = c <= p.capacity ? Nanos{sat_sub(b.whole, floor_ns(p.tolerance - c * p.interval - b.frac))} : kNever;
  } else {
    d.retry_after = c <= p.capacity ? Nanos{sat_sub(b.whole, floor_ns(most))} : kNever;
  }
  d.remaining = room(p, b);
  if constexpr (kResetAfter) d.reset_after = Nanos{sat_add(b.whole, b.frac > 0 ? 1 : 0)};
  return d;
}

}  // namespace fluid_detail

// Inline in the header: a hot key's decision is a few dozen instructions of this and of the store around it, and a
// call from one to the other was a measurable part of it (bench/RESULTS.md, "Hot key").
[[gnu::always_inline]] inline Decision fluid_decide(const FluidParams& p, FluidState& s, std::int64_t now,
                                                    std::uint64_t cost) {
  return fluid_detail::decide<true>(p, s, now, cost);
}

// fluid_decide for a caller that reads no reset_after (rk::Fields::kAllButResetAfter): it is left 0.
[[gnu::always_inline]] inline Decision fluid_decide_brief(const FluidParams& p, FluidState& s, std::int64_t now,
                                                          std::uint64_t cost) {
  return fluid_detail::decide<false>(p, s, now, cost);
}

}  // namespace rk::core
