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
// A refused attempt changes nothing.
//
// A clock that goes backwards finds more backlog, never less: as for every algorithm, an earlier clock never
// admits what the latest time seen would refuse, and retry_after counts from the attempt's own time.
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "core/params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct FluidState {
  std::int64_t empty_ns = kMinI64;  // the bucket is empty at empty_ns + frac; kMinI64: a fresh key
  double frac = 0;                  // in [0, 1)
};

Decision fluid_decide(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t cost);
void fluid_absorb(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t hits);
bool fluid_forgettable(const FluidParams& p, const FluidState& s, std::int64_t now);

}  // namespace rk::core
