#include "sim/scenario.h"

#include "core/registry.h"
#include "ratekeeper/store.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

namespace rk::sim {

namespace {

constexpr std::size_t kMaxFileBytes = 1 << 20;

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string secs(Nanos d) { return format_seconds(d) + "s"; }

// Reads one scenario; every problem goes to errors_ with the node's position. Never throws for bad input.
class Reader {
 public:
  Reader(std::string file, std::vector<ScenarioError>& errors) : file_(std::move(file)), errors_(errors) {}

  void scenario(const YAML::Node& root, Scenario& out);

 private:
  void fail(const YAML::Node& n, std::string message) {
    const YAML::Mark m = n.Mark();
    // A node made up by operator[] for a missing key has no position: -1.
    errors_.push_back({file_, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0, std::move(message)});
  }
  bool check_map(const YAML::Node& n, const std::string& where, std::initializer_list<std::string_view> allowed);
  std::optional<std::string> string(const YAML::Node& n, const std::string& where);
  std::optional<double> number(const YAML::Node& n, const std::string& where);
  std::optional<std::uint64_t> whole(const YAML::Node& n, const std::string& where, std::uint64_t lo, std::uint64_t hi);
  std::optional<Nanos> duration(const YAML::Node& n, const std::string& where);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& where);
  // A period from either `<rate_key>` (per second) or `<period_key>` (a duration), in nanoseconds.
  std::optional<double> period(const YAML::Node& n, const std::string& where, const char* rate_key,
                               const char* period_key, bool required);

  void limiter(const YAML::Node& n, Scenario& out);
  void compare(const YAML::Node& n, Scenario& out);
  void params(const YAML::Node& n, const std::string& where, LimitSpec& spec);
  void check_spec(const YAML::Node& n, const std::string& where, const LimitSpec& spec);
  void client(const YAML::Node& n, const std::string& where, const Scenario& s, std::vector<ScenarioClient>& out);

  std::string file_;
  std::vector<ScenarioError>& errors_;
};

bool Reader::check_map(const YAML::Node& n, const std::string& where, std::initializer_list<std::string_view> allowed) {
  if (!n.IsMap()) {
    fail(n, where + ": expected a map");
    return false;
  }
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) {
      fail(it->first, where + ": keys must be plain names");
      continue;
    }
    const std::string& k = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(it->first, where + ": unknown key '" + k + "' (expected one of: " + list + ")");
    } else if (!seen.insert(k).second) {
      fail(it->first, where + ": '" + k + "' is given twice");
    }
  }
  return true;
}

std::optional<std::string> Reader::string(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) return n.Scalar();
  fail(n, where + ": expected a string");
  return std::nullopt;
}

std::optional<double> Reader::number(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc{} && p == s.data() + s.size() && std::isfinite(v)) return v;
    fail(n, where + ": '" + s + "' is not a number");
    return std::nullopt;
  }
  fail(n, where + ": expected a number");
  return std::nullopt;
}

std::optional<std::uint64_t> Reader::whole(const YAML::Node& n, const std::string& where, std::uint64_t lo,
                                           std::uint64_t hi) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc{} && p == s.data() + s.size() && v >= lo && v <= hi) return v;
    fail(n, where + ": '" + s + "' is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return std::nullopt;
  }
  fail(n, where + ": expected a whole number");
  return std::nullopt;
}

std::optional<Nanos> Reader::duration(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    if (auto d = parse_duration(n.Scalar())) return d;
    fail(n, where + ": '" + n.Scalar() + "' is not a duration (like 10s, 250ms, 1.5m, 2h; never negative)");
    return std::nullopt;
  }
  fail(n, where + ": expected a duration");
  return std::nullopt;
}

std::optional<bool> Reader::boolean(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
  }
  fail(n, where + ": expected true or false");
  return std::nullopt;
}

