#include "cli/simulate_command.h"

#include <cstdint>
#include <cmath>
#include <exception>
#include <ostream>

#include "cli/csv.h"
#include "cli/flags.h"
#include "sim/simulate.h"
#include "ratekeeper/limiter.h"

namespace rk::cli {

namespace {

void append_row(std::string& row, const sim::SimEvent& e, const std::string& client) {
  const Decision& d = e.decision;
  row += format_seconds(e.time);
  row += ',';
  row += client;
  row += e.attempted ? ",1," : ",0,";
  row += d.allowed ? "1," : "0,";
  row += csv_number(d.remaining);
  row += ',';
  row += d.retry_after == kNever ? "-1" : format_seconds(d.retry_after);
  row += ',';
  row += format_seconds(d.delay);
  row += ',';
  if (d.estimate) row += csv_number(*d.estimate);
  row += '\n';
}

const char* usage() {
  return "usage: ratekeeper simulate SCENARIO.yaml [--compare] [--seed N] [limit flags overriding the scenario's]\n"
         "  writes CSV: time,client,attempted,allowed,remaining,retry_after,delay,estimate (seconds; attempted 0:\n"
         "  a sample row, what an attempt would be told then); --compare: every algorithm against the exact\n"
         "  sliding window on the scenario's attempts. Scenario format: docs/simulate.md\n";
}

// What the command line asks for.
struct Request {
  std::string file;
  bool comparing = false;
  std::optional<std::uint64_t> seed;
  LimitOverrides given;
};

void add_flags(FlagSet& flag_set, Request& r) {
  flag_set.positional("SCENARIO.yaml", "the scenario (docs/simulate.md)", r.file);
  flag_set.toggle("--compare", "every algorithm against the exact sliding window", r.comparing);
  flag_set.value("--seed", "N", "the clients' random streams, instead of the scenario's seed",
                 [&r](const std::string& v) {
                   r.seed = read_whole(v, 0, UINT64_MAX);
                   return r.seed ? std::string() : is_not(v, "a whole number from 0 to 18446744073709551615");
                 });
  add_limit_flags(flag_set, r.given);
}

// The scenario's attempts through every algorithm and the exact sliding window, one CSV row per algorithm.
bool write_compare(sim::Scenario& scenario, const LimitSpec& spec, std::ostream& out, std::string& error) {
  scenario.spec = spec;
  for (LimitSpec& s : scenario.compare) {
    s.limit = spec.limit;
    s.window = spec.window;
  }
  std::vector<sim::CompareRow> rows;
  if (!sim::compare(scenario, rows, error)) return false;
  out << "algorithm,attempts,allowed,exact_allowed,wrongly_allowed,wrongly_limited,wrongly_allowed_pct,"
         "wrongly_limited_pct\n";
  for (const sim::CompareRow& r : rows) {
    const double n = r.attempts > 0 ? static_cast<double>(r.attempts) : 1.0;
    out << algorithm_name(r.spec.algorithm) << ',' << r.attempts << ',' << r.allowed << ',' << r.exact_allowed << ','
        << r.wrongly_allowed << ',' << r.wrongly_limited << ','
        << csv_number(100.0 * static_cast<double>(r.wrongly_allowed) / n) << ','
        << csv_number(100.0 * static_cast<double>(r.wrongly_limited) / n) << '\n';
  }
  return true;
}

// The scenario through one limiter, one CSV row per attempt and sample.
bool write_events(const sim::Scenario& scenario, const LimitSpec& spec, std::ostream& out, std::string& error) {
  std::vector<std::string> names;
  names.reserve(scenario.clients.size());
  for (const auto& c : scenario.clients) names.push_back(csv_field(c.name));
  out << "time,client,attempted,allowed,remaining,retry_after,delay,estimate\n";
  std::string row;
  return sim::simulate(
      scenario, spec,
      [&](const sim::SimEvent& e) {
        row.clear();
        append_row(row, e, names[e.client]);
        out << row;
      },
      error);
}

int refuse(const std::vector<std::string>& errors, std::ostream& err) {
  for (const auto& e : errors) err << "ratekeeper simulate: " << e << "\n";
  err << help_hint("ratekeeper simulate");
  return 2;
}

}  // namespace

int run_simulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Request request;
  FlagSet flag_set(usage());
  add_flags(flag_set, request);
  const Parsed parsed = flag_set.parse(args);
  if (parsed.help) {
    out << flag_set.help();
    return 0;
  }
  std::vector<std::string> errors;
  for (const FlagProblem& p : parsed.problems) {
    errors.push_back(p.to_string() +
                     (p.kind == FlagProblem::Kind::kUnexpected ? " (one scenario file at a time)" : ""));
  }
  if (request.file.empty() && errors.empty())
    errors.push_back("which scenario? (a YAML file, see examples/scenarios/)");
  if (!errors.empty()) return refuse(errors, err);

  std::vector<sim::ScenarioError> problems;
  std::optional<sim::Scenario> scenario = sim::load_scenario(request.file, problems);
  if (!scenario) {
    for (const auto& p : problems) err << "ratekeeper simulate: " << p.to_string() << "\n";
    return 2;
  }
  if (request.seed) {
    // The same derivation as in the file, from the new seed.
    for (std::size_t i = 0; i < scenario->clients.size(); ++i) {
      scenario->clients[i].pattern.seed = sim::client_seed(*request.seed, i);
    }
  }
  LimitFlags flags;
  if (!limit_over(request.given, scenario->spec, flags, errors)) return refuse(errors, err);

  std::string error;
  try {
    const bool ok = request.comparing ? write_compare(*scenario, flags.spec, out, error)
                                      : write_events(*scenario, flags.spec, out, error);
    if (!ok) {
      out.flush();
      err << "ratekeeper simulate: " << request.file << ": " << error << "\n";
      return 2;
    }
  } catch (const std::exception& e) {
    // A limit the overrides made invalid for one of the compared algorithms (a fractional --limit for the window
    // counters), or memory: say so rather than die.
    out.flush();
    err << "ratekeeper simulate: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace rk::cli
