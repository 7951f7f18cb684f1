// core/earrrl.h: the Estimated Average Recent Request Rate limiter (the maths and its sources: docs/algorithms.md).
//
// A key's whole history folds into one impulse of size N at time T; its estimated rate at time t is
// N * lambda * exp(-lambda * (t - T)), lambda = ln 2 / half_life. An attempt is refused when the estimate before
// it exceeds the limit; then (refused or not, unless count_refused is off) N <- cost + decayed N, T <- now.
//
// Forgetting: a key may be dropped once its decayed N is below n_forget = rate * 1ns. Any later estimate then
// differs by less than one nanosecond's worth of decay at the limit, which no clock here can resolve.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/numeric.h"
#include "core/charge.h"
#include "core/derived_params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct EarrrlState {
  double n = 0;           // 0: a fresh key
  std::int64_t t_ns = 0;  // time of the impulse; meaningless while n == 0
};

void earrrl_absorb(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t hits);
bool earrrl_forgettable(const EarrrlParams& p, const EarrrlState& s, std::int64_t now);
// Gives back `amount` requests of a charge (a reservation settled for less): the estimate is lowered by what they
// still add to it, amount decayed since the charge, never below 0.
void earrrl_refund(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t amount, const Charge& charge);

namespace earrrl_detail {

// Caps N far below overflow, so that even 2^64-cost attempts forever keep every derived number finite.
inline constexpr double kMaxN = 1e300;

// Inlined in every caller: with four of them, GCC made it a call of its own on the decision path.
[[gnu::always_inline]] inline double decayed(const EarrrlParams& p, const EarrrlState& s, std::int64_t now) {
  if (s.n == 0) return 0;
  // A clock that goes backwards does not make the estimate grow: elapsed time is never negative.
  const double dt = static_cast<double>(std::max<std::int64_t>(0, sat_sub(now, s.t_ns)));
  const double n = s.n * std::exp(-p.lambda * dt);
  // Below n_forget a key may be forgotten (by a sweep here, by its TTL in Redis): it counts as nothing already, so
  // that forgetting it changes no answer.
  return n < p.n_forget ? 0 : n;
}

// kResetAfter: whether to compute reset_after, a logarithm (about a third of a hot-key decision) that only some
// callers read (rk::Fields). Always inlined: left to GCC's heuristics, a change elsewhere in the store's loop can
// make it a call (26 instructions a decision more, measured with bench/fixed_work.cc under callgrind).
template <bool kResetAfter>
[[gnu::always_inline]] inline Decision decide(const EarrrlParams& p, EarrrlState& s, std::int64_t now,
                                              std::uint64_t cost) {
  const EarrrlState before = s;
  const double n_before = decayed(p, s, now);
  const double estimate = n_before * p.lambda;  // per nanosecond
  Decision d;
  d.allowed = !(estimate > p.rate);
  d.limit = p.limit;
  d.estimate = estimate * p.window_ns;

  double n_after = n_before;
  if (d.allowed || p.count_refused) n_after = std::min(kMaxN, n_before + static_cast<double>(cost));
  s.n = n_after;
  s.t_ns = (n_before == 0) ? now : std::max(s.t_ns, now);

  d.remaining = std::max(0.0, p.n_saturate - n_after);
  // Waits count from the impulse's time, which a clock that went backwards left ahead of `now`.
  const std::int64_t lead = sat_sub(s.t_ns, now);
  if (!d.allowed) {
    // The estimate n_after * lambda * e^(-lambda w) falls to the limit after w = ln(n_after / n_saturate) / lambda.
    // One more nanosecond makes sure the comparison then passes despite rounding; where a nanosecond is below a
    // double's resolution (waits past 2^53 ns), step on until the test the later attempt makes passes.
    // The attempt at now + retry_after decides from the state stored by then: this one's after a check, the one
    // before it after a peek (a decision on a copy, which this function cannot tell apart). Both reach the limit
    // at once in exact arithmetic, but not in rounding (N e^(-lambda (a + b)) against N e^(-lambda a) e^(-lambda b)):
    // the wait is one that passes the later attempt's own test on either.
    const auto refused_after = [&](std::int64_t w) {
      return n_after * std::exp(-p.lambda * static_cast<double>(w)) * p.lambda > p.rate ||
             decayed(p, before, sat_add(s.t_ns, w)) * p.lambda > p.rate;
    };
    std::int64_t wait = sat_add(ceil_ns(std::log(n_after / p.n_saturate) / p.lambda), 1);
    for (int i = 0; i < 16 && refused_after(wait); ++i) wait = sat_add(wait, std::max<std::int64_t>(1, wait >> 50));
    d.retry_after = Nanos{sat_add(wait, lead)};
  }
  if (kResetAfter && n_after > p.n_forget) {
    d.reset_after = Nanos{sat_add(ceil_ns(std::log(n_after * p.inv_n_forget) * p.inv_lambda), lead)};
  }
  return d;
}

}  // namespace earrrl_detail

// The decisions, inline in the header: a hot key's decision is a few dozen instructions of these and of the store
// around them, and a call from one to the other was a measurable part of it (bench/RESULTS.md, "Hot key").
[[gnu::always_inline]] inline Decision earrrl_decide(const EarrrlParams& p, EarrrlState& s, std::int64_t now,
                                                     std::uint64_t cost) {
  return earrrl_detail::decide<true>(p, s, now, cost);
}

// earrrl_decide without reset_after (left 0), for callers that do not read it (rk::Fields::kAllButResetAfter); the
// state and every other field are the same.
[[gnu::always_inline]] inline Decision earrrl_decide_brief(const EarrrlParams& p, EarrrlState& s, std::int64_t now,
                                                           std::uint64_t cost) {
  return earrrl_detail::decide<false>(p, s, now, cost);
}

}  // namespace rk::core
