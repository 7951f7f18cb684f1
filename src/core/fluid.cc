#include "core/fluid.h"

#include <algorithm>

namespace rk::core {

using fluid_detail::backlog;
using fluid_detail::Backlog;
using fluid_detail::floor_ns;

// The admitted path of fluid_decide without its test: the level may rise past the capacity, and then refuses until
// it has drained.
void fluid_absorb(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t hits) {
  if (hits == 0) return;
  if (p.max_backlog > 0) return fluid_detail::owe(p, s, now, static_cast<double>(hits));  // bounded as a debt is
  const Backlog b = backlog(s, now);
  const double x = b.frac + static_cast<double>(hits) * p.interval;
  const std::int64_t whole = floor_ns(x);
  s.empty_ns = sat_add(sat_add(now, b.whole), whole);
  s.frac = whole == kMaxI64 ? 0 : x - static_cast<double>(whole);
}

void fluid_refund(const FluidParams& p, FluidState& s, std::int64_t now, std::uint64_t amount, const Charge& charge) {
  const Backlog b = backlog(s, now);
  const double left =
      std::min(static_cast<double>(amount) * p.interval, static_cast<double>(sat_sub(charge.held_until_ns, now)));
  if (!(left > 0) || (b.whole == 0 && b.frac == 0)) return;
  const double x = static_cast<double>(b.whole) + b.frac - left;
  if (!(x > 0)) {
    s.empty_ns = now;
    s.frac = 0;
    return;
  }
  const std::int64_t whole = floor_ns(x);
  s.empty_ns = sat_add(now, whole);
  s.frac = x - static_cast<double>(whole);
}

namespace fluid_detail {

void owe(const FluidParams& p, FluidState& s, std::int64_t now, double c) {
  const Backlog b = backlog(s, now);
  const double x = b.frac + c * p.interval;
  if (static_cast<double>(b.whole) + x > p.max_backlog) {
    if (static_cast<double>(b.whole) + b.frac >= p.max_backlog) return;
    const std::int64_t whole = floor_ns(p.max_backlog);
    s.empty_ns = sat_add(now, whole);
    s.frac = p.max_backlog - static_cast<double>(whole);
    return;
  }
  const std::int64_t whole = floor_ns(x);
  s.empty_ns = sat_add(sat_add(now, b.whole), whole);
  s.frac = x - static_cast<double>(whole);
}

}  // namespace fluid_detail

bool fluid_forgettable(const FluidParams&, const FluidState& s, std::int64_t now) {
  return s.empty_ns < now || (s.empty_ns == now && s.frac == 0);
}

}  // namespace rk::core
