#include "sim/traffic.h"

#include <algorithm>
#include <cmath>

namespace rk::sim {

namespace {

double span_ns(Nanos from, Nanos until) { return until > from ? static_cast<double>((until - from).count()) : 0.0; }

// How many k >= 0 have k * period < span.
double periodic_count(double span, double period_ns) { return span > 0 ? std::ceil(span / period_ns) : 0.0; }

double on_time_ns(const ClientPattern& p) {
  const double span = span_ns(p.start, p.stop);
  const double cycle = static_cast<double>((p.on + p.off).count());
  const double on = static_cast<double>(p.on.count());
  const double full = std::floor(span / cycle);
  return full * on + std::min(on, span - full * cycle);
}

}  // namespace

double expected_attempts(const ClientPattern& p) {
  const double span = span_ns(p.start, p.stop);
  switch (p.kind) {
    case Pattern::kPeriodic: return periodic_count(span, p.period_ns);
    case Pattern::kPoisson: return span / p.period_ns;
    case Pattern::kBurst: {
      if (span <= 0) return 0;
      const double bursts = p.every.count() == 0 ? 1.0 : std::ceil(span / static_cast<double>(p.every.count()));
      return bursts * static_cast<double>(p.size);
    }
    case Pattern::kOnOff:
      return p.poisson_arrivals ? on_time_ns(p) / p.period_ns : periodic_count(on_time_ns(p), p.period_ns);
    case Pattern::kAbuser: {
      const Nanos reform = std::clamp(p.reform_at, p.start, std::max(p.start, p.stop));
      return periodic_count(span_ns(p.start, reform), p.period_ns) +
             periodic_count(span_ns(reform, p.stop), p.reformed_period_ns);
    }
  }
  return 0;
}

Arrivals::Arrivals(const ClientPattern& p) : p_(p), rng_(p.seed) {}

double Arrivals::exponential_gap_ns() {
  // Inverse transform of a uniform in [0, 1) built from the top 53 bits: the same on every standard library.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return -std::log1p(-u) * p_.period_ns;
}

std::optional<Nanos> Arrivals::periodic(Nanos from, Nanos until, double period_ns) {
  const double offset = static_cast<double>(k_) * period_ns;
  if (offset >= span_ns(from, until)) return std::nullopt;
  const Nanos t = from + Nanos{std::llround(offset)};
  if (t >= until) return std::nullopt;
  ++k_;
  return t;
}

std::optional<Nanos> Arrivals::on_off() {
  if (p_.poisson_arrivals) {
    on_time_ns_ += exponential_gap_ns();
  } else {
    on_time_ns_ = static_cast<double>(k_++) * p_.period_ns;
  }
  // Time on the client's own clock, which runs only while on, mapped to the simulation's clock.
  const double on = static_cast<double>(p_.on.count());
  const double cycles = std::floor(on_time_ns_ / on);
  const double real = cycles * static_cast<double>((p_.on + p_.off).count()) + (on_time_ns_ - cycles * on);
  if (real >= span_ns(p_.start, p_.stop)) return std::nullopt;
  const Nanos t = p_.start + Nanos{std::llround(real)};
  if (t >= p_.stop) return std::nullopt;
  return t;
}

std::optional<Nanos> Arrivals::next() {
  switch (p_.kind) {
    case Pattern::kPeriodic: return periodic(p_.start, p_.stop, p_.period_ns);
    case Pattern::kPoisson: {
      on_time_ns_ += exponential_gap_ns();
      if (on_time_ns_ >= span_ns(p_.start, p_.stop)) return std::nullopt;
      const Nanos t = p_.start + Nanos{std::llround(on_time_ns_)};
      if (t >= p_.stop) return std::nullopt;
      return t;
    }
    case Pattern::kBurst: {
      const std::uint64_t burst = k_ / p_.size;
      const std::uint64_t i = k_ % p_.size;
      if (burst > 0 && p_.every.count() == 0) return std::nullopt;
      // Compared in double first: the product of a large burst number and `every` may not fit in 64 bits.
      const double offset = static_cast<double>(burst) * static_cast<double>(p_.every.count()) +
                            static_cast<double>(i) * static_cast<double>(p_.spacing.count());
      if (offset >= span_ns(p_.start, p_.stop)) return std::nullopt;
      const Nanos t =
          p_.start + p_.every * static_cast<std::int64_t>(burst) + p_.spacing * static_cast<std::int64_t>(i);
      if (t >= p_.stop) return std::nullopt;
      ++k_;
      return t;
    }
    case Pattern::kOnOff: return on_off();
    case Pattern::kAbuser: {
      const Nanos reform = std::clamp(p_.reform_at, p_.start, std::max(p_.start, p_.stop));
      if (!reformed_) {
        if (auto t = periodic(p_.start, reform, p_.period_ns)) return t;
        reformed_ = true;
        k_ = 0;
      }
      return periodic(reform, p_.stop, p_.reformed_period_ns);
    }
  }
  return std::nullopt;
}

}  // namespace rk::sim
