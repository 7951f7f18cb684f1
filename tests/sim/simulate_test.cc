// `ratekeeper simulate`: the traffic generators, the seed's figures on a simulated clock, and every kind of bad
// scenario file with its exact message. Nothing sleeps: the simulation asks the limiter at explicit times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/simulate_command.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "sim/traffic.h"
#include "support/test_util.h"

namespace rk::sim {
namespace {

using cli::run_simulate;

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<Nanos> all_times(const ClientPattern& p) {
  std::vector<Nanos> out;
  Arrivals a(p);
  while (auto t = a.next()) out.push_back(*t);
  return out;
}

Scenario parse_ok(const std::string& yaml) {
  std::vector<ScenarioError> errors;
  auto s = parse_scenario(yaml, "test.yaml", errors);
  for (const auto& e : errors) ADD_FAILURE() << e.to_string();
  return s.value_or(Scenario{});
}

// The one error a bad scenario gives, as "file:line:column: message".
std::string parse_error(const std::string& yaml) {
  std::vector<ScenarioError> errors;
  auto s = parse_scenario(yaml, "bad.yaml", errors);
  EXPECT_FALSE(s.has_value());
  if (errors.empty()) return "(no error)";
  EXPECT_EQ(errors.size(), 1u) << errors[1].message;
  return errors[0].to_string();
}

std::vector<SimEvent> run(const Scenario& s, const LimitSpec& spec) {
  std::vector<SimEvent> events;
  std::string error;
  EXPECT_TRUE(simulate(
      s, spec, [&](const SimEvent& e) { events.push_back(e); }, error))
      << error;
  return events;
}

// ---- generators -------------------------------------------------------------------------------------------------

TEST(SimulateTraffic, PeriodicIsExactAndNeverDrifts) {
  const auto times =
      all_times({.kind = Pattern::kPeriodic, .period_ns = 1e9 / 10, .start = seconds(50), .stop = seconds(200)});
  ASSERT_EQ(times.size(), 1500u);
  for (std::size_t k = 0; k < times.size(); ++k) EXPECT_EQ(times[k], seconds(50) + milliseconds(100) * k);
  // A rate whose period is not a whole number of nanoseconds: the k-th attempt is rounded from k, not summed.
  const auto thirds =
      all_times({.kind = Pattern::kPeriodic, .period_ns = 1e9 / 3, .start = seconds(0), .stop = seconds(3000)});
  ASSERT_EQ(thirds.size(), 9000u);
  EXPECT_EQ(thirds[8999], Nanos{2'999'666'666'667});
}

TEST(SimulateTraffic, PoissonMeanWithinStatisticalBoundsAndReproducible) {
  const ClientPattern p{
      .kind = Pattern::kPoisson, .period_ns = 1e8, .start = seconds(0), .stop = seconds(10'000), .seed = 42};
  const auto times = all_times(p);
  // 100,000 expected, standard deviation 316: five of them either way.
  EXPECT_NEAR(static_cast<double>(times.size()), 100'000.0, 5 * 316.0);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  // Exponential gaps: the fraction of gaps above the mean is e^-1 (binomial sd about 0.0015).
  std::size_t long_gaps = 0;
  for (std::size_t i = 1; i < times.size(); ++i) long_gaps += (times[i] - times[i - 1]) > milliseconds(100);
  EXPECT_NEAR(static_cast<double>(long_gaps) / static_cast<double>(times.size()), std::exp(-1.0), 0.0075);
  EXPECT_EQ(all_times(p), times);
  ClientPattern other = p;
  other.seed = 43;
  EXPECT_NE(all_times(other), times);
}

TEST(SimulateTraffic, BurstsOnOffAndAbuserCounts) {
  const auto bursts = all_times({.kind = Pattern::kBurst,
                                 .size = 25,
                                 .every = seconds(10),
                                 .spacing = milliseconds(20),
                                 .start = seconds(5),
                                 .stop = seconds(60)});
  ASSERT_EQ(bursts.size(), 6u * 25);  // at 5, 15, ..., 55 s
  EXPECT_EQ(bursts[0], seconds(5));
  EXPECT_EQ(bursts[24], seconds(5) + milliseconds(480));
  EXPECT_EQ(bursts[25], seconds(15));

  const auto on_off = all_times({.kind = Pattern::kOnOff,
                                 .period_ns = 1e8,
                                 .on = seconds(5),
                                 .off = seconds(5),
                                 .start = seconds(0),
                                 .stop = seconds(60)});
  ASSERT_EQ(on_off.size(), 6u * 50);
  for (Nanos t : on_off) EXPECT_LT(t % seconds(10), seconds(5)) << t.count();

  const auto abuser = all_times({.kind = Pattern::kAbuser,
                                 .period_ns = 6e8,
                                 .reform_at = seconds(150),
                                 .reformed_period_ns = 1e9,
                                 .start = seconds(0),
                                 .stop = seconds(300)});
  ASSERT_EQ(abuser.size(), 250u + 150u);
  EXPECT_EQ(abuser[249], milliseconds(149'400));
  EXPECT_EQ(abuser[250], seconds(150));
  EXPECT_EQ(abuser.back(), seconds(299));
}

TEST(SimulateTraffic, CountSpreadsPeriodicClientsAndSeedsPoissonOnesApart) {
  const Scenario s = parse_ok(R"(
duration: 10s
limiter: {algorithm: fixed_window, limit: 5}
clients:
  - {name: poll, pattern: periodic, rate: 1, count: 4}
  - {name: rand, pattern: poisson, rate: 1, count: 2}
)");
  ASSERT_EQ(s.clients.size(), 6u);
  EXPECT_EQ(s.clients[0].name, "poll-0");
  EXPECT_EQ(s.clients[3].name, "poll-3");
  EXPECT_EQ(s.clients[2].pattern.start, milliseconds(500));
  EXPECT_EQ(s.clients[4].name, "rand-0");
  EXPECT_NE(all_times(s.clients[4].pattern), all_times(s.clients[5].pattern));
}

TEST(SimulateTraffic, ClientsSharingAKeyShareOneLimit) {
  // Ten pollers behind one address, and one client of its own: the fixed window counts the ten together.
  const Scenario s = parse_ok(R"(
duration: 10s
limiter: {algorithm: fixed_window, limit: 5}
clients:
  - {name: office, key: 192.0.2.1, pattern: periodic, rate: 1, count: 10}
  - {name: home, pattern: periodic, rate: 1}
)");
  ASSERT_EQ(s.clients.size(), 11u);
  EXPECT_EQ(s.clients[9].key, "192.0.2.1");
  EXPECT_EQ(s.clients[10].key, "home");
  std::map<std::string, int> allowed;
  for (const SimEvent& e : run(s, s.spec)) allowed[s.clients[e.client].key] += e.decision.allowed;
  EXPECT_EQ(allowed["192.0.2.1"], 50);  // 5 a second of the 100 attempts
  EXPECT_EQ(allowed["home"], 10);
}

// ---- the seed's figures -----------------------------------------------------------------------------------------

constexpr const char* kConvergence = R"(
duration: 300s
sample_every: 1s
limiter: {algorithm: earrrl, limit: 100, half_life: 10s}
clients:
  - {name: fast,   pattern: periodic, rate: 10,  start: 50s, stop: 200s}
  - {name: medium, pattern: periodic, rate: 1,   start: 50s, stop: 200s}
  - {name: slow,   pattern: periodic, rate: 0.1, start: 50s, stop: 200s}
)";

TEST(SimulateSeed, EstimateReachesHalfTheRateInOneHalfLifeAndHalvesAfterStopping) {
  const Scenario s = parse_ok(kConvergence);
  std::map<std::pair<std::string, std::int64_t>, double> sampled;  // (client, second) -> estimate
  for (const SimEvent& e : run(s, s.spec)) {
    if (!e.attempted) sampled[{s.clients[e.client].name, e.time / seconds(1)}] = e.decision.estimate.value();
  }
  ASSERT_EQ(sampled.size(), 3u * 301);
  auto at = [&](const std::string& client, std::int64_t second) { return sampled[std::make_pair(client, second)]; };
  EXPECT_EQ(at("fast", 50), 0.0);
  // 10 s (one half-life) after the start: about half the rate (discretised: the sum of 100 impulses, not 1-2^-1).
  EXPECT_NEAR(at("fast", 60), 5.0, 0.25);
  EXPECT_NEAR(at("medium", 60), 0.5, 0.05);
  // Converged by 200 s: within the steady train's bounce of the true rate.
  EXPECT_NEAR(at("fast", 200), 10.0, 0.35);
  EXPECT_NEAR(at("medium", 200), 1.0, 0.04);
  // No request after 199.9 s: pure decay, exactly half per half-life.
  for (const char* c : {"fast", "medium", "slow"}) {
    EXPECT_NEAR(at(c, 210) / at(c, 200), 0.5, 1e-9) << c;
    EXPECT_NEAR(at(c, 220) / at(c, 200), 0.25, 1e-9) << c;
  }
}

constexpr const char* kAbuser = R"(
duration: 300s
limiter: {algorithm: earrrl, limit: 1, window: 1s, half_life: 10s}
clients:
  - {name: abuser, pattern: abuser, period: 600ms, reform_at: 150s}
)";

TEST(SimulateSeed, FixedWindowLetsTheAbuserThroughAtTheFullRateEveryWindow) {
  const Scenario s = parse_ok(kAbuser);
  const LimitSpec fixed{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = seconds(10)};
  std::map<std::int64_t, int> allowed, attempted;  // per 10 s window
  for (const SimEvent& e : run(s, fixed)) {
    attempted[e.time / seconds(10)] += 1;
    allowed[e.time / seconds(10)] += e.decision.allowed;
  }
  for (std::int64_t w = 0; w < 30; ++w) {
    EXPECT_EQ(allowed[w], 10) << "window " << w;                    // the whole allowance, every window
    EXPECT_EQ(attempted[w], w < 15 ? (w % 3 == 2 ? 16 : 17) : 10);  // 1.67/s, then exactly 1/s
  }
}

// When EARRRL first refuses the abuser and when it lets it back in (every attempt allowed from then on).
struct Lockout {
  Nanos first_refused{-1};
  Nanos readmitted{-1};
  int allowed_before_lockout = 0;
  int allowed_while_locked = 0;
};

Lockout lockout(const Scenario& s, const LimitSpec& spec) {
  Lockout l;
  Nanos last_refused{-1};
  const auto events = run(s, spec);
  for (const SimEvent& e : events) {
    if (!e.decision.allowed) {
      if (l.first_refused < Nanos{0}) l.first_refused = e.time;
      last_refused = e.time;
    }
  }
  for (const SimEvent& e : events) {
    if (!e.decision.allowed) continue;
    if (e.time < l.first_refused) ++l.allowed_before_lockout;
    if (e.time > l.first_refused && e.time < last_refused) ++l.allowed_while_locked;
    if (e.time > last_refused && l.readmitted < Nanos{0}) l.readmitted = e.time;
  }
  return l;
}

TEST(SimulateSeed, EarrrlLocksTheAbuserOutAndReadmitsItOnceItsAverageFallsBelowTheLimit) {
  const Scenario s = parse_ok(kAbuser);
  // Half-life 10 s: refused from the 24th attempt (13.8 s, when N·λ passes 1), locked out through the whole abuse
  // and then some, readmitted at 193 s: the estimate of a client at exactly 1/s tends to λ/(e^λ − 1) = 0.966 from
  // above, its excess over that halving every half-life, and it needs 4.3 half-lives to fall from 1.63 to 1.
  Lockout l = lockout(s, s.spec);
  EXPECT_EQ(l.first_refused, milliseconds(13'800));
  EXPECT_EQ(l.allowed_before_lockout, 23);
  EXPECT_EQ(l.allowed_while_locked, 0);
  EXPECT_EQ(l.readmitted, seconds(193));
  // Half-life 20 s: the asymptote 0.983 is nearer the limit, so it takes 5.3 half-lives: readmitted at 256 s,
  // the seed's "roughly 255 seconds".
  LimitSpec slow = s.spec;
  slow.half_life = seconds(20);
  l = lockout(s, slow);
  EXPECT_EQ(l.first_refused, seconds(27));
  EXPECT_EQ(l.allowed_while_locked, 0);
  EXPECT_EQ(l.readmitted, seconds(256));
}

// ---- output and --compare ---------------------------------------------------------------------------------------

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("rk_simulate_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(SimulateCli, WritesAttemptAndSampleRowsAsCsv) {
  const std::string file = write_temp("csv.yaml", R"(
duration: 2s
sample_every: 1s
limiter: {algorithm: earrrl, limit: 0.5, half_life: 10s}
clients:
  - {name: "a,b", pattern: periodic, rate: 1}
)");
  std::ostringstream out, err;
  ASSERT_EQ(run_simulate({file}, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "time,client,attempted,allowed,remaining,retry_after,delay,estimate\n"
            "0,\"a,b\",0,1,6.213475204444817,0,0,0\n"
            "0,\"a,b\",1,1,6.213475204444817,0,0,0\n"
            // the seed's 0.0647 one second after the first request: ln 2 / 10 * 2^-0.1, to the last bit
            "1,\"a,b\",0,1,5.28044221290801,0,0,0.06467291874531493\n"
            "1,\"a,b\",1,1,5.28044221290801,0,0,0.06467291874531493\n"
            "2,\"a,b\",0,1,4.409891649611886,0,0,0.125014885593673\n");
}

TEST(SimulateCli, FlagsOverrideTheScenarioAndDropParametersTheNewAlgorithmHasNoUseFor) {
  const std::string file = write_temp("override.yaml", kAbuser);
  std::ostringstream out, err;
  ASSERT_EQ(run_simulate({file, "--algorithm", "gcra", "--burst=2"}, out, err), 0) << err.str();
  std::istringstream rows(out.str());
  std::string line;
  std::getline(rows, line);
  int allowed = 0;
  while (std::getline(rows, line)) allowed += line.find(",1,1,") != std::string::npos;
  EXPECT_EQ(allowed, 3 + 299);  // the burst of three, then one a second until 299 s

  std::ostringstream out2, err2;
  EXPECT_EQ(run_simulate({file, "--algorithm", "gcra", "--half-life", "1s"}, out2, err2), 2);
  EXPECT_EQ(err2.str().substr(0, 69), "ratekeeper simulate: half_life: half_life is a parameter of earrrl, n");
}

TEST(SimulateCli, CompareCountsDisagreementsWithTheExactSlidingWindow) {
  const Scenario s = parse_ok(R"(
duration: 120s
seed: 3
limiter: {algorithm: sliding_log, limit: 10}
clients:
  - {name: p, pattern: poisson, rate: 12, count: 5}
)");
  std::vector<CompareRow> rows;
  std::string error;
  ASSERT_TRUE(compare(s, rows, error)) << error;
  ASSERT_EQ(rows.size(), 8u);
  for (const CompareRow& r : rows) {
    EXPECT_GT(r.attempts, 6000u);
    EXPECT_EQ(r.allowed + r.wrongly_limited - r.wrongly_allowed, r.exact_allowed) << algorithm_name(r.spec.algorithm);
    if (r.spec.algorithm == Algorithm::kSlidingLog) {
      EXPECT_EQ(r.wrongly_allowed + r.wrongly_limited, 0u);
    } else {
      EXPECT_GT(r.wrongly_allowed + r.wrongly_limited, 0u) << algorithm_name(r.spec.algorithm);
    }
  }
  // GCRA with burst limit - 1 and the token bucket of capacity limit are the same limiter.
  EXPECT_EQ(rows[1].allowed, rows[2].allowed);
}

TEST(SimulateCli, EveryExampleScenarioParsesAndRuns) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RK_SCENARIOS)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    std::ostringstream out, err;
    EXPECT_EQ(run_simulate({entry.path().string()}, out, err), 0) << entry.path() << ": " << err.str();
    EXPECT_GT(out.str().size(), 100u) << entry.path();
  }
  EXPECT_GE(files, 5);
}

// ---- bad scenario files: one case per kind of error, each with its exact message --------------------------------

constexpr const char* kHead = "duration: 100s\nlimiter: {algorithm: earrrl, limit: 1, half_life: 10s}\nclients:\n";

TEST(SimulateBadScenario, UnknownKey) {
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 1, speed: 2}\n"),
            "bad.yaml:4:43: clients[0]: unknown key 'speed' (expected one of: name, key, pattern, count, cost, start, "
            "stop, rate, period, seed)");
  EXPECT_EQ(parse_error("duration: 1s\nlimiter: {algorithm: gcra, limit: 1}\nclient: []\nclients: [{name: a, pattern: "
                        "periodic, rate: 1}]\n"),
            "bad.yaml:3:1: scenario: unknown key 'client' (expected one of: description, duration, sample_every, "
            "seed, limiter, compare, clients)");
}

TEST(SimulateBadScenario, NegativeOrZeroRate) {
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: poisson, rate: -3}\n"),
            "bad.yaml:4:39: clients[0].rate: must be above 0 requests a second (got -3)");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, period: 0s}\n"),
            "bad.yaml:4:42: clients[0].period: must be longer than 0");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, period: -1s}\n"),
            "bad.yaml:4:42: clients[0].period: '-1s' is not a duration (like 10s, 250ms, 1.5m, 2h, 1d; never "
            "negative)");
}

