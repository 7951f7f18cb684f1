#include "core/gcra.h"

#include <algorithm>

namespace rk::core {

// Both schedules move on by T a request; absorbed hits may push the TAT past the tolerance, which then refuses
// until it has drained.
void gcra_absorb(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t hits) {
  if (hits == 0) return;
  s.tat_ns = sat_add(std::max(s.tat_ns, now), sat_mul(hits, p.interval_ns));
}

bool gcra_forgettable(const GcraParams&, const GcraState& s, std::int64_t now) { return s.tat_ns <= now; }

}  // namespace rk::core
