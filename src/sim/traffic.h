// sim/traffic.h: the request patterns of `ratekeeper simulate`, each a generator of attempt times.
//
//   rk::sim::ClientPattern p{.kind = rk::sim::Pattern::kPeriodic, .period_ns = 1e8,
//                            .start = std::chrono::seconds(50), .stop = std::chrono::seconds(200)};
//   rk::sim::Arrivals a(p);
//   while (auto t = a.next()) use(*t);   // 50.0 s, 50.1 s, ..., 199.9 s: exactly 1500 attempts
//
// Every generator yields non-decreasing times in [start, stop). Times are integer nanoseconds: the k-th periodic
// attempt is at start + round(k * period), computed from k rather than summed, so there is no drift. Poisson
// arrivals draw from std::mt19937_64 (whose output the standard fixes) through our own inverse transform (the
// standard's distributions differ between libraries), so a seed gives the same trace everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

#include "ratekeeper/units.h"

namespace rk::sim {

enum class Pattern {
  kPeriodic,  // one attempt every period
  kPoisson,   // exponential gaps of mean period
  kBurst,     // `size` attempts `spacing` apart, a burst every `every` (just one burst when every is 0)
  kOnOff,     // periodic or Poisson arrivals during `on`, silence during `off`, repeated
  kAbuser,    // periodic at period until reform_at, then periodic at reformed_period
};

struct ClientPattern {
  Pattern kind = Pattern::kPeriodic;
  // periodic, poisson (mean gap), on_off (while on), abuser (before reforming): one a second unless given
  double period_ns = kNanosPerSecond;
  std::uint64_t size = 1;                       // burst
  Nanos every{0};                               // burst
  Nanos spacing{0};                             // burst
  Nanos on{0};                                  // on_off
  Nanos off{0};                                 // on_off
  bool poisson_arrivals = false;                // on_off
  Nanos reform_at{0};                           // abuser: an absolute time
  double reformed_period_ns = kNanosPerSecond;  // abuser
  Nanos start{0};                               // attempts in [start, stop)
  Nanos stop{0};
  std::uint64_t seed = 0;  // poisson, on_off with poisson arrivals
};

// How many attempts the pattern makes: exact for the deterministic kinds, the mean for Poisson ones. For the size
// cap, before anything runs.
double expected_attempts(const ClientPattern& p);

class Arrivals {
 public:
  explicit Arrivals(const ClientPattern& p);

  // The next attempt's time, or nullopt once the client has stopped.
  std::optional<Nanos> next();

 private:
  std::optional<Nanos> periodic(Nanos from, Nanos until, double period_ns);
  std::optional<Nanos> on_off();
  double exponential_gap_ns();  // mean period_ns

  ClientPattern p_;
  std::mt19937_64 rng_;
  std::uint64_t k_ = 0;    // attempts made in the current phase (periodic, burst, abuser)
  double on_time_ns_ = 0;  // poisson and on_off: time elapsed on the client's own clock, which stops while off
  bool reformed_ = false;  // abuser
};

}  // namespace rk::sim