TEST(SimulateBadScenario, StopBeforeStartOrAfterTheEnd) {
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 1, start: 50s, stop: 20s}\n"),
            "bad.yaml:4:61: clients[0].stop: 20s must be after start 50s");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 1, stop: 101s}\n"),
            "bad.yaml:4:49: clients[0].stop: 101s is after the end of the scenario (duration 100s)");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: abuser, rate: 2, reform_at: 150s}\n"),
            "bad.yaml:4:52: clients[0].reform_at: 150s must be between start 0s and stop 100s");
}

TEST(SimulateBadScenario, AbsurdSizesAreRefusedBeforeAnythingRuns) {
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 1000}\n"
                                             "  - {name: b, pattern: periodic, rate: 100000}\n"),
            "bad.yaml:5:5: clients[1]: the scenario would make about 10100000 attempts by this client, over the limit "
            "of 10000000 (shorten it or lower the rates)");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 2e9}\n"),
            "bad.yaml:4:40: clients[0].rate: 2000000000 a second is absurd: at most 1000000000 (one a nanosecond)");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 1, count: 100001}\n"),
            "bad.yaml:4:50: clients[0].count: '100001' is not a whole number from 1 to 100000");
  EXPECT_EQ(parse_error("duration: 100s\nsample_every: 1us\nlimiter: {algorithm: gcra, limit: 1}\n"
                        "clients: [{name: a, pattern: periodic, rate: 1}]\n"),
            "bad.yaml:2:15: sample_every: 0.000001s would make 100000001 sample rows, over the limit of 10000000 "
            "(sample less often)");
  EXPECT_EQ(parse_error("duration: 200y\nlimiter: {algorithm: gcra, limit: 1}\nclients: []\n"),
            "bad.yaml:1:11: duration: '200y' is not a duration (like 10s, 250ms, 1.5m, 2h, 1d; never negative)");
  EXPECT_EQ(parse_error("duration: 150w\nlimiter: {algorithm: gcra, limit: 1}\nclients: []\n"),
            "bad.yaml:3:10: clients: expected a non-empty list");
}

