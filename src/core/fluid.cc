#include "core/fluid.h"

#include <algorithm>
#include <cmath>

namespace rk::core {

namespace {

// floor(x) as nanoseconds, clamped to the int64 range (also NaN, to the bottom). Truncation and a correction
// rather than std::floor, which is a library call on x86-64 without SSE4.1: this runs four times a decision.
std::int64_t floor_ns(double x) {
  if (!(x > -9.2e18)) return kMinI64;
  if (x >= 9.2e18) return kMaxI64;
  const auto t = static_cast<std::int64_t>(x);
  return static_cast<double>(t) > x ? t - 1 : t;
}

struct Backlog {
  std::int64_t whole;  // nanoseconds until empty, at `now`
  double frac;
};

Backlog backlog(const FluidState& s, std::int64_t now) {
  if (s.empty_ns < now) return {0, 0};
  return {sat_sub(s.empty_ns, now), s.frac};
}

// Below this, a whole number of nanoseconds converts to a double exactly.
constexpr std::uint64_t kExactInDouble = std::uint64_t{1} << 53;

// Whether whole nanoseconds w are at most floor_ns(y). For an integer, w <= floor(y) is w <= y, which a double
// compares exactly while w is in [0, 2^53]; floor_ns's clamps agree there (y >= 9.2e18 holds every such w; y <=
// -9.2e18 and NaN hold none). Saves a round trip through an integer on the decision's path.
bool at_most_floor(std::int64_t w, double y) {
  if (static_cast<std::uint64_t>(w) <= kExactInDouble) [[likely]] return static_cast<double>(w) <= y;
  return w <= floor_ns(y);
}

// Whether `k` more requests fit on top of backlog b: b <= floor(C*T - k*T - f). The one test every answer uses.
bool fits(const FluidParams& p, const Backlog& b, double k) {
  return at_most_floor(b.whole, p.tolerance - k * p.interval - b.frac);
}

// The most whole requests that fit now (the predicate is monotone in k).
double room(const FluidParams& p, const Backlog& b) {
  // A guess within a request or two of the answer, then the test itself settles it.
  const double guess = (p.tolerance - b.frac - static_cast<double>(b.whole)) * p.inv_interval;
  double k = static_cast<double>(floor_ns(std::clamp(guess, 0.0, p.whole_capacity)));
  while (k > 0 && !fits(p, b, k)) --k;
  while (k + 1 <= p.capacity && fits(p, b, k + 1)) ++k;
  return k;
}

}  // namespace

Decision fluid_decide(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t cost) {
  const double c = static_cast<double>(cost);
  Backlog b = backlog(s, now);
  Decision d;
  d.limit = p.capacity;
  const double most = p.tolerance - c * p.interval - b.frac;  // the backlog that still admits c, before the floor
  d.allowed = c <= p.capacity && at_most_floor(b.whole, most);
  if (d.allowed) [[likely]] {
    const double x = b.frac + c * p.interval;  // >= 0
    const std::int64_t whole = floor_ns(x);
    s.empty_ns = sat_add(sat_add(now, b.whole), whole);
    s.frac = whole == kMaxI64 ? 0 : x - static_cast<double>(whole);
    b = backlog(s, now);
  } else {
    d.retry_after = c <= p.capacity ? Nanos{sat_sub(b.whole, floor_ns(most))} : kNever;
  }
  d.remaining = room(p, b);
  d.reset_after = Nanos{sat_add(b.whole, b.frac > 0 ? 1 : 0)};
  return d;
}

// The admitted path of fluid_decide without its test: the level may rise past the capacity, and then refuses until
// it has drained.
void fluid_absorb(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t hits) {
  if (hits == 0) return;
  const Backlog b = backlog(s, now);
  const double x = b.frac + static_cast<double>(hits) * p.interval;
  const std::int64_t whole = floor_ns(x);
  s.empty_ns = sat_add(sat_add(now, b.whole), whole);
  s.frac = whole == kMaxI64 ? 0 : x - static_cast<double>(whole);
}

bool fluid_forgettable(const FluidParams&, const FluidState& s, std::int64_t now) {
  return s.empty_ns < now || (s.empty_ns == now && s.frac == 0);
}

}  // namespace rk::core
