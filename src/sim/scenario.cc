// sim/scenario.cc: a scenario file (docs/simulate.md) read and checked whole through the shared YAML reader
// (yaml/reader.h): the limiter, the algorithms to compare, and the clients with their traffic patterns.
#include "sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "base/number_text.h"
#include "core/registry.h"
#include "yaml/read_params.h"
#include "yaml/reader.h"

namespace rk::sim {

namespace {

std::string num(double v) { return base::digits_number(v, 10); }

std::string secs(Nanos d) { return format_seconds(d) + "s"; }

struct ClientFields;

// What the entries read so far come to once expanded, weighed against ScenarioLimits before the next is expanded.
struct Totals {
  std::size_t clients = 0;
  double name_bytes = 0;
  double attempts = 0;
};

// Reads one scenario; every problem goes to the problem list with the node's position. Never throws for bad input.
class ScenarioReader : public yaml::Reader {
 public:
  ScenarioReader(const std::string& file, std::vector<ScenarioError>& errors, const ScenarioLimits& limits)
      : yaml::Reader(file, errors), limits_(limits) {}

  void scenario(const YAML::Node& root, Scenario& out);

 private:
  // A period from either `<rate_key>` (per second) or `<period_key>` (a duration), in nanoseconds.
  std::optional<double> period(const YAML::Node& n, const std::string& where, const char* rate_key,
                               const char* period_key, bool required);

  void limiter(const YAML::Node& n, Scenario& out);
  void compare(const YAML::Node& n, Scenario& out);
  void params(const YAML::Node& n, const std::string& where, LimitSpec& spec);
  void check_spec(const YAML::Node& n, const std::string& where, const LimitSpec& spec);
  std::optional<ClientFields> client(const YAML::Node& n, const std::string& where, const Scenario& s);
  bool pattern(const YAML::Node& n, const std::string& where, const Scenario& s, ClientPattern& p);
  void burst(const YAML::Node& n, const std::string& where, ClientPattern& p);
  void on_off(const YAML::Node& n, const std::string& where, ClientPattern& p);
  void abuser(const YAML::Node& n, const std::string& where, const Scenario& s, ClientPattern& p);
  void name_and_key(const YAML::Node& n, const std::string& where, ClientFields& c);
  void amounts(const YAML::Node& n, const std::string& where, const Scenario& s, ClientFields& c);
  void check_times(const YAML::Node& n, const std::string& where, const Scenario& s, const ClientPattern& p);
  bool weigh(const YAML::Node& n, const std::string& where, const ClientFields& c, Totals& totals);
  bool clients(const YAML::Node& list, Scenario& out);
  void check_sample_rows(const YAML::Node& sample_every, const Scenario& s);

