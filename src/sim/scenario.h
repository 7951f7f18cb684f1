// sim/scenario.h: a `ratekeeper simulate` scenario, read from YAML (format: docs/simulate.md).
//
//   std::vector<rk::sim::ScenarioError> errors;
//   auto s = rk::sim::load_scenario("examples/scenarios/convergence.yaml", errors);
//   if (!s) for (const auto& e : errors) std::cerr << e.to_string() << "\n";
//
// A scenario is checked whole before anything runs: every problem is reported with its file, line and column, and
// the sizes are bounded (ScenarioLimits: clients, names, attempts, sample rows) so that a typo, or a request to the
// dashboard's what-if, cannot ask for a day of CPU or all memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/source_position.h"
#include "sim/traffic.h"
#include "ratekeeper/params.h"
#include "ratekeeper/store.h"

namespace rk::sim {

struct ScenarioClient {
  std::string name;  // how the CSV names it
  std::string key;   // the limiter's key: the name unless given (clients sharing a key share a limit)
  ClientPattern pattern;
  std::uint64_t cost = 1;
};

struct Scenario {
  Nanos duration{0};
  std::optional<Nanos> sample_every;  // sample rows of every client's state (peek), at 0, step, 2 step, ...
  std::uint64_t seed = 1;
  LimitSpec spec;
  // The algorithms `--compare` runs, each with the scenario's limit and window and its own parameters.
  std::vector<LimitSpec> compare;
  std::vector<ScenarioClient> clients;  // `count: N` entries already expanded
};

// A problem and its place (base/source_position.h: one type for every file ratekeeper reads); line 0 when the
// problem is the file as a whole. to_string(): "file:line:column: message".
using ScenarioError = base::SourceError;

inline constexpr double kMaxAttempts = 1e7;          // `ratekeeper simulate`'s bound, and the engine's at run time
inline constexpr double kMaxRate = kNanosPerSecond;  // attempts per second per client: one a nanosecond

// Bounds on what one scenario may ask for. Each is weighed from the scenario's own numbers before anything is made
// of them: an entry's `count` clients, their names and their attempts before any of them is expanded, the sample
// rows before anything runs. The defaults are `ratekeeper simulate`'s; the dashboard's what-if passes tighter ones.
struct ScenarioLimits {
  std::size_t max_text_bytes = 1 << 20;  // the file itself
  Nanos max_duration = kMaxDuration;
  std::size_t max_clients = 100'000;  // after `count`
  // A client's name or key, before `count` adds "-N": the store refuses longer keys, and `count` appends up to 7.
  std::size_t max_name_bytes = StoreOptions{}.max_key_bytes - 7;
  std::size_t max_names_bytes = 16 << 20;  // every client's name and key after `count`, in all
  double max_attempts = kMaxAttempts;      // expected (the mean, for Poisson traffic), over all clients
  double max_sample_rows = 1e7;            // (duration / sample_every + 1) x clients
};

std::optional<Scenario> parse_scenario(std::string_view yaml, const std::string& file,
                                       std::vector<ScenarioError>& errors, const ScenarioLimits& limits = {});
std::optional<Scenario> load_scenario(const std::string& path, std::vector<ScenarioError>& errors,
                                      const ScenarioLimits& limits = {});

// The seed of a client's random stream, from the scenario's seed and the client's index (splitmix64).
std::uint64_t client_seed(std::uint64_t scenario_seed, std::uint64_t index);

}  // namespace rk::sim
