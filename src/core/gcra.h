// core/gcra.h: the generic cell rate algorithm, and the leaky bucket as a queue, which is the same schedule.
//
// GCRA keeps one time per key, the theoretical arrival time (TAT). An attempt of cost c at `now` would move it to
// max(TAT, now) + c*T; it is allowed when that minus the tolerance tau = (burst + 1) * T is not after now. The
// reply follows redis-cell's CL.THROTTLE: limit burst + 1, remaining, retry_after (kNever when c*T > tau),
// reset_after = TAT - now. With count_refused (max_backlog_ns) a refused attempt moves the TAT too, to at most
// now + tau + window: a debt of one limit, paid back at the rate.
//
// The leaky queue (nginx limit_req with burst and without nodelay) schedules each admitted request to leave at
// max(TAT, now) and moves TAT on by T: the same condition admits it, and the wait max(TAT, now) - now is its delay.
// Only when more than `burst` requests already wait is it refused.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/numeric.h"
#include "core/charge.h"
#include "core/derived_params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct GcraState {
  std::int64_t tat_ns = kMinI64;  // kMinI64: a fresh key
};

void gcra_absorb(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t hits);
bool gcra_forgettable(const GcraParams& p, const GcraState& s, std::int64_t now);
// Gives back `amount` requests of a charge (a reservation settled for less): the TAT moves back by amount * T, but
// by no more than what is left of the charge's place in the schedule (held_until - now: the requests after it stay
// owed) and never before now.
void gcra_refund(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t amount, const Charge& charge);

namespace gcra_detail {

// The schedule shared by both: returns the decision; `start` is when the admitted request may proceed.
// Inlined in both callers: with two of them, GCC made it a call of its own on the decision path.
[[gnu::always_inline]] inline Decision schedule(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost,
                                                std::int64_t& start) {
  const std::int64_t tat = std::max(s.tat_ns, now);
  const std::int64_t increment = sat_mul(cost, p.interval_ns);
  const bool fits = increment <= p.tolerance_ns;
  // Exact in 128 bits, so that neither a huge cost nor a clock at the end of its range saturates into a "yes"; in
  // 64 when neither sum overflows, which is every decision but those at the ends of the range. `wait` is
  // allow_at - now as the 128-bit difference truncated to 64 bits (read only when fits and refused: then exact).
  std::int64_t new_tat, allow_at;
  bool allowed;
  std::uint64_t wait;
  if (!__builtin_add_overflow(tat, increment, &new_tat) && !__builtin_sub_overflow(new_tat, p.tolerance_ns, &allow_at))
      [[likely]] {
    allowed = fits && allow_at <= now;
    wait = static_cast<std::uint64_t>(allow_at) - static_cast<std::uint64_t>(now);
  } else {
    const i128 wide = static_cast<i128>(tat) + increment;
    const i128 wide_allow_at = wide - p.tolerance_ns;
    allowed = fits && wide_allow_at <= now;
    new_tat = wide > kMaxI64 ? kMaxI64 : static_cast<std::int64_t>(wide);
    wait = static_cast<std::uint64_t>(wide_allow_at - now);
  }
  std::int64_t ttl;
  Nanos retry_after{0};
  start = now;
  if (allowed) [[likely]] {
    s.tat_ns = new_tat;
    ttl = sat_sub(new_tat, now);
    start = tat;
  } else {
    std::int64_t held = tat;
    if (p.max_backlog_ns > 0) {
      // count_refused: the charge is owed all the same, up to a debt of one limit (what is owed already stays), and
      // the answer is the new schedule's.
      held = std::max(tat, std::min(new_tat, sat_add(now, p.max_backlog_ns)));
      s.tat_ns = held;
      wait = static_cast<std::uint64_t>(static_cast<i128>(held) + increment - p.tolerance_ns - now);
    }
    retry_after = fits ? Nanos{static_cast<std::int64_t>(wait)} : kNever;
    ttl = sat_sub(held, now);
  }
  // How many more whole intervals fit under the tolerance: floor((tau - ttl) / T), at least 0 (and below 2^63).
  const std::int64_t room = sat_sub(p.tolerance_ns, ttl);
  const double remaining =
      room > 0 ? static_cast<double>(static_cast<std::int64_t>(p.per_interval.divide(static_cast<std::uint64_t>(room))))
               : 0.0;
  // Built once, in the caller's memory, rather than zeroed and then written field by field.
  return Decision{.allowed = allowed,
                  .limit = p.limit,
                  .remaining = remaining,
                  .retry_after = retry_after,
                  .reset_after = Nanos{ttl}};
}

}  // namespace gcra_detail

// The decisions, inline in the header: a hot key's decision is a few dozen instructions of these and of the store
// around them, and a call from one to the other was a measurable part of it (bench/RESULTS.md, "Hot key").
inline Decision gcra_decide(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost) {
  std::int64_t start;
  return gcra_detail::schedule(p, s, now, cost, start);
}

inline Decision leaky_queue_decide(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost) {
  std::int64_t start;
  Decision d = gcra_detail::schedule(p, s, now, cost, start);
  if (d.allowed) d.delay = Nanos{sat_sub(start, now)};
  return d;
}

}  // namespace rk::core
