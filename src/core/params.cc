#include "core/params.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "core/numeric.h"

namespace rk {

namespace {

constexpr std::string_view kNames[] = {"earrrl",      "gcra",         "token_bucket", "leaky_bucket",
                                       "leaky_queue", "fixed_window", "sliding_log",  "sliding_window"};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool is_windowed(Algorithm a) {
  return a == Algorithm::kFixedWindow || a == Algorithm::kSlidingLog || a == Algorithm::kSlidingWindow;
}

}  // namespace

std::string_view algorithm_name(Algorithm a) { return kNames[static_cast<int>(a)]; }

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (Algorithm a : kAllAlgorithms) {
    if (algorithm_name(a) == name) return a;
  }
  return std::nullopt;
}

std::vector<ParamError> validate(const LimitSpec& spec) {
  std::vector<ParamError> errors;
  auto fail = [&](std::string param, std::string message) { errors.push_back({std::move(param), std::move(message)}); };
  const Algorithm a = spec.algorithm;
  const std::string alg(algorithm_name(a));

  if (static_cast<unsigned>(a) >= std::size(kNames)) {
    fail("algorithm", "unknown algorithm " + std::to_string(static_cast<unsigned>(a)));
    return errors;
  }

  const double limit = spec.limit;
  if (!std::isfinite(limit) || limit <= 0) {
    fail("limit", "limit must be a number greater than 0 (got " + num(limit) + ")");
  } else if (limit > kMaxLimit) {
    fail("limit", "limit " + num(limit) + " is absurd: at most " + num(kMaxLimit));
  } else if (is_windowed(a) && std::floor(limit) != limit) {
    fail("limit", "limit of " + alg + " must be a whole number of requests (got " + num(limit) + ")");
  } else if (a == Algorithm::kSlidingLog && limit > kMaxSlidingLogLimit) {
    fail("limit", "limit " + num(limit) + " is too large for sliding_log, which keeps one timestamp per request: at most " +
                      num(kMaxSlidingLogLimit) + " (use sliding_window)");
  }

  if (spec.window <= Nanos{0}) {
    fail("window", "window must be longer than 0 (got " + std::to_string(spec.window.count()) + "ns)");
  } else if (spec.window > kMaxDuration) {
    fail("window", "window of " + format_seconds(spec.window) + "s is absurd: at most 100 years");
  }

  if (a == Algorithm::kEarrrl) {
    if (!spec.half_life) {
      fail("half_life", "earrrl needs half_life: how long the estimate takes to halve when requests stop");
    } else if (*spec.half_life <= Nanos{0}) {
      fail("half_life", "half_life must be longer than 0 (got " + std::to_string(spec.half_life->count()) + "ns)");
    } else if (*spec.half_life > kMaxDuration) {
      fail("half_life", "half_life of " + format_seconds(*spec.half_life) + "s is absurd: at most 100 years");
    }
  } else if (spec.half_life) {
    fail("half_life", "half_life is a parameter of earrrl, not of " + alg);
  }

  const bool takes_burst = a == Algorithm::kGcra || a == Algorithm::kLeakyQueue;
  if (spec.burst) {
    const double b = *spec.burst;
    if (!takes_burst) {
      fail("burst", "burst is a parameter of gcra and leaky_queue, not of " + alg);
    } else if (!std::isfinite(b) || b < 0 || std::floor(b) != b) {
      fail("burst", "burst must be a whole number >= 0 (got " + num(b) + ")");
    } else if (b > kMaxLimit) {
      fail("burst", "burst " + num(b) + " is absurd: at most " + num(kMaxLimit));
    }
  }

  const bool takes_capacity = a == Algorithm::kTokenBucket || a == Algorithm::kLeakyBucket;
  if (spec.capacity) {
    const double c = *spec.capacity;
    if (!takes_capacity) {
      fail("capacity", "capacity is a parameter of token_bucket and leaky_bucket, not of " + alg);
    } else if (!std::isfinite(c) || c < 1) {
      fail("capacity", "capacity must be a number >= 1, or no request could ever pass (got " + num(c) + ")");
    } else if (c > kMaxLimit) {
      fail("capacity", "capacity " + num(c) + " is absurd: at most " + num(kMaxLimit));
    }
  }

  if (spec.count_refused && a != Algorithm::kEarrrl && a != Algorithm::kFixedWindow) {
    fail("count_refused", "count_refused is a parameter of earrrl and fixed_window, not of " + alg);
  }

  if (spec.align == Align::kCalendar) {
    using std::chrono::hours;
    const Nanos w = spec.window;
    if (a != Algorithm::kFixedWindow) {
      fail("align", "calendar alignment is for fixed_window only, not " + alg);
    } else if (w != hours(24 * 7) && w != hours(24 * 30) && w != hours(24 * 365) && !(w > Nanos{0} && hours(24) % w == Nanos{0})) {
      fail("align", "calendar alignment needs a window that divides a day, or of a week, a month (30d) or a year (365d); got " +
                        format_seconds(w) + "s");
    }
  }

  // Derived quantities, only once the inputs they come from are sound.
  if (errors.empty() && takes_burst) {
    const double interval = static_cast<double>(spec.window.count()) / limit;
    if (interval < 1) {
      fail("limit", "limit " + num(limit) + " per " + format_seconds(spec.window) +
                        "s is above one request a nanosecond, the finest interval " + alg + " can keep");
    } else if (interval * (spec.burst.value_or(0) + 1) > static_cast<double>(kMaxDuration.count())) {
      fail("burst", "burst " + num(spec.burst.value_or(0)) + " at one request every " + num(interval) +
                        "ns spans more than 100 years");
    }
  }
  return errors;
}

namespace core {

EarrrlParams earrrl_params(const LimitSpec& spec) {
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
  p.count_refused = spec.count_refused.value_or(true);
  return p;
}

GcraParams gcra_params(const LimitSpec& spec) {
  GcraParams p;
  p.interval_ns = ceil_ns(static_cast<double>(spec.window.count()) / spec.limit);
  const double burst = spec.burst.value_or(0);
  p.tolerance_ns = sat_mul(static_cast<std::uint64_t>(burst) + 1, p.interval_ns);
  p.limit = burst + 1;
  return p;
}

FluidParams fluid_params(const LimitSpec& spec) {
  FluidParams p;
  p.capacity = spec.capacity.value_or(spec.limit);
  p.rate = spec.limit / static_cast<double>(spec.window.count());
  return p;
}

WindowParams window_params(const LimitSpec& spec) {
  WindowParams p;
  p.window_ns = spec.window.count();
  p.limit = static_cast<std::uint64_t>(spec.limit);
  p.count_refused = spec.count_refused.value_or(false);
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
