#include "cli/simulate.h"

#include <charconv>
#include <cmath>
#include <exception>
#include <ostream>
#include <queue>

#include "cli/csv.h"
#include "cli/flags.h"
#include "ratekeeper/limiter.h"

namespace rk::cli {

namespace {

// Every client's attempts in time order (ties: client order), with the sample instants interleaved before the
// attempts of the same instant. Memory is one pending time per client, however long the scenario.
class Walk {
 public:
  Walk(const Scenario& s, std::optional<Nanos> sample_every) : s_(s), step_(sample_every) {
    arrivals_.reserve(s.clients.size());
    for (std::size_t i = 0; i < s.clients.size(); ++i) {
      arrivals_.emplace_back(s.clients[i].pattern);
      if (auto t = arrivals_.back().next()) queue_.push({*t, i});
    }
  }

  // Calls on_sample(t) and on_attempt(t, client) in order. False once kMaxAttempts is passed.
  template <typename Sample, typename Attempt>
  bool run(Sample&& on_sample, Attempt&& on_attempt, std::string& error) {
    std::uint64_t k = 0;  // the next sample is at k * step, while that is within the duration
    std::uint64_t attempts = 0;
    for (;;) {
      const bool sample_left = step_ && static_cast<double>(k) * static_cast<double>(step_->count()) <=
                                            static_cast<double>(s_.duration.count());
      if (sample_left) {
        const Nanos t = *step_ * static_cast<std::int64_t>(k);
        if (queue_.empty() || t <= queue_.top().time) {
          on_sample(t);
          ++k;
          continue;
        }
      }
      if (queue_.empty()) return true;
      const Pending p = queue_.top();
      queue_.pop();
      if (++attempts > static_cast<std::uint64_t>(kMaxAttempts)) {
        error = "the scenario made more than " + csv_number(kMaxAttempts) +
                " attempts (Poisson traffic above its mean); shorten it or lower the rates";
        return false;
      }
      on_attempt(p.time, p.client);
      if (auto t = arrivals_[p.client].next()) queue_.push({*t, p.client});
    }
  }

 private:
  struct Pending {
    Nanos time;
    std::size_t client;
    bool operator>(const Pending& o) const { return time != o.time ? time > o.time : client > o.client; }
  };

