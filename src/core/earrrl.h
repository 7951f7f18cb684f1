// core/earrrl.h: the Estimated Average Recent Request Rate limiter (the maths and its sources: docs/algorithms.md).
//
// A key's whole history folds into one impulse of size N at time T; its estimated rate at time t is
// N * lambda * exp(-lambda * (t - T)), lambda = ln 2 / half_life. An attempt is refused when the estimate before
// it exceeds the limit; then (refused or not, unless count_refused is off) N <- cost + decayed N, T <- now.
//
// Forgetting: a key may be dropped once its decayed N is below n_forget = rate * 1ns. Any later estimate then
// differs by less than one nanosecond's worth of decay at the limit, which no clock here can resolve.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct EarrrlState {
  double n = 0;           // 0: a fresh key
  std::int64_t t_ns = 0;  // time of the impulse; meaningless while n == 0
};

Decision earrrl_decide(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t cost);
// earrrl_decide without reset_after (left 0), for callers that do not read it (rk::Fields::kAllButResetAfter); the
// state and every other field are the same.
Decision earrrl_decide_brief(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t cost);
void earrrl_absorb(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t hits);
bool earrrl_forgettable(const EarrrlParams& p, const EarrrlState& s, std::int64_t now);

}  // namespace rk::core
