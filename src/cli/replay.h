// cli/replay.h: `ratekeeper replay`, a trace through one limiter on the trace's own clock, as CSV.
//
//   printf '0 alice\n0.5 alice\n' | ratekeeper replay --algorithm earrrl --limit 0.5 --half-life 10s
//   time,key,allowed,remaining,retry_after,estimate
//   0,alice,1,6.213475,0,0
//   ...
// retry_after is in seconds (-1: never, the cost exceeds what the limit can admit); estimate is earrrl's estimate
// per window before the attempt (empty for other algorithms). leaky_queue adds a `delay` column (seconds).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace rk::cli {

// Returns the process exit code: 0 done, 1 a malformed trace line (named by number on `err`), 2 bad flags.
int run_replay(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace rk::cli
