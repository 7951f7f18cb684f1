#include "cli/replay.h"

#include <cmath>
#include <istream>
#include <ostream>

#include "cli/csv.h"
#include "cli/flags.h"
#include "cli/trace.h"
#include "ratekeeper/limiter.h"

namespace rk::cli {

int run_replay(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  LimitOverrides given;
  FlagSet flag_set(
      "usage: ratekeeper replay [flags] < trace   (one '<time-seconds> <key> [cost]' per line)\n"
      "  writes CSV: time,key,allowed,remaining,retry_after,estimate (seconds; retry_after -1: never), and for\n"
      "  leaky_queue a last column delay: how long the admitted request waits before it proceeds\n");
  add_limit_flags(flag_set, given);
  const Parsed parsed = flag_set.parse(args);
  if (parsed.help) {
    out << flag_set.help();
    return 0;
  }
  LimitFlags flags;
  std::vector<std::string> errors;
  for (const FlagProblem& p : parsed.problems) errors.push_back(p.to_string());
  if (!errors.empty() || !limit_from_flags(given, flags, errors)) {
    for (const auto& e : errors) err << "ratekeeper replay: " << e << "\n";
    err << help_hint("ratekeeper replay");
    return 2;
  }
  Limiter limiter(flags.spec, flags.store);
  const bool queue = flags.spec.algorithm == Algorithm::kLeakyQueue;
  out << "time,key,allowed,remaining,retry_after,estimate" << (queue ? ",delay" : "") << "\n";

  std::string line;
  std::string error;
  std::string row;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    TraceLine attempt;
    switch (parse_trace_line(line, flags.store.max_key_bytes, attempt, error)) {
      case TraceParse::kNothing: continue;
      case TraceParse::kError:
        out.flush();
        err << "ratekeeper replay: line " << number << ": " << error << "\n";
        return 1;
      case TraceParse::kAttempt: break;
    }
    const Decision d = limiter.check_at(attempt.key, attempt.time, attempt.cost);
    row.clear();
    row += format_seconds(attempt.time);
    row += ',';
    row += csv_field(attempt.key);
    row += d.allowed ? ",1," : ",0,";
    row += csv_number(d.remaining);
    row += ',';
    row += d.retry_after == kNever ? "-1" : format_seconds(d.retry_after);
    row += ',';
    if (d.estimate) row += csv_number(*d.estimate);
    if (queue) {
      row += ',';
      row += format_seconds(d.delay);
    }
    row += '\n';
    out << row;
  }
  return 0;
}

}  // namespace rk::cli