  const ScenarioLimits& limits_;
};

std::optional<double> ScenarioReader::period(const YAML::Node& n, const std::string& where, const char* rate_key,
                                             const char* period_key, bool required) {
  if (n[rate_key] && n[period_key]) {
    fail(n[period_key], where + ": give either " + rate_key + " or " + period_key + ", not both");
    return std::nullopt;
  }
  if (n[rate_key]) {
    const auto r = number(n[rate_key], where + "." + rate_key);
    if (!r) return std::nullopt;
    if (!(*r > 0)) {
      fail(n[rate_key], where + "." + rate_key + ": must be above 0 requests a second (got " + num(*r) + ")");
      return std::nullopt;
    }
    if (*r > kMaxRate) {
      fail(n[rate_key], where + "." + rate_key + ": " + num(*r) + " a second is absurd: at most " + num(kMaxRate) +
                            " (one a nanosecond)");
      return std::nullopt;
    }
    return static_cast<double>(kNanosPerSecond) / *r;
  }
  if (n[period_key]) {
    const auto d = duration(n[period_key], where + "." + period_key);
    if (!d) return std::nullopt;
    if (d->count() == 0) {
      fail(n[period_key], where + "." + period_key + ": must be longer than 0");
      return std::nullopt;
    }
    return static_cast<double>(d->count());
  }
  if (required) fail(n, where + ": needs " + rate_key + " (requests a second) or " + period_key + " (a duration)");
  return std::nullopt;
}

// The algorithm's parameters, all but align, which a scenario does not take (limiter() and compare() list its keys).
void ScenarioReader::params(const YAML::Node& n, const std::string& where, LimitSpec& spec) {
  for (core::Param p : core::kAllParams) {
    const std::string key(core::param_name(p));
    if (p != core::Param::kAlign && n[key]) yaml::read_param(*this, n[key], where + "." + key, p, spec);
  }
}

void ScenarioReader::check_spec(const YAML::Node& n, const std::string& where, const LimitSpec& spec) {
  for (const auto& e : validate(spec)) {
    const YAML::Node at = n[e.param] ? n[e.param] : n;
    fail(at, where + "." + e.param + ": " + e.message);
  }
}

void ScenarioReader::limiter(const YAML::Node& n, Scenario& out) {
  if (!check_map(n, "limiter", {"algorithm", "limit", "window", "half_life", "burst", "capacity", "count_refused"})) {
    return;
  }
  const std::size_t before = problem_count();
  if (!n["algorithm"]) {
    fail(n, "limiter: needs an algorithm (" + core::algorithm_names() + ")");
  } else if (auto s = string(n["algorithm"], "limiter.algorithm")) {
    if (auto a = parse_algorithm(*s)) {
      out.spec.algorithm = *a;
    } else {
      fail(n["algorithm"], "limiter.algorithm: unknown algorithm '" + *s + "' (" + core::algorithm_names() + ")");
    }
  }
  if (!n["limit"]) {
    fail(n, "limiter: needs a limit (requests per window)");
  } else if (auto l = number(n["limit"], "limiter.limit")) {
    out.spec.limit = *l;
  }
  if (n["window"]) {
    if (auto w = duration(n["window"], "limiter.window")) out.spec.window = *w;
  }
  params(n, "limiter", out.spec);
  if (problem_count() == before) check_spec(n, "limiter", out.spec);
}

void ScenarioReader::compare(const YAML::Node& n, Scenario& out) {
  std::vector<std::pair<Algorithm, YAML::Node>> given;
  if (n) {
    if (!n.IsMap()) {
      fail(n, "compare: expected a map from algorithm names to their parameters");
      return;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
      const auto a = parse_algorithm(name);
      if (!a) {
        fail(it->first, "compare: unknown algorithm '" + name + "'");
        continue;
      }
      given.emplace_back(*a, it->second);
    }
  }
  // Each algorithm with the scenario's limit and window; defaults that let it admit a window's worth at once, as
  // the exact sliding window does (burst = limit - 1), and for earrrl a half-life of one window.
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec spec{.algorithm = a, .limit = out.spec.limit, .window = out.spec.window};
    if (a == Algorithm::kEarrrl) spec.half_life = out.spec.half_life.value_or(out.spec.window);
    if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue)
      spec.burst = std::max(0.0, std::floor(out.spec.limit) - 1);
    const auto it = std::find_if(given.begin(), given.end(), [&](const auto& g) { return g.first == a; });
    if (it != given.end()) {
      const std::string where = "compare." + std::string(algorithm_name(a));
      if (it->second.IsNull()) {
        // `gcra:` with nothing after it: the defaults.
      } else if (check_map(it->second, where, {"half_life", "burst", "capacity", "count_refused"})) {
        const std::size_t before = problem_count();
        params(it->second, where, spec);
        if (problem_count() == before) check_spec(it->second, where, spec);
      }
    }
    out.compare.push_back(spec);
  }
}

// One client entry as written, before `count` expands it.
struct ClientFields {
  ClientPattern pattern;
  std::string name;
  std::optional<std::string> key;
  std::uint64_t count = 1;
  std::uint64_t cost = 1;
  std::optional<std::uint64_t> seed;
};