// The attack of "hostile round two": `count: 100000` of a 4,089-byte name made 100,000 clients, each with two copies
// of the name (about 1 GB), before any bound was looked at. The bound on names is arithmetic, before expanding.
TEST(SimulateBadScenario, AHundredThousandLongNamesAreRefusedBeforeAnyIsMade) {
  const std::string yaml =
      std::string(kHead) + "  - {name: " + std::string(4089, 'n') + ", pattern: periodic, rate: 0.01, count: 100000}\n";
  test::reset_peak_rss();
  const std::int64_t before = test::rss_bytes();
  EXPECT_EQ(parse_error(yaml),
            "bad.yaml:4:4141: clients[0].count: 100000 clients named so would make 819000000 bytes of names and "
            "keys in all, over the limit of 16777216 (shorter names, or fewer clients)");
  EXPECT_LT(test::peak_rss_bytes() - before, 32 << 20);
  // Within the bound, the same long name is fine, and so are many clients of short names.
  EXPECT_EQ(parse_ok(std::string(kHead) + "  - {name: " + std::string(4089, 'n') +
                     ", pattern: periodic, rate: 0.01, count: 2000}\n")
                .clients.size(),
            2000u);
  EXPECT_EQ(
      parse_ok(std::string(kHead) + "  - {name: n, pattern: periodic, rate: 0.01, count: 100000}\n").clients.size(),
      100000u);
  // The clients of several entries count together, against the bound on clients as against the one on names.
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 0.01, count: 60000}\n" +
                        "  - {name: b, pattern: periodic, rate: 0.01, count: 60000}\n"),
            "bad.yaml:5:53: clients[1].count: 60000 more clients make 120000 in all, over the limit of 100000");
}

