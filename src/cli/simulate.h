// cli/simulate.h: `ratekeeper simulate`, a scenario's traffic through one limiter on a simulated clock.
//
//   ratekeeper simulate examples/scenarios/convergence.yaml [--algorithm gcra --limit 5 ...] > out.csv
//   time,client,attempted,allowed,remaining,retry_after,delay,estimate
//   0,red,0,1,99.19,0,0,0          <- a sample row (attempted 0): what an attempt now would be told (peek)
//   50,red,1,1,...                 <- an attempt
//
//   ratekeeper simulate examples/scenarios/poisson.yaml --compare
//   algorithm,attempts,allowed,exact_allowed,wrongly_allowed,wrongly_limited,wrongly_allowed_pct,wrongly_limited_pct
//
// Times and retry_after/delay are seconds (retry_after -1: never); estimate is earrrl's, per window, before the
// attempt (empty for other algorithms). Nothing sleeps: the limiter is asked at explicit times (check_at, peek_at),
// so a scenario of hours runs in as long as its attempts take to decide.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "cli/scenario.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk::cli {

struct SimEvent {
  Nanos time{0};
  std::size_t client = 0;  // index into Scenario::clients
  bool attempted = true;   // false: a sample row (peek), which records nothing
  Decision decision;
};

// Runs `scenario` through a limiter of `spec`, calling `on_event` for every attempt and sample, in time order
// (at one instant: samples first, then attempts in client order). Returns false with `error` set when the scenario
// makes more than kMaxAttempts attempts (Poisson traffic can overshoot the checked mean).
bool simulate(const Scenario& scenario, const LimitSpec& spec, const std::function<void(const SimEvent&)>& on_event,
              std::string& error);

struct CompareRow {
  LimitSpec spec;
  std::uint64_t attempts = 0;
  std::uint64_t allowed = 0;
  std::uint64_t exact_allowed = 0;    // what sliding_log (exact: at most limit in any window) allowed
  std::uint64_t wrongly_allowed = 0;  // allowed here, refused by the exact limiter
  std::uint64_t wrongly_limited = 0;  // refused here, allowed by the exact limiter
};

// The scenario's attempts through every algorithm of `scenario.compare` side by side with the exact sliding window
// of the same limit and window. Each limiter sees the same attempts and keeps its own state.
bool compare(const Scenario& scenario, std::vector<CompareRow>& rows, std::string& error);

// The subcommand. Returns the exit code: 0 done, 2 bad flags or a bad scenario (file:line:column on `err`).
int run_simulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace rk::cli