// The traffic pattern and the fields of its kind; false when there is no pattern to go on with.
bool ScenarioReader::pattern(const YAML::Node& n, const std::string& where, const Scenario& s, ClientPattern& p) {
  if (!n["pattern"]) {
    fail(n, where + ": needs a pattern (periodic, poisson, burst, on_off, abuser)");
    return false;
  }
  const auto kind = string(n["pattern"], where + ".pattern");
  if (!kind) return false;
  if (*kind == "periodic" || *kind == "poisson") {
    check_map(n, where, {"name", "key", "pattern", "count", "cost", "start", "stop", "rate", "period", "seed"});
    p.kind = *kind == "periodic" ? Pattern::kPeriodic : Pattern::kPoisson;
    p.period_ns = period(n, where, "rate", "period", true).value_or(kNanosPerSecond);
  } else if (*kind == "burst") {
    burst(n, where, p);
  } else if (*kind == "on_off") {
    on_off(n, where, p);
  } else if (*kind == "abuser") {
    abuser(n, where, s, p);
  } else {
    fail(n["pattern"], where + ".pattern: unknown pattern '" + *kind + "' (periodic, poisson, burst, on_off, abuser)");
    return false;
  }
  return true;
}

void ScenarioReader::burst(const YAML::Node& n, const std::string& where, ClientPattern& p) {
  const std::size_t before = problem_count();
  check_map(n, where, {"name", "key", "pattern", "count", "cost", "start", "stop", "size", "every", "spacing"});
  p.kind = Pattern::kBurst;
  if (!n["size"]) fail(n, where + ": needs size (requests in a burst)");
  const auto max_size = static_cast<std::uint64_t>(limits_.max_attempts);
  if (n["size"]) p.size = whole(n["size"], where + ".size", 1, std::max<std::uint64_t>(max_size, 1)).value_or(1);
  if (n["every"]) p.every = duration(n["every"], where + ".every").value_or(Nanos{0});
  if (n["spacing"]) p.spacing = duration(n["spacing"], where + ".spacing").value_or(Nanos{0});
  const double span = static_cast<double>(p.size - 1) * static_cast<double>(p.spacing.count());
  if (problem_count() == before && p.every.count() > 0 && span >= static_cast<double>(p.every.count())) {
    fail(n["every"], where + ".every: bursts would overlap: " + std::to_string(p.size) + " requests " +
                         secs(p.spacing) + " apart last longer than every " + secs(p.every));
  }
}

void ScenarioReader::on_off(const YAML::Node& n, const std::string& where, ClientPattern& p) {
  check_map(
      n, where,
      {"name", "key", "pattern", "count", "cost", "start", "stop", "rate", "period", "on", "off", "arrivals", "seed"});
  p.kind = Pattern::kOnOff;
  p.period_ns = period(n, where, "rate", "period", true).value_or(kNanosPerSecond);
  if (!n["on"] || !n["off"]) fail(n, where + ": needs on and off (durations)");
  if (n["on"]) p.on = duration(n["on"], where + ".on").value_or(Nanos{0});
  if (n["off"]) p.off = duration(n["off"], where + ".off").value_or(Nanos{0});
  if (n["on"] && p.on.count() == 0) fail(n["on"], where + ".on: must be longer than 0");
  if (n["arrivals"]) {
    const auto a = string(n["arrivals"], where + ".arrivals");
    if (a && *a != "periodic" && *a != "poisson") {
      fail(n["arrivals"], where + ".arrivals: '" + *a + "' is not periodic or poisson");
    }
    p.poisson_arrivals = a && *a == "poisson";
  }
}

void ScenarioReader::abuser(const YAML::Node& n, const std::string& where, const Scenario& s, ClientPattern& p) {
  check_map(n, where,
            {"name", "key", "pattern", "count", "cost", "start", "stop", "rate", "period", "reform_at", "reformed_rate",
             "reformed_period"});
  p.kind = Pattern::kAbuser;
  p.period_ns = period(n, where, "rate", "period", true).value_or(kNanosPerSecond);
  // Reformed: exactly at the limit unless told otherwise.
  const double limit_period = static_cast<double>(s.spec.window.count()) / std::max(s.spec.limit, 1e-300);
  p.reformed_period_ns = period(n, where, "reformed_rate", "reformed_period", false).value_or(limit_period);
  if (!n["reform_at"]) fail(n, where + ": needs reform_at (when the abuser starts keeping to reformed_rate)");
  if (n["reform_at"]) p.reform_at = duration(n["reform_at"], where + ".reform_at").value_or(Nanos{0});
}

