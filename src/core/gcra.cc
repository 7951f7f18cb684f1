#include "core/gcra.h"

#include <algorithm>

namespace rk::core {

namespace {

// The schedule shared by both: returns the decision; `start` is when the admitted request may proceed.
// Inlined in both callers: with two of them, GCC made it a call of its own on the decision path.
[[gnu::always_inline]] inline Decision schedule(const GcraParams& p, GcraState& s, std::int64_t now,
                                                std::uint64_t cost, std::int64_t& start) {
  Decision d;
  d.limit = p.limit;
  start = now;
  const std::int64_t tat = std::max(s.tat_ns, now);
  const std::int64_t increment = sat_mul(cost, p.interval_ns);
  // Exact in 128 bits, so that neither a huge cost nor a clock at the end of its range saturates into a "yes".
  const i128 new_tat = static_cast<i128>(tat) + increment;
  const i128 allow_at = new_tat - p.tolerance_ns;
  std::int64_t ttl;
  if (increment <= p.tolerance_ns && allow_at <= now) {
    d.allowed = true;
    s.tat_ns = new_tat > kMaxI64 ? kMaxI64 : static_cast<std::int64_t>(new_tat);
    ttl = sat_sub(s.tat_ns, now);
    start = tat;
  } else {
    d.retry_after = increment <= p.tolerance_ns ? Nanos{static_cast<std::int64_t>(allow_at - now)} : kNever;
    ttl = sat_sub(tat, now);
  }
  d.reset_after = Nanos{ttl};
  // How many more whole intervals fit under the tolerance: floor((tau - ttl) / T), at least 0.
  const std::int64_t room = sat_sub(p.tolerance_ns, ttl);
  d.remaining = room > 0 ? static_cast<double>(p.per_interval.divide(static_cast<std::uint64_t>(room))) : 0.0;
  return d;
}

}  // namespace

Decision gcra_decide(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost) {
  std::int64_t start;
  return schedule(p, s, now, cost, start);
}

Decision leaky_queue_decide(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost) {
  std::int64_t start;
  Decision d = schedule(p, s, now, cost, start);
  if (d.allowed) d.delay = Nanos{sat_sub(start, now)};
  return d;
}

// Both schedules move on by T a request; absorbed hits may push the TAT past the tolerance, which then refuses
// until it has drained.
void gcra_absorb(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t hits) {
  if (hits == 0) return;
  s.tat_ns = sat_add(std::max(s.tat_ns, now), sat_mul(hits, p.interval_ns));
}

bool gcra_forgettable(const GcraParams&, const GcraState& s, std::int64_t now) { return s.tat_ns <= now; }

}  // namespace rk::core