std::optional<double> Reader::period(const YAML::Node& n, const std::string& where, const char* rate_key,
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
    return 1e9 / *r;
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

void Reader::params(const YAML::Node& n, const std::string& where, LimitSpec& spec) {
  if (n["half_life"]) spec.half_life = duration(n["half_life"], where + ".half_life");
  if (n["burst"]) spec.burst = number(n["burst"], where + ".burst");
  if (n["capacity"]) spec.capacity = number(n["capacity"], where + ".capacity");
  if (n["count_refused"]) spec.count_refused = boolean(n["count_refused"], where + ".count_refused");
}

void Reader::check_spec(const YAML::Node& n, const std::string& where, const LimitSpec& spec) {
  for (const auto& e : validate(spec)) {
    const YAML::Node at = n[e.param] ? n[e.param] : n;
    fail(at, where + "." + e.param + ": " + e.message);
  }
}

void Reader::limiter(const YAML::Node& n, Scenario& out) {
  if (!check_map(n, "limiter", {"algorithm", "limit", "window", "half_life", "burst", "capacity", "count_refused"})) {
    return;
  }
  const std::size_t before = errors_.size();
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
  if (errors_.size() == before) check_spec(n, "limiter", out.spec);
}

void Reader::compare(const YAML::Node& n, Scenario& out) {
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
    if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) spec.burst = std::max(0.0, std::floor(out.spec.limit) - 1);
    const auto it = std::find_if(given.begin(), given.end(), [&](const auto& g) { return g.first == a; });
    if (it != given.end()) {
      const std::string where = "compare." + std::string(algorithm_name(a));
      if (it->second.IsNull()) {
        // `gcra:` with nothing after it: the defaults.
      } else if (check_map(it->second, where, {"half_life", "burst", "capacity", "count_refused"})) {
        const std::size_t before = errors_.size();
        params(it->second, where, spec);
        if (errors_.size() == before) check_spec(it->second, where, spec);
      }
    }
    out.compare.push_back(spec);
  }
}

