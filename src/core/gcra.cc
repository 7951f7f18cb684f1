#include "core/gcra.h"

#include <algorithm>

namespace rk::core {

// Both schedules move on by T a request; absorbed hits may push the TAT past the tolerance, which then refuses
// until it has drained.
void gcra_absorb(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t hits) {
  if (hits == 0) return;
  const std::int64_t tat = std::max(s.tat_ns, now);
  s.tat_ns = sat_add(tat, sat_mul(hits, p.interval_ns));
  // count_refused: bounded as a debt is (gcra.h), what was owed before staying.
  if (p.max_backlog_ns > 0) s.tat_ns = std::max(tat, std::min(s.tat_ns, sat_add(now, p.max_backlog_ns)));
}

void gcra_refund(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t amount, const Charge& charge) {
  const std::int64_t left = std::min(sat_mul(amount, p.interval_ns), sat_sub(charge.held_until_ns, now));
  if (left <= 0 || s.tat_ns <= now) return;  // nothing left to give back: the charge has drained
  s.tat_ns = std::max(now, sat_sub(s.tat_ns, left));
}

bool gcra_forgettable(const GcraParams&, const GcraState& s, std::int64_t now) { return s.tat_ns <= now; }

}  // namespace rk::core
