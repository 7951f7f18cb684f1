#include "core/fluid.h"

#include <algorithm>
#include <cmath>

#include "core/numeric.h"

namespace rk::core {

namespace {

constexpr double kTolerance = 1e-9;

double drained(const FluidParams& p, const FluidState& s, std::int64_t now) {
  if (s.level <= 0) return 0;
  const double dt = static_cast<double>(std::max<std::int64_t>(0, sat_sub(now, s.t_ns)));
  const double level = s.level - dt * p.rate;
  return level < kTolerance ? 0 : level;
}

}  // namespace

Decision fluid_decide(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t cost) {
  double level = drained(p, s, now);
  const double c = static_cast<double>(cost);
  Decision d;
  d.limit = p.capacity;
  d.allowed = level + c <= p.capacity + kTolerance;
  if (d.allowed) {
    level = std::min(p.capacity, level + c);
  } else {
    d.retry_after = c <= p.capacity ? Nanos{ceil_ns((level + c - p.capacity - kTolerance) / p.rate)} : kNever;
  }
  s.t_ns = s.level <= 0 ? now : std::max(s.t_ns, now);
  s.level = level;
  d.remaining = std::max(0.0, std::floor(p.capacity - level + kTolerance));
  d.reset_after = Nanos{ceil_ns(level / p.rate)};
  return d;
}

bool fluid_forgettable(const FluidParams& p, const FluidState& s, std::int64_t now) {
  return drained(p, s, now) == 0;
}

}  // namespace rk::core