void Reader::client(const YAML::Node& n, const std::string& where, const Scenario& s,
                    std::vector<ScenarioClient>& out) {
  if (!n.IsMap()) {
    fail(n, where + ": expected a map (name, pattern and its parameters)");
    return;
  }
  if (!n["pattern"]) {
    fail(n, where + ": needs a pattern (periodic, poisson, burst, on_off, abuser)");
    return;
  }
  const auto kind_name = string(n["pattern"], where + ".pattern");
  if (!kind_name) return;
  ClientPattern p;
  const std::size_t before = errors_.size();
  const std::string& k = *kind_name;
  if (k == "periodic" || k == "poisson") {
    check_map(n, where, {"name", "key", "pattern", "count", "cost", "start", "stop", "rate", "period", "seed"});
    p.kind = k == "periodic" ? Pattern::kPeriodic : Pattern::kPoisson;
    p.period_ns = period(n, where, "rate", "period", true).value_or(1e9);
  } else if (k == "burst") {
    check_map(n, where, {"name", "key", "pattern", "count", "cost", "start", "stop", "size", "every", "spacing"});
    p.kind = Pattern::kBurst;
    if (!n["size"]) fail(n, where + ": needs size (requests in a burst)");
    if (n["size"]) p.size = whole(n["size"], where + ".size", 1, static_cast<std::uint64_t>(kMaxAttempts)).value_or(1);
    if (n["every"]) p.every = duration(n["every"], where + ".every").value_or(Nanos{0});
    if (n["spacing"]) p.spacing = duration(n["spacing"], where + ".spacing").value_or(Nanos{0});
    const double span = static_cast<double>(p.size - 1) * static_cast<double>(p.spacing.count());
    if (errors_.size() == before && p.every.count() > 0 && span >= static_cast<double>(p.every.count())) {
      fail(n["every"], where + ".every: bursts would overlap: " + std::to_string(p.size) + " requests " +
                           secs(p.spacing) + " apart last longer than every " + secs(p.every));
    }
  } else if (k == "on_off") {
    check_map(n, where, {"name", "key", "pattern", "count", "cost", "start", "stop", "rate", "period", "on", "off",
                         "arrivals", "seed"});
    p.kind = Pattern::kOnOff;
    p.period_ns = period(n, where, "rate", "period", true).value_or(1e9);
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
  } else if (k == "abuser") {
    check_map(n, where, {"name", "key", "pattern", "count", "cost", "start", "stop", "rate", "period", "reform_at",
                         "reformed_rate", "reformed_period"});
    p.kind = Pattern::kAbuser;
    p.period_ns = period(n, where, "rate", "period", true).value_or(1e9);
    // Reformed: exactly at the limit unless told otherwise.
    const double limit_period = static_cast<double>(s.spec.window.count()) / std::max(s.spec.limit, 1e-300);
    p.reformed_period_ns = period(n, where, "reformed_rate", "reformed_period", false).value_or(limit_period);
    if (!n["reform_at"]) fail(n, where + ": needs reform_at (when the abuser starts keeping to reformed_rate)");
    if (n["reform_at"]) p.reform_at = duration(n["reform_at"], where + ".reform_at").value_or(Nanos{0});
  } else {
    fail(n["pattern"], where + ".pattern: unknown pattern '" + k + "' (periodic, poisson, burst, on_off, abuser)");
    return;
  }

  std::string name;
  if (!n["name"]) {
    fail(n, where + ": needs a name (the limiter's key)");
  } else {
    name = string(n["name"], where + ".name").value_or("");
    if (n["name"].IsScalar() && name.empty()) fail(n["name"], where + ".name: must not be empty");
  }
  std::optional<std::string> key;
  if (n["key"]) {
    key = string(n["key"], where + ".key");
    if (key && key->empty()) fail(n["key"], where + ".key: must not be empty");
  }
  // The limiter refuses longer keys; say so here, with the place, rather than halfway through the output.
  const std::string& limiter_key = key ? *key : name;
  const YAML::Node& key_node = key ? n["key"] : n["name"];
  if (limiter_key.size() + 7 > StoreOptions{}.max_key_bytes) {  // 7: room for "-99999" of `count`
    fail(key_node, where + (key ? ".key" : ".name") + ": " + std::to_string(limiter_key.size()) +
                       " bytes is too long for a key (at most " + std::to_string(StoreOptions{}.max_key_bytes - 7) + ")");
  }
  std::uint64_t count = 1;
  if (n["count"]) count = whole(n["count"], where + ".count", 1, kMaxClients).value_or(1);
  std::uint64_t cost = 1;
  if (n["cost"]) cost = whole(n["cost"], where + ".cost", 0, 1'000'000'000).value_or(1);
  p.start = Nanos{0};
  p.stop = s.duration;
  if (n["start"]) p.start = duration(n["start"], where + ".start").value_or(Nanos{0});
  if (n["stop"]) p.stop = duration(n["stop"], where + ".stop").value_or(s.duration);
  std::optional<std::uint64_t> seed;
  if (n["seed"]) seed = whole(n["seed"], where + ".seed", 0, ~std::uint64_t{0});
  if (errors_.size() != before) return;

  if (n["start"] && p.start >= s.duration) {
    fail(n["start"], where + ".start: " + secs(p.start) + " is not before the end of the scenario (duration " +
                         secs(s.duration) + ")");
  }
  if (n["stop"] && p.stop > s.duration) {
    fail(n["stop"], where + ".stop: " + secs(p.stop) + " is after the end of the scenario (duration " +
                        secs(s.duration) + ")");
  }
  if (p.stop <= p.start) {
    fail(n["stop"] ? n["stop"] : n["start"], where + ".stop: " + secs(p.stop) + " must be after start " + secs(p.start));
  }
  if (p.kind == Pattern::kAbuser && (p.reform_at < p.start || p.reform_at > p.stop)) {
    fail(n["reform_at"], where + ".reform_at: " + secs(p.reform_at) + " must be between start " + secs(p.start) +
                             " and stop " + secs(p.stop));
  }
  if (errors_.size() != before) return;

  // `count: N`: N clients named name-0 ... name-(N-1). Random patterns get their own streams; deterministic ones are
  // spread evenly over one of their cycles, so that N periodic clients do not all fire in the same nanosecond.
  const double cycle = p.kind == Pattern::kBurst   ? static_cast<double>(p.every.count())
                       : p.kind == Pattern::kOnOff ? static_cast<double>((p.on + p.off).count())
                                                   : p.period_ns;
  for (std::uint64_t i = 0; i < count; ++i) {
    ScenarioClient c{.name = count == 1 ? name : name + "-" + std::to_string(i), .pattern = p, .cost = cost};
    c.key = key.value_or(c.name);  // `count` clients with one key: many clients behind one address
    c.pattern.seed = client_seed(seed.value_or(s.seed), seed ? i : out.size());
    const bool random = p.kind == Pattern::kPoisson || (p.kind == Pattern::kOnOff && p.poisson_arrivals);
    if (!random && count > 1) {
      const Nanos shift{std::llround(cycle * static_cast<double>(i) / static_cast<double>(count))};
      c.pattern.start = std::min(p.start + shift, p.stop);
    }
    out.push_back(std::move(c));
  }
}

void Reader::scenario(const YAML::Node& root, Scenario& out) {
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
    } else if (*d > kMaxDuration) {
      fail(root["duration"], "duration: " + secs(*d) + " is absurd: at most 100 years");
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
  const YAML::Node clients = root["clients"];
  if (!clients) {
    fail(root, "scenario: needs clients (a list)");
    return;
  }
  if (!clients.IsSequence() || clients.size() == 0) {
    fail(clients, "clients: expected a non-empty list");
    return;
  }
  std::set<std::string> names;
  double attempts = 0;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    const std::string where = "clients[" + std::to_string(i) + "]";
    const std::size_t first = out.clients.size();
    const std::size_t before = errors_.size();
    client(clients[i], where, out, out.clients);
    if (errors_.size() != before) continue;
    for (std::size_t c = first; c < out.clients.size(); ++c) {
      if (!names.insert(out.clients[c].name).second) {
        fail(clients[i]["name"], where + ".name: '" + out.clients[c].name + "' names another client too");
        break;
      }
      attempts += expected_attempts(out.clients[c].pattern);
    }
    if (out.clients.size() > kMaxClients) {
      fail(clients[i], where + ": over " + std::to_string(kMaxClients) + " clients in all");
      return;
    }
    if (attempts > kMaxAttempts) {
      fail(clients[i], where + ": the scenario would make about " + num(attempts) + " attempts by this client, over "
                           "the limit of " + num(kMaxAttempts) + " (shorten it or lower the rates)");
      return;
    }
  }
  if (out.sample_every && !out.clients.empty()) {
    const double rows = (std::floor(static_cast<double>(out.duration.count()) /
                                    static_cast<double>(out.sample_every->count())) + 1) *
                        static_cast<double>(out.clients.size());
    if (rows > kMaxSampleRows) {
      fail(root["sample_every"], "sample_every: " + secs(*out.sample_every) + " would make " + num(rows) +
                                     " sample rows, over the limit of " + num(kMaxSampleRows) + " (sample less often)");
    }
  }
}

}  // namespace

