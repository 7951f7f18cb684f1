// ratekeeper/params.h: what a limit is, as a user states it, and its validation.
//
// Every algorithm takes `limit` requests per `window` (default one second), `count_refused` (a refused charge is
// still recorded, as a debt of at most one limit: docs/algorithms.md, "Debts"; default false but for earrrl) plus
// its own parameters:
//
//   earrrl         limit per window as an average rate; half_life (required)
//   gcra           limit per window as the emission rate; burst = extra requests beyond one (default 0)
//   token_bucket   refill limit per window; capacity (default limit)
//   leaky_bucket   leak limit per window; capacity (default limit)
//   leaky_queue    outflow limit per window; burst = how many may wait in the queue (default 0)
//   fixed_window   limit per window
//   sliding_log    limit per window, exact (limit <= 1,000,000: memory per key grows with it)
//   sliding_window limit per window, weighted with the previous window
//
//   rk::LimitSpec spec{.algorithm = rk::Algorithm::kEarrrl, .limit = 0.5, .half_life = std::chrono::seconds(10)};
//   for (const auto& e : rk::validate(spec)) std::cerr << e.param << ": " << e.message << "\n";
#pragma once

#include "ratekeeper/export.h"
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ratekeeper/units.h"

namespace rk {

enum class Algorithm : std::uint8_t {
  kEarrrl,
  kGcra,
  kTokenBucket,
  kLeakyBucket,
  kLeakyQueue,
  kFixedWindow,
  kSlidingLog,
  kSlidingWindow,
};

inline constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::kEarrrl,     Algorithm::kGcra,        Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
    Algorithm::kLeakyQueue, Algorithm::kFixedWindow, Algorithm::kSlidingLog,  Algorithm::kSlidingWindow,
};

// The names used everywhere (CLI, rules, docs): earrrl, gcra, token_bucket, leaky_bucket, leaky_queue,
// fixed_window, sliding_log, sliding_window.
RK_EXPORT std::string_view algorithm_name(Algorithm a);
RK_EXPORT std::optional<Algorithm> parse_algorithm(std::string_view name);

// Where fixed windows start. kEpoch: every multiple of the window since time 0 (for minutes, hours and days that is
// also UTC's calendar). kCalendar (fixed_window only, window of 7, 30 or 365 days): weeks start on Monday 00:00 UTC,
// "30 days" is a calendar month and "365 days" a calendar year, however long each one is.
enum class Align : std::uint8_t { kEpoch, kCalendar };

struct LimitSpec {
  Algorithm algorithm = Algorithm::kEarrrl;
  double limit = 0;  // requests per window
  Nanos window = std::chrono::seconds(1);
  std::optional<Nanos> half_life{};     // earrrl only
  std::optional<double> burst{};        // gcra, leaky_queue only: a whole number >= 0
  std::optional<double> capacity{};     // token_bucket, leaky_bucket only
  std::optional<bool> count_refused{};  // every algorithm
  Align align = Align::kEpoch;          // fixed_window only
};

struct ParamError {
  std::string param;    // "limit", "window", "half_life", ...
  std::string message;  // names the value and the allowed range
};

// Every problem with the spec, or none. Never throws.
RK_EXPORT std::vector<ParamError> validate(const LimitSpec& spec);

// Thrown by the Limiter constructor for an invalid spec, and by check() for an oversized key.
class RK_EXPORT InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Absurd-size bounds, documented in docs/algorithms.md.
inline constexpr double kMaxLimit = 1e12;
inline constexpr double kMaxSlidingLogLimit = 1e6;
inline constexpr Nanos kMaxDuration = std::chrono::hours(24 * 365 * 100);  // 100 years

}  // namespace rk
