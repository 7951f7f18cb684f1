// core/fluid.h: the token bucket and the leaky bucket as a meter, computed lazily with no background drip.
//
// They are one algorithm seen from two sides: a leaky bucket's level is what a token bucket lacks of being full
// (capacity - tokens). Both keep the level, which drains at `rate` since the last update; an attempt of cost c is
// allowed when level + c <= capacity, and then adds c. A fresh key (level 0) is a full token bucket and an empty
// leaky bucket. `remaining` is whole requests (floor(capacity - level)).
//
// The comparison tolerates 1e-9 of a request, so that fractions of a refill which add up to a whole request in
// exact arithmetic (3 x 1/3) are not refused for the last bit of floating-point rounding.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct FluidState {
  double level = 0;
  std::int64_t t_ns = 0;  // when `level` was computed; meaningless while level == 0
};

Decision fluid_decide(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t cost);
bool fluid_forgettable(const FluidParams& p, const FluidState& s, std::int64_t now);

}  // namespace rk::core