std::string ScenarioError::where() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::uint64_t client_seed(std::uint64_t scenario_seed, std::uint64_t index) {
  std::uint64_t z = scenario_seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::optional<Scenario> parse_scenario(std::string_view yaml, const std::string& file, std::vector<ScenarioError>& errors) {
  const std::size_t before = errors.size();
  if (yaml.size() > kMaxFileBytes) {
    errors.push_back({file, 0, 0, "the file is " + std::to_string(yaml.size()) + " bytes, over the limit of " +
                                      std::to_string(kMaxFileBytes)});
    return std::nullopt;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    errors.push_back({file, e.mark.line + 1, e.mark.column + 1, "not valid YAML: " + e.msg});
    return std::nullopt;
  }
  Scenario out;
  try {
    Reader(file, errors).scenario(root, out);
  } catch (const YAML::Exception& e) {
    errors.push_back({file, e.mark.line + 1, e.mark.column + 1, "unreadable: " + e.msg});
  }
  if (errors.size() != before) return std::nullopt;
  return out;
}

std::optional<Scenario> load_scenario(const std::string& path, std::vector<ScenarioError>& errors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back({path, 0, 0, "cannot open the file"});
    return std::nullopt;
  }
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    errors.push_back({path, 0, 0, "cannot read the file"});
    return std::nullopt;
  }
  return parse_scenario(text, path, errors);
}

}  // namespace rk::sim
