// sim/simulate.h: a scenario's traffic through limiters on a simulated clock: the engine behind `ratekeeper
// simulate` (cli/simulate_command.h) and the dashboard's what-if panel (server/ui/what_if.h).
//
//   sim::simulate(scenario, spec, [](const sim::SimEvent& e) { ... }, error);   // every attempt and sample
//   sim::compare(scenario, rows, error);   // each algorithm of scenario.compare against the exact sliding window
//
// Nothing sleeps: the limiter is asked at explicit times (check_at, peek_at), so a scenario of hours runs in as
// long as its attempts take to decide.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"
#include "sim/scenario.h"

namespace rk::sim {

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

}  // namespace rk::sim
