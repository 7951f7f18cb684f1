#include "core/gcra.h"

#include <algorithm>

namespace rk::core {

namespace {

// The schedule shared by both: returns the decision; `start` is when the admitted request may proceed.
Decision schedule(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost, std::int64_t& start) {
  const std::int64_t tat = std::max(s.tat_ns, now);
  const std::int64_t increment = sat_mul(cost, p.interval_ns);
  const std::int64_t new_tat = sat_add(tat, increment);
  const std::int64_t allow_at = sat_sub(new_tat, p.tolerance_ns);

  Decision d;
  d.limit = p.limit;
  d.allowed = allow_at <= now;
  std::int64_t ttl;
  if (d.allowed) {
    s.tat_ns = new_tat;
    ttl = sat_sub(new_tat, now);
    start = tat;
  } else {
    d.retry_after = increment <= p.tolerance_ns ? Nanos{sat_sub(allow_at, now)} : kNever;
    ttl = sat_sub(tat, now);
    start = now;
  }
  d.reset_after = Nanos{ttl};
  // How many more whole intervals fit under the tolerance: floor((tau - ttl) / T), at least 0.
  const std::int64_t room = sat_sub(p.tolerance_ns, ttl);
  d.remaining = room > 0 ? static_cast<double>(room / p.interval_ns) : 0.0;
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

bool gcra_forgettable(const GcraParams&, const GcraState& s, std::int64_t now) { return s.tat_ns <= now; }

}  // namespace rk::core