TEST(SimulateBadScenario, BadLimiter) {
  EXPECT_EQ(parse_error("duration: 10s\nlimiter: {algorithm: earrrl, limit: 1}\nclients: [{name: a, pattern: "
                        "periodic, rate: 1}]\n"),
            "bad.yaml:2:10: limiter.half_life: earrrl needs half_life: how long the estimate takes to halve when "
            "requests stop");
  EXPECT_EQ(parse_error("duration: 10s\nlimiter: {algorithm: gcra, limit: -1}\nclients: [{name: a, pattern: "
                        "periodic, rate: 1}]\n"),
            "bad.yaml:2:35: limiter.limit: limit must be a number greater than 0 (got -1)");
  EXPECT_EQ(parse_error("duration: 10s\nlimiter: {algorithm: bucket, limit: 1}\nclients: [{name: a, pattern: "
                        "periodic, rate: 1}]\n"),
            "bad.yaml:2:22: limiter.algorithm: unknown algorithm 'bucket' (earrrl, gcra, token_bucket, leaky_bucket, "
            "leaky_queue, fixed_window, sliding_log, sliding_window)");
}

// A scenario spells booleans as a rules file does (yaml/reader.h): TRUE too, and never yes.
TEST(SimulateBadScenario, BooleansAsInRulesFiles) {
  const std::string clients = "clients: [{name: a, pattern: periodic, rate: 1}]\n";
  const Scenario s =
      parse_ok("duration: 10s\nlimiter: {algorithm: fixed_window, limit: 1, count_refused: TRUE}\n" + clients);
  EXPECT_EQ(s.spec.count_refused, true);
  EXPECT_EQ(parse_error("duration: 10s\nlimiter: {algorithm: fixed_window, limit: 1, count_refused: yes}\n" + clients),
            "bad.yaml:2:61: limiter.count_refused: expected true or false");
}

