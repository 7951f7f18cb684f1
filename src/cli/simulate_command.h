// cli/simulate_command.h: `ratekeeper simulate`, a scenario's traffic through one limiter on a simulated clock.
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

#include <iosfwd>
#include <string>
#include <vector>

namespace rk::cli {

// The subcommand. Returns the exit code: 0 done, 2 bad flags or a bad scenario (file:line:column on `err`).
int run_simulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace rk::cli
