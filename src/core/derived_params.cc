#include "core/derived_params.h"

#include <cmath>

#include "core/numeric.h"
#include "core/registry.h"

namespace rk {

namespace core {

EarrrlParams earrrl_params(const LimitSpec& given) {
  const LimitSpec spec = with_defaults(given);
  EarrrlParams p;
  p.window_ns = static_cast<double>(spec.window.count());
  p.limit = spec.limit;
  p.rate = spec.limit / p.window_ns;
  p.lambda = std::log(2.0) / static_cast<double>(spec.half_life->count());
  p.n_saturate = p.rate / p.lambda;
  // Forgetting a key whose N is below rate * 1ns shifts any later estimate by less than one nanosecond of decay
  // would at the limit: below what the clock can resolve.
  p.n_forget = p.rate;
  p.inv_n_forget = 1 / p.n_forget;
  p.inv_lambda = 1 / p.lambda;
  p.count_refused = *spec.count_refused;
  return p;
}

GcraParams gcra_params(const LimitSpec& given) {
  const LimitSpec spec = with_defaults(given);
  GcraParams p;
  p.interval_ns = ceil_ns(static_cast<double>(spec.window.count()) / spec.limit);
  const double burst = *spec.burst;
  p.tolerance_ns = sat_mul(static_cast<std::uint64_t>(burst) + 1, p.interval_ns);
  p.limit = burst + 1;
  p.per_interval = Divider(static_cast<std::uint64_t>(p.interval_ns));
  if (*spec.count_refused) p.max_backlog_ns = sat_add(p.tolerance_ns, spec.window.count());
  return p;
}

FluidParams fluid_params(const LimitSpec& given) {
  const LimitSpec spec = with_defaults(given);
  FluidParams p;
  p.capacity = *spec.capacity;
  p.interval = static_cast<double>(spec.window.count()) / spec.limit;
  p.tolerance = p.capacity * p.interval;
  p.inv_interval = 1 / p.interval;
  p.whole_capacity = std::floor(p.capacity);
  if (*spec.count_refused) p.max_backlog = p.tolerance + static_cast<double>(spec.window.count());
  return p;
}

WindowParams window_params(const LimitSpec& given) {
  const LimitSpec spec = with_defaults(given);
  WindowParams p;
  p.window_ns = spec.window.count();
  p.limit = static_cast<std::uint64_t>(spec.limit);
  p.count_refused = *spec.count_refused;
  if (spec.align == Align::kCalendar) {
    using std::chrono::hours;
    p.calendar = spec.window == hours(24 * 7)     ? Calendar::kWeek
                 : spec.window == hours(24 * 30)  ? Calendar::kMonth
                 : spec.window == hours(24 * 365) ? Calendar::kYear
                                                  : Calendar::kNone;  // divides a day: epoch-aligned is UTC-aligned
  }
  return p;
}

}  // namespace core
}  // namespace rk
