// ratekeeper/decision.h: the answer to one attempt.
#pragma once

#include <cstdint>
#include <optional>

#include "ratekeeper/units.h"

namespace rk {

struct Decision {
  bool allowed = false;
  // The most the key may spend at once: the window's limit; burst + 1 for gcra and leaky_queue; the capacity
  // for the buckets; for earrrl the limit (a rate per window), see `remaining`.
  double limit = 0;
  // What the key may still spend right now, after this attempt (never negative). Counters report whole requests;
  // earrrl reports limit/lambda - N: the instant burst that would bring its estimate up to the limit.
  double remaining = 0;
  // 0 when allowed. When refused: how long until an attempt of the same cost would be allowed, if no attempt is
  // made meanwhile (with count_refused, every refused attempt pushes this further). kNever when the
  // cost exceeds what the limit can ever admit.
  Nanos retry_after{0};
  // How long until the key's state is back to that of a fresh key (and may be forgotten).
  Nanos reset_after{0};
  // leaky_queue only: how long an admitted request must wait before it proceeds. 0 otherwise.
  Nanos delay{0};
  // earrrl only: the estimated recent request rate, per window, before this attempt was counted.
  std::optional<double> estimate;
};

// What a check fills in. earrrl's reset_after is a logarithm, about a third of the time of a decision on a key in
// cache, sliding_window's a 128-bit division, and token_bucket's and leaky_bucket's a few instructions of a ~13 ns
// decision: a caller that never reads it says so, and the check skips it.
//   limiter.check(key, 1, rk::Fields::kAllButResetAfter).allowed
enum class Fields : std::uint8_t {
  kAll,               // every field
  kAllButResetAfter,  // reset_after is not computed where that costs (earrrl, sliding_window, token_bucket,
                      // leaky_bucket), and then left 0: do not read it
};

}  // namespace rk