TEST(SimulateBadScenario, BadClients) {
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: zigzag}\n"),
            "bad.yaml:4:24: clients[0].pattern: unknown pattern 'zigzag' (periodic, poisson, burst, on_off, abuser)");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic}\n"),
            "bad.yaml:4:5: clients[0]: needs rate (requests a second) or period (a duration)");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: burst, size: 10, spacing: 1s, every: 5s}\n"),
            "bad.yaml:4:61: clients[0].every: bursts would overlap: 10 requests 1s apart last longer than every 5s");
  EXPECT_EQ(parse_error(std::string(kHead) + "  - {name: a, pattern: periodic, rate: 1}\n"
                                             "  - {name: a, pattern: poisson, rate: 1}\n"),
            "bad.yaml:5:12: clients[1].name: 'a' names another client too");
  EXPECT_EQ(
      parse_error(std::string(kHead) + "  - {name: " + std::string(5000, 'k') + ", pattern: periodic, rate: 1}\n"),
      "bad.yaml:4:12: clients[0].name: 5000 bytes is too long for a key (at most 4089)");
}

TEST(SimulateBadScenario, NotYamlOrNoFile) {
  EXPECT_EQ(parse_error("duration: [10s\n"), "bad.yaml:2:1: not valid YAML: end of sequence flow not found");
  std::ostringstream out, err;
  EXPECT_EQ(run_simulate({"/nonexistent/scenario.yaml"}, out, err), 2);
  EXPECT_EQ(err.str(), "ratekeeper simulate: /nonexistent/scenario.yaml: cannot open the file\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(run_simulate({write_temp("bad.yaml", "duration: 1s\nlimiter: 3\n")}, out2, err2), 2);
  EXPECT_NE(err2.str().find("rk_simulate_test_bad.yaml:2:10: limiter: expected a map"), std::string::npos)
      << err2.str();
  EXPECT_EQ(out2.str(), "");
}

}  // namespace
}  // namespace rk::sim
