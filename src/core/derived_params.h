// core/derived_params.h: the user's LimitSpec turned into each algorithm's precomputed parameters.
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "ratekeeper/params.h"

namespace rk::core {

struct EarrrlParams {
  double lambda = 0;        // per nanosecond: ln 2 / half_life
  double rate = 0;          // the limit, per nanosecond
  double n_saturate = 0;    // rate / lambda: the impulse size at which the estimate reaches the limit
  double n_forget = 0;      // below this N a key may be forgotten (see earrrl.h)
  double inv_n_forget = 0;  // 1 / n_forget and 1 / lambda: reset_after multiplies rather than divides
  double inv_lambda = 0;
  double window_ns = 0;  // estimates are reported per window
  double limit = 0;      // as the user gave it, per window
  bool count_refused = true;
};

// gcra and leaky_queue: emission interval T and delay variation tolerance (burst + 1) * T.
struct GcraParams {
  std::int64_t interval_ns = 0;
  std::int64_t tolerance_ns = 0;
  double limit = 0;      // burst + 1
  Divider per_interval;  // divides by interval_ns: `remaining` is a division on every decision
  // count_refused: a refused charge still moves the TAT, to at most now + tolerance + window (a debt of one limit);
  // 0: a refused charge changes nothing.
  std::int64_t max_backlog_ns = 0;
};

// token_bucket and leaky_bucket: one fluid level, kept in time (core/fluid.h), that drains one request every
// `interval` nanoseconds and holds at most `capacity` requests, `tolerance` = capacity * interval nanoseconds.
struct FluidParams {
  double capacity = 0;
  double interval = 0;        // window / limit
  double tolerance = 0;       // capacity * interval
  double inv_interval = 0;    // 1 / interval, for a first guess at `remaining`
  double whole_capacity = 0;  // floor(capacity)
  // count_refused: a refused charge still fills the bucket, to at most tolerance + window nanoseconds of backlog (a
  // debt of one limit); 0: a refused charge changes nothing.
  double max_backlog = 0;
};

// fixed_window with align: calendar. kNone: windows are multiples of window_ns since time 0.
enum class Calendar : std::uint8_t { kNone, kWeek, kMonth, kYear };

// fixed_window, sliding_log, sliding_window.
struct WindowParams {
  std::int64_t window_ns = 0;
  std::uint64_t limit = 0;
  bool count_refused = false;  // a refused charge is counted: at most up to twice the limit (sliding_log, window)
  Calendar calendar = Calendar::kNone;
};

// Callers validate first; these assume rk::validate(spec) returned no error.
EarrrlParams earrrl_params(const LimitSpec& spec);
GcraParams gcra_params(const LimitSpec& spec);
FluidParams fluid_params(const LimitSpec& spec);
WindowParams window_params(const LimitSpec& spec);

}  // namespace rk::core