// The client's name and the limiter's key (the name unless given), each checked against the bound on names (the
// store's key size, for the command).
void ScenarioReader::name_and_key(const YAML::Node& n, const std::string& where, ClientFields& c) {
  if (!n["name"]) {
    fail(n, where + ": needs a name (the limiter's key)");
  } else {
    c.name = string(n["name"], where + ".name").value_or("");
    if (n["name"].IsScalar() && c.name.empty()) fail(n["name"], where + ".name: must not be empty");
  }
  if (n["key"]) {
    c.key = string(n["key"], where + ".key");
    if (c.key && c.key->empty()) fail(n["key"], where + ".key: must not be empty");
  }
  // The limiter refuses longer keys; say so here, with the place, rather than halfway through the output.
  const auto check = [&](const std::string& value, const char* field, const char* what) {
    if (value.size() <= limits_.max_name_bytes) return;
    fail(n[field], where + "." + field + ": " + std::to_string(value.size()) + " bytes is too long for a " + what +
                       " (at most " + std::to_string(limits_.max_name_bytes) + ")");
  };
  check(c.name, "name", c.key ? "name" : "key");
  if (c.key) check(*c.key, "key", "key");
}

// count, cost, seed, and start and stop (the whole scenario unless given).
void ScenarioReader::amounts(const YAML::Node& n, const std::string& where, const Scenario& s, ClientFields& c) {
  const std::uint64_t max_count = std::max<std::size_t>(limits_.max_clients, 1);
  if (n["count"]) c.count = whole(n["count"], where + ".count", 1, max_count).value_or(1);
  if (n["cost"]) c.cost = whole(n["cost"], where + ".cost", 0, 1'000'000'000).value_or(1);
  ClientPattern& p = c.pattern;
  p.start = Nanos{0};
  p.stop = s.duration;
  if (n["start"]) p.start = duration(n["start"], where + ".start").value_or(Nanos{0});
  if (n["stop"]) p.stop = duration(n["stop"], where + ".stop").value_or(s.duration);
  if (n["seed"]) c.seed = whole(n["seed"], where + ".seed", 0, ~std::uint64_t{0});
}

// The client's times against each other and against the scenario's duration.
void ScenarioReader::check_times(const YAML::Node& n, const std::string& where, const Scenario& s,
                                 const ClientPattern& p) {
  if (n["start"] && p.start >= s.duration) {
    fail(n["start"], where + ".start: " + secs(p.start) + " is not before the end of the scenario (duration " +
                         secs(s.duration) + ")");
  }
  if (n["stop"] && p.stop > s.duration) {
    fail(n["stop"],
         where + ".stop: " + secs(p.stop) + " is after the end of the scenario (duration " + secs(s.duration) + ")");
  }
  if (p.stop <= p.start) {
    fail(n["stop"] ? n["stop"] : n["start"],
         where + ".stop: " + secs(p.stop) + " must be after start " + secs(p.start));
  }
  if (p.kind == Pattern::kAbuser && (p.reform_at < p.start || p.reform_at > p.stop)) {
    fail(n["reform_at"], where + ".reform_at: " + secs(p.reform_at) + " must be between start " + secs(p.start) +
                             " and stop " + secs(p.stop));
  }
}

// `count: N`: N clients named name-0 ... name-(N-1). Random patterns get their own streams; deterministic ones are
// spread evenly over one of their cycles, so that N periodic clients do not all fire in the same nanosecond.
void expand(const ClientFields& c, const Scenario& s, std::vector<ScenarioClient>& out) {
  const ClientPattern& p = c.pattern;
  const double cycle = p.kind == Pattern::kBurst   ? static_cast<double>(p.every.count())
                       : p.kind == Pattern::kOnOff ? static_cast<double>((p.on + p.off).count())
                                                   : p.period_ns;
  for (std::uint64_t i = 0; i < c.count; ++i) {
    ScenarioClient one{.name = c.count == 1 ? c.name : c.name + "-" + std::to_string(i), .pattern = p, .cost = c.cost};
    one.key = c.key.value_or(one.name);  // `count` clients with one key: many clients behind one address
    one.pattern.seed = client_seed(c.seed.value_or(s.seed), c.seed ? i : out.size());
    const bool random = p.kind == Pattern::kPoisson || (p.kind == Pattern::kOnOff && p.poisson_arrivals);
    if (!random && c.count > 1) {
      const Nanos shift{std::llround(cycle * static_cast<double>(i) / static_cast<double>(c.count))};
      one.pattern.start = std::min(p.start + shift, p.stop);
    }
    out.push_back(std::move(one));
  }
}

// One entry of the list, read and checked; nullopt when it has a problem.
std::optional<ClientFields> ScenarioReader::client(const YAML::Node& n, const std::string& where, const Scenario& s) {
  if (!n.IsMap()) {
    fail(n, where + ": expected a map (name, pattern and its parameters)");
    return std::nullopt;
  }
  const std::size_t before = problem_count();
  ClientFields c;
  if (!pattern(n, where, s, c.pattern)) return std::nullopt;
  name_and_key(n, where, c);
  amounts(n, where, s, c);
  if (problem_count() != before) return std::nullopt;
  check_times(n, where, s, c.pattern);
  if (problem_count() != before) return std::nullopt;
  return c;
}

void ScenarioReader::scenario(const YAML::Node& root, Scenario& out) {
  if (!root.IsMap()) {
    fail(root, "a scenario is a map with duration, limiter and clients");
    return;
  }
  check_map(root, "scenario", {"description", "duration", "sample_every", "seed", "limiter", "compare", "clients"});
  if (!root["duration"]) {
    fail(root, "scenario: needs a duration");
  } else if (auto d = duration(root["duration"], "duration")) {
    if (d->count() == 0) {
      fail(root["duration"], "duration: must be longer than 0");
    } else if (*d > limits_.max_duration) {
      fail(root["duration"], "duration: " + secs(*d) + " is over the limit of " + secs(limits_.max_duration));
    } else {
      out.duration = *d;
    }
  }
  if (root["seed"]) out.seed = whole(root["seed"], "seed", 0, ~std::uint64_t{0}).value_or(1);
  if (root["description"]) string(root["description"], "description");
  if (!root["limiter"]) {
    fail(root, "scenario: needs a limiter (algorithm, limit and its parameters)");
  } else {
    limiter(root["limiter"], out);
  }
  compare(root["compare"], out);
  if (out.duration.count() == 0) return;  // the clients' times cannot be checked

  if (root["sample_every"]) {
    if (auto d = duration(root["sample_every"], "sample_every")) {
      if (d->count() == 0) {
        fail(root["sample_every"], "sample_every: must be longer than 0");
      } else {
        out.sample_every = *d;
      }
    }
  }
  if (!root["clients"]) {
    fail(root, "scenario: needs clients (a list)");
    return;
  }
  if (clients(root["clients"], out)) check_sample_rows(root["sample_every"], out);
}

// Every client sampled every sample_every, for the whole duration: bounded like the attempts.
void ScenarioReader::check_sample_rows(const YAML::Node& sample_every, const Scenario& s) {
  if (!s.sample_every || s.clients.empty()) return;
  const double rows =
      (std::floor(static_cast<double>(s.duration.count()) / static_cast<double>(s.sample_every->count())) + 1) *
      static_cast<double>(s.clients.size());
  if (rows > limits_.max_sample_rows) {
    fail(sample_every, "sample_every: " + secs(*s.sample_every) + " would make " + num(rows) +
                           " sample rows, over the limit of " + num(limits_.max_sample_rows) + " (sample less often)");
  }
}

// What an entry's `count` clients add to the totals, weighed from its fields before any of them is made: clients,
// bytes of names and keys, expected attempts. False when a bound is passed (the scenario is not looked at further).
bool ScenarioReader::weigh(const YAML::Node& n, const std::string& where, const ClientFields& c, Totals& totals) {
  const YAML::Node at = n["count"] ? n["count"] : n;
  const std::string field = where + (n["count"] ? ".count" : "");
  totals.clients += c.count;
  if (totals.clients > limits_.max_clients) {
    const std::string more = c.count == 1 ? "one more client makes " : std::to_string(c.count) + " more clients make ";
    fail(at, field + ": " + more + std::to_string(totals.clients) + " in all, over the limit of " +
                 std::to_string(limits_.max_clients));
    return false;
  }
  // Each expanded name is the entry's with "-i" appended (none for a single client); the key is the name unless
  // given. Counted at the longest suffix.
  const double suffix = c.count == 1 ? 0.0 : 1.0 + static_cast<double>(std::to_string(c.count - 1).size());
  const double name = static_cast<double>(c.name.size()) + suffix;
  const double key = c.key ? static_cast<double>(c.key->size()) : name;
  totals.name_bytes += static_cast<double>(c.count) * (name + key);
  if (totals.name_bytes > static_cast<double>(limits_.max_names_bytes)) {
    fail(at, field + ": " + std::to_string(c.count) + (c.count == 1 ? " client" : " clients") +
                 " named so would make " + num(totals.name_bytes) + " bytes of names and keys in all, over the limit " +
                 "of " + std::to_string(limits_.max_names_bytes) + " (shorter names, or fewer clients)");
    return false;
  }
  // `count` spreads deterministic clients over a cycle by starting them later, which never adds an attempt.
  totals.attempts += static_cast<double>(c.count) * expected_attempts(c.pattern);
  if (totals.attempts > limits_.max_attempts) {
    fail(n, where + ": the scenario would make about " + num(totals.attempts) + " attempts by this client, over " +
                "the limit of " + num(limits_.max_attempts) + " (shorten it or lower the rates)");
    return false;
  }
  return true;
}

// Every client, weighed against the bounds and then expanded, with unique names. False when a bound is passed (the
// scenario is not looked at further).
bool ScenarioReader::clients(const YAML::Node& list, Scenario& out) {
  if (!list.IsSequence() || list.size() == 0) {
    fail(list, "clients: expected a non-empty list");
    return false;
  }
  std::set<std::string> names;
  Totals totals;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "clients[" + std::to_string(i) + "]";
    const std::optional<ClientFields> c = client(list[i], where, out);
    if (!c) continue;
    if (!weigh(list[i], where, *c, totals)) return false;
    const std::size_t first = out.clients.size();
    expand(*c, out, out.clients);
    for (std::size_t k = first; k < out.clients.size(); ++k) {
      if (!names.insert(out.clients[k].name).second) {
        fail(list[i]["name"], where + ".name: '" + out.clients[k].name + "' names another client too");
        break;
      }
    }
  }
  return true;
}

}  // namespace

