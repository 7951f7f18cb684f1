// core/gcra.h: the generic cell rate algorithm, and the leaky bucket as a queue, which is the same schedule.
//
// GCRA keeps one time per key, the theoretical arrival time (TAT). An attempt of cost c at `now` would move it to
// max(TAT, now) + c*T; it is allowed when that minus the tolerance tau = (burst + 1) * T is not after now. The
// reply follows redis-cell's CL.THROTTLE: limit burst + 1, remaining, retry_after (kNever when c*T > tau),
// reset_after = TAT - now.
//
// The leaky queue (nginx limit_req with burst and without nodelay) schedules each admitted request to leave at
// max(TAT, now) and moves TAT on by T: the same condition admits it, and the wait max(TAT, now) - now is its delay.
// Only when more than `burst` requests already wait is it refused.
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "core/params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct GcraState {
  std::int64_t tat_ns = kMinI64;  // kMinI64: a fresh key
};

Decision gcra_decide(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost);
Decision leaky_queue_decide(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t cost);
void gcra_absorb(const GcraParams& p, GcraState& s, std::int64_t now, std::uint64_t hits);
bool gcra_forgettable(const GcraParams& p, const GcraState& s, std::int64_t now);

}  // namespace rk::core
