// core/charge.h: what a refund (a reservation settled for less) knows of the charge it gives back: when it was made,
// and until when the answer to it said the key would hold it (now + reset_after). Each algorithm's refund reads what
// bounds it: the windows and earrrl the time, gcra and the buckets the end of the charge's place in their schedule.
#pragma once

#include <cstdint>

namespace rk::core {

struct Charge {
  std::int64_t at_ns = 0;          // when it was charged
  std::int64_t held_until_ns = 0;  // at_ns + the charge's reset_after
};

}  // namespace rk::core
