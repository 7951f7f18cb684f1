// library/validate_spec.cc: the public LimitSpec's checks (ratekeeper/params.h: validate, each error naming its
// parameter) and the algorithms' names both ways.
#include "ratekeeper/params.h"

#include <cmath>
#include <string>

#include "base/number_text.h"
#include "core/numeric.h"
#include "core/registry.h"
#include "core/windows.h"

namespace rk {

namespace {

// Every digit a double has, whole numbers written out: "limit 10000000000000 is absurd".
std::string num(double v) { return base::digits_number(v, 17); }

using core::Param;

// "burst is a parameter of gcra and leaky_queue, not of earrrl"
std::string not_taken(Param p, std::string_view alg) {
  return std::string(core::param_name(p)) + " is a parameter of " + core::takers(p) + ", not of " + std::string(alg);
}

}  // namespace

std::string_view algorithm_name(Algorithm a) { return core::info(a).name; }

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
  if (static_cast<std::size_t>(a) >= std::size(kAllAlgorithms)) {
    fail("algorithm", "unknown algorithm " + std::to_string(static_cast<unsigned>(a)));
    return errors;
  }
  const std::string alg(algorithm_name(a));

  const double limit = spec.limit;
  if (!std::isfinite(limit) || limit <= 0) {
    fail("limit", "limit must be a number greater than 0 (got " + num(limit) + ")");
  } else if (limit > kMaxLimit) {
    fail("limit", "limit " + num(limit) + " is absurd: at most " + num(kMaxLimit));
  } else if (core::info(a).whole_limit && std::floor(limit) != limit) {
    fail("limit", "limit of " + alg + " must be a whole number of requests (got " + num(limit) + ")");
  } else if (a == Algorithm::kSlidingLog && limit > kMaxSlidingLogLimit) {
    fail("limit", "limit " + num(limit) +
                      " is too large for sliding_log, which keeps one timestamp per request: at most " +
                      num(kMaxSlidingLogLimit) + " (use sliding_window)");
  }

  if (spec.window <= Nanos{0}) {
    fail("window", "window must be longer than 0 (got " + std::to_string(spec.window.count()) + "ns)");
  } else if (spec.window > kMaxDuration) {
    fail("window", "window of " + format_seconds(spec.window) + "s is absurd: at most 100 years");
  }
  // A sliding window's 16-byte state holds counts of 32 to 40 bits, by its window (core/windows.h): only windows
  // under 65.536 µs with a limit of billions of requests reach that.
  if (a == Algorithm::kSlidingWindow && std::isfinite(limit) && spec.window > Nanos{0} && spec.window <= kMaxDuration) {
    const auto most = static_cast<double>(core::sliding_window_max_count(spec.window.count()));
    if (limit > most) {
      fail("limit", "limit " + num(limit) + " is too large for sliding_window with a window of " +
                        format_seconds(spec.window) + "s: at most " + num(most) +
                        " (a window under 65.536us counts in fewer bits)");
    }
  }

  if (core::takes(a, Param::kHalfLife)) {
    if (!spec.half_life) {
      fail("half_life", "earrrl needs half_life: how long the estimate takes to halve when requests stop");
    } else if (*spec.half_life <= Nanos{0}) {
      fail("half_life", "half_life must be longer than 0 (got " + std::to_string(spec.half_life->count()) + "ns)");
    } else if (*spec.half_life > kMaxDuration) {
      fail("half_life", "half_life of " + format_seconds(*spec.half_life) + "s is absurd: at most 100 years");
    }
  } else if (spec.half_life) {
    fail("half_life", not_taken(Param::kHalfLife, alg));
  }

  const bool takes_burst = core::takes(a, Param::kBurst);
  if (spec.burst) {
    const double b = *spec.burst;
    if (!takes_burst) {
      fail("burst", not_taken(Param::kBurst, alg));
    } else if (!std::isfinite(b) || b < 0 || std::floor(b) != b) {
      fail("burst", "burst must be a whole number >= 0 (got " + num(b) + ")");
    } else if (b > kMaxLimit) {
      fail("burst", "burst " + num(b) + " is absurd: at most " + num(kMaxLimit));
    }
  }

  if (spec.capacity) {
    const double c = *spec.capacity;
    if (!core::takes(a, Param::kCapacity)) {
      fail("capacity", not_taken(Param::kCapacity, alg));
    } else if (!std::isfinite(c) || c < 1) {
      fail("capacity", "capacity must be a number >= 1, or no request could ever pass (got " + num(c) + ")");
    } else if (c > kMaxLimit) {
      fail("capacity", "capacity " + num(c) + " is absurd: at most " + num(kMaxLimit));
    }
  }

  if (spec.count_refused && !core::takes(a, Param::kCountRefused))
    fail("count_refused", not_taken(Param::kCountRefused, alg));

  if (spec.align == Align::kCalendar) {
    using std::chrono::hours;
    const Nanos w = spec.window;
    if (!core::takes(a, Param::kAlign)) {
      fail("align", "calendar alignment is for " + core::takers(Param::kAlign) + " only, not " + alg);
    } else if (w != hours(24 * 7) && w != hours(24 * 30) && w != hours(24 * 365) &&
               !(w > Nanos{0} && hours(24) % w == Nanos{0})) {
      fail("align",
           "calendar alignment needs a window that divides a day, or of a week, a month (30d) or a year (365d); got " +
               format_seconds(w) + "s");
    }
  }

  // Derived quantities, only once the inputs they come from are sound.
  if (errors.empty() && takes_burst) {
    const double interval = static_cast<double>(spec.window.count()) / limit;
    if (interval < 1) {
      fail("limit", "limit " + num(limit) + " per " + format_seconds(spec.window) +
                        "s is above one request a nanosecond, the finest interval " + alg + " can keep");
    } else if (const double burst = *core::with_defaults(spec).burst;
               interval * (burst + 1) > static_cast<double>(kMaxDuration.count())) {
      fail("burst", "burst " + num(burst) + " at one request every " + num(interval) + "ns spans more than 100 years");
    }
  }
  if (errors.empty() && core::takes(a, Param::kCapacity)) {
    // The bucket's level is kept in nanoseconds (core/fluid.h): a full one must drain within the clock's range.
    const double capacity = *core::with_defaults(spec).capacity;
    const double interval = static_cast<double>(spec.window.count()) / limit;
    if (capacity * interval > static_cast<double>(kMaxDuration.count())) {
      fail(spec.capacity ? "capacity" : "limit", "a bucket of " + num(capacity) + " requests at one request every " +
                                                     num(interval) + "ns takes more than 100 years to drain");
    }
  }
  return errors;
}

}  // namespace rk