std::uint64_t client_seed(std::uint64_t scenario_seed, std::uint64_t index) {
  std::uint64_t z = scenario_seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::optional<Scenario> parse_scenario(std::string_view yaml, const std::string& file,
                                       std::vector<ScenarioError>& errors, const ScenarioLimits& limits) {
  const std::size_t before = errors.size();
  if (yaml.size() > limits.max_text_bytes) {
    errors.push_back({{file, 0, 0},
                      "the file is " + std::to_string(yaml.size()) + " bytes, over the limit of " +
                          std::to_string(limits.max_text_bytes)});
    return std::nullopt;
  }
  Scenario out;
  yaml::read_document(yaml, file, errors,
                      [&](const YAML::Node& root) { ScenarioReader(file, errors, limits).scenario(root, out); });
  if (errors.size() != before) return std::nullopt;
  return out;
}

std::optional<Scenario> load_scenario(const std::string& path, std::vector<ScenarioError>& errors,
                                      const ScenarioLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back({{path, 0, 0}, "cannot open the file"});
    return std::nullopt;
  }
  std::string text(limits.max_text_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    errors.push_back({{path, 0, 0}, "cannot read the file"});
    return std::nullopt;
  }
  return parse_scenario(text, path, errors, limits);
}

}  // namespace rk::sim