  const Scenario& s_;
  std::optional<Nanos> step_;
  std::vector<Arrivals> arrivals_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> queue_;
};

void append_row(std::string& row, const SimEvent& e, const std::string& client) {
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

}  // namespace

bool simulate(const Scenario& scenario, const LimitSpec& spec, const std::function<void(const SimEvent&)>& on_event,
              std::string& error) {
  Limiter limiter(spec);
  Walk walk(scenario, scenario.sample_every);
  return walk.run(
      [&](Nanos t) {
        for (std::size_t i = 0; i < scenario.clients.size(); ++i) {
          on_event({t, i, false, limiter.peek_at(scenario.clients[i].key, t, 1)});
        }
      },
      [&](Nanos t, std::size_t i) {
        const ScenarioClient& c = scenario.clients[i];
        on_event({t, i, true, limiter.check_at(c.key, t, c.cost)});
      },
      error);
}

bool compare(const Scenario& scenario, std::vector<CompareRow>& rows, std::string& error) {
  Limiter exact(LimitSpec{.algorithm = Algorithm::kSlidingLog, .limit = scenario.spec.limit,
                          .window = scenario.spec.window});
  std::vector<Limiter> limiters;
  rows.clear();
  for (const LimitSpec& spec : scenario.compare) {
    limiters.emplace_back(spec);
    rows.push_back({.spec = spec});
  }
  Walk walk(scenario, std::nullopt);
  return walk.run([](Nanos) {},
                  [&](Nanos t, std::size_t i) {
                    const ScenarioClient& c = scenario.clients[i];
                    const bool ok = exact.check_at(c.key, t, c.cost).allowed;
                    for (std::size_t a = 0; a < limiters.size(); ++a) {
                      const bool here = limiters[a].check_at(c.key, t, c.cost).allowed;
                      CompareRow& r = rows[a];
                      ++r.attempts;
                      r.allowed += here;
                      r.exact_allowed += ok;
                      r.wrongly_allowed += here && !ok;
                      r.wrongly_limited += !here && ok;
                    }
                  },
                  error);
}

int run_simulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string file;
  bool comparing = false;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> limit_args;
  std::vector<std::string> errors;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out << usage() << limit_flags_help();
      return 0;
    }
    if (a == "--compare") {
      comparing = true;
    } else if (a == "--seed" || a.rfind("--seed=", 0) == 0) {
      std::string v;
      if (a != "--seed") {
        v = a.substr(7);
      } else if (i + 1 < args.size()) {
        v = args[++i];
      }
      std::uint64_t n = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc{} || p != v.data() + v.size()) {
        errors.push_back("--seed: '" + v + "' is not a whole number from 0 to 18446744073709551615");
      } else {
        seed = n;
      }
    } else if (a.rfind("--", 0) == 0) {
      limit_args.push_back(a);
      if (a.find('=') == std::string::npos && i + 1 < args.size()) limit_args.push_back(args[++i]);
    } else if (file.empty()) {
      file = a;
    } else {
      errors.push_back("unexpected argument '" + a + "' (one scenario file at a time)");
    }
  }
  if (file.empty() && errors.empty()) errors.push_back("which scenario? (a YAML file, see examples/scenarios/)");
  if (!errors.empty()) {
    for (const auto& e : errors) err << "ratekeeper simulate: " << e << "\n";
    err << usage();
    return 2;
  }

  std::vector<ScenarioError> problems;
  std::optional<Scenario> scenario = load_scenario(file, problems);
  if (!scenario) {
    for (const auto& p : problems) err << "ratekeeper simulate: " << p.where() << ": " << p.message << "\n";
    return 2;
  }
  if (seed) {
    // The same derivation as in the file, from the new seed.
    for (std::size_t i = 0; i < scenario->clients.size(); ++i) scenario->clients[i].pattern.seed = client_seed(*seed, i);
  }
  LimitFlags flags;
  if (!parse_limit_overrides(limit_args, scenario->spec, flags, errors)) {
    for (const auto& e : errors) err << "ratekeeper simulate: " << e << "\n";
    err << usage() << limit_flags_help();
    return 2;
  }

  std::string error;
  try {
    if (comparing) {
      scenario->spec = flags.spec;
      for (LimitSpec& s : scenario->compare) {
        s.limit = flags.spec.limit;
        s.window = flags.spec.window;
      }
      std::vector<CompareRow> rows;
      if (!compare(*scenario, rows, error)) {
        err << "ratekeeper simulate: " << file << ": " << error << "\n";
        return 2;
      }
      out << "algorithm,attempts,allowed,exact_allowed,wrongly_allowed,wrongly_limited,wrongly_allowed_pct,"
             "wrongly_limited_pct\n";
      for (const CompareRow& r : rows) {
        const double n = r.attempts > 0 ? static_cast<double>(r.attempts) : 1.0;
        out << algorithm_name(r.spec.algorithm) << ',' << r.attempts << ',' << r.allowed << ',' << r.exact_allowed
            << ',' << r.wrongly_allowed << ',' << r.wrongly_limited << ','
            << csv_number(100.0 * static_cast<double>(r.wrongly_allowed) / n) << ','
            << csv_number(100.0 * static_cast<double>(r.wrongly_limited) / n) << '\n';
      }
      return 0;
    }
    std::vector<std::string> names;
    names.reserve(scenario->clients.size());
    for (const auto& c : scenario->clients) names.push_back(csv_field(c.name));
    out << "time,client,attempted,allowed,remaining,retry_after,delay,estimate\n";
    std::string row;
    const bool ok = simulate(*scenario, flags.spec,
                             [&](const SimEvent& e) {
                               row.clear();
                               append_row(row, e, names[e.client]);
                               out << row;
                             },
                             error);
    if (!ok) {
      out.flush();
      err << "ratekeeper simulate: " << file << ": " << error << "\n";
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
