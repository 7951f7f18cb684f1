// rules/read_rate_limit.cc: one descriptor's `rate_limit:` (envoyproxy/ratelimit's unit, requests_per_unit,
// unlimited, name, replaces; ratekeeper's window, unit_multiplier, algorithm and its parameters, align), and the
// file's `defaults:` that a rate limit takes its algorithm and parameters from where it gives none.
#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "core/registry.h"
#include "rules/reader.h"
#include "yaml/read_params.h"

namespace rk::rules {

namespace {

// `keys` followed by the name of every algorithm parameter (core/registry.h).
std::vector<std::string_view> with_params(std::initializer_list<std::string_view> keys) {
  std::vector<std::string_view> out(keys);
  for (core::Param p : core::kAllParams) out.push_back(core::param_name(p));
  return out;
}

// A parameter as the rule gets it: from its own rate_limit, else from the file's defaults.
struct Found {
  YAML::Node node;
  std::string where;
  bool present = false;
};

// One rate_limit map being read into `out`; `where` names its place in problems.
class RateLimitReader {
 public:
  RateLimitReader(RulesReader& r, const YAML::Node& n, const std::string& where, RateLimit& out)
      : r_(r), n_(n), where_(where), out_(out) {}

  void read();

 private:
  void replaces();
  void unlimited_alone();
  std::optional<Nanos> limit_and_window();
  bool window_from_unit(std::optional<Nanos>& window);
  Found param(const std::string& key) const;
  bool applies(const std::string& key) const;
  void algorithm();
  void parameters();
  void calendar_needs_unit(const Found& found);
  void validate_spec();
  void concurrency();

  RulesReader& r_;
  const YAML::Node& n_;
  const std::string& where_;
  RateLimit& out_;
};

void RateLimitReader::read() {
  const std::size_t problems_before = r_.problem_count();
  if (n_["name"]) out_.name = r_.string(n_["name"], where_ + ".name").value_or("");
  if (n_["unlimited"]) out_.unlimited = r_.boolean(n_["unlimited"], where_ + ".unlimited").value_or(false);
  if (n_["replaces"]) replaces();
  if (out_.unlimited) {
    unlimited_alone();  // nothing else to read
    return;
  }
  if (n_["algorithm"] && n_["algorithm"].IsScalar() && n_["algorithm"].Scalar() == "concurrency") {
    concurrency();
    return;
  }

  std::optional<Nanos> window = limit_and_window();
  if (r_.problem_count() != problems_before) return;
  if (!window_from_unit(window)) return;
  algorithm();
  out_.spec.limit = out_.requests_per_unit;
  out_.spec.window = window.value_or(std::chrono::seconds(1));
  parameters();
  if (out_.requests_per_unit == 0) {
    out_.blocked = true;  // envoyproxy/ratelimit: every request over the limit
    return;
  }
  validate_spec();
}

// `replaces: [{name: ...}, ...]`: the rules this one stands in for when both match.
void RateLimitReader::replaces() {
  const YAML::Node list = n_["replaces"];
  if (!list.IsSequence() || list.size() == 0) {
    r_.fail(list, where_ + ".replaces: expected a non-empty list of {name: ...}");
    return;
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string w = where_ + ".replaces[" + std::to_string(i) + "]";
    if (!r_.check_map(list[i], w, {"name"})) continue;
    if (!list[i]["name"]) {
      r_.fail(list[i], w + ": needs a name");
      continue;
    }
    auto name = r_.string(list[i]["name"], w + ".name");
    if (name && name->empty()) r_.fail(list[i]["name"], w + ".name: must not be empty");
    if (name && !name->empty() && *name == out_.name) r_.fail(list[i]["name"], w + ": a rule cannot replace itself");
    if (name) out_.replaces.push_back(*name);
  }
}

void RateLimitReader::unlimited_alone() {
  for (std::string_view k : with_params({"unit", "requests_per_unit", "window", "unit_multiplier", "algorithm"})) {
    const std::string key(k);
    if (n_[key]) r_.fail(n_[key], where_ + ": '" + key + "' makes no sense with unlimited: true");
  }
}

// How much and over how long: requests_per_unit, and a unit (times unit_multiplier) or a window. Answers the
// window when given as one.
std::optional<Nanos> RateLimitReader::limit_and_window() {
  if (n_["unit"]) {
    if (auto s = r_.string(n_["unit"], where_ + ".unit")) {
      out_.unit = parse_unit(*s);
      if (!out_.unit) {
        r_.fail(n_["unit"],
                where_ + ".unit: '" + *s + "' is not a unit (second, minute, hour, day, week, month, year)");
      }
    }
  }
  std::optional<Nanos> window;
  if (n_["window"]) {
    window = r_.duration(n_["window"], where_ + ".window");
    if (n_["unit"]) r_.fail(n_["window"], where_ + ": give either unit or window, not both");
  }
  if (n_["unit_multiplier"]) {
    if (auto m = r_.uint32(n_["unit_multiplier"], where_ + ".unit_multiplier")) {
      if (*m == 0) r_.fail(n_["unit_multiplier"], where_ + ".unit_multiplier: must be at least 1");
      out_.unit_multiplier = std::max<std::uint32_t>(*m, 1);
    }
    if (!n_["unit"]) r_.fail(n_["unit_multiplier"], where_ + ".unit_multiplier: needs a unit");
  }
  if (!n_["unit"] && !n_["window"]) r_.fail(n_, where_ + ": needs a unit (or a window)");
  if (!n_["requests_per_unit"]) {
    r_.fail(n_, where_ + ": needs requests_per_unit");
  } else {
    out_.requests_per_unit = r_.uint32(n_["requests_per_unit"], where_ + ".requests_per_unit").value_or(0);
  }
  return window;
}

// A unit times its multiplier as the window; false (and a problem) if that does not fit in Nanos.
bool RateLimitReader::window_from_unit(std::optional<Nanos>& window) {
  if (!out_.unit) return true;
  // A year times 4294967295 does not fit in 64 bits of nanoseconds (validation takes at most 100 years).
  const std::int64_t unit_ns = unit_length(*out_.unit).count();
  if (unit_ns > Nanos::max().count() / out_.unit_multiplier) {
    r_.fail(n_["unit_multiplier"], where_ + ".unit_multiplier: " + std::to_string(out_.unit_multiplier) + " times a " +
                                       std::string(unit_name(*out_.unit)) +
                                       " is too long a window (at most 100 years)");
    return false;
  }
  window = Nanos{unit_ns * out_.unit_multiplier};
  return true;
}

Found RateLimitReader::param(const std::string& key) const {
  if (n_[key]) return {n_[key], where_ + "." + key, true};
  if (r_.defaults) {
    const YAML::Node& d = *r_.defaults;
    if (d[key]) return {d[key], "defaults." + key, true};
  }
  return {};
}

// On the rule itself any parameter is read (and validation names one the algorithm does not take); from
// `defaults:` only those the rule's algorithm has, so one file's defaults can serve rules of several algorithms.
bool RateLimitReader::applies(const std::string& key) const {
  if (n_[key]) return true;
  if (!param(key).present) return false;
  const auto p = core::parse_param(key);
  return !p || core::takes(out_.spec.algorithm, *p);
}

// `algorithm: concurrency`: at most max_in_flight leases at once, each for at most lease_ttl (default 60s). It
// counts no requests over a window, so the keys of one do not apply.
void RateLimitReader::concurrency() {
  for (std::string_view k : with_params({"unit", "requests_per_unit", "window", "unit_multiplier"})) {
    const std::string key(k);
    if (n_[key]) r_.fail(n_[key], where_ + ": '" + key + "' makes no sense with algorithm: concurrency");
  }
  ConcurrencySpec spec;
  if (!n_["max_in_flight"]) {
    r_.fail(n_, where_ + ": algorithm: concurrency needs max_in_flight");
  } else {
    spec.max_in_flight = r_.uint32(n_["max_in_flight"], where_ + ".max_in_flight").value_or(0);
  }
  if (n_["lease_ttl"]) spec.lease_ttl = r_.duration(n_["lease_ttl"], where_ + ".lease_ttl").value_or(spec.lease_ttl);
  for (const ParamError& e : validate(spec)) {
    const std::string key = e.param;
    if (!n_[key]) continue;  // max_in_flight missing: said above
    r_.fail(n_[key], where_ + "." + e.param + ": " + e.message);
  }
  out_.concurrency = spec;
}

void RateLimitReader::algorithm() {
  out_.spec.algorithm = Algorithm::kFixedWindow;
  const auto [node, w, present] = param("algorithm");
  if (!present) return;
  if (auto s = r_.string(node, w)) {
    if (auto alg = parse_algorithm(*s)) {
      out_.spec.algorithm = *alg;
    } else if (*s == "concurrency") {
      r_.fail(node, w + ": concurrency is given on each rate_limit, not in defaults");
    } else {
      r_.fail(node, w + ": unknown algorithm '" + *s + "' (" + core::algorithm_names() + ", concurrency)");
    }
  }
}

// Each parameter from the rule or the file's defaults; count_refused, given in neither, as envoyproxy/ratelimit
// counts (core::Info::rules_count_refused), which may differ from the library's default.
void RateLimitReader::parameters() {
  LimitSpec& spec = out_.spec;
  for (core::Param p : core::kAllParams) {
    const std::string key(core::param_name(p));
    if (applies(key)) {
      const Found f = param(key);
      yaml::read_param(r_, f.node, f.where, p, spec);
      if (p == core::Param::kAlign) calendar_needs_unit(f);
    } else if (p == core::Param::kCountRefused && core::takes(spec.algorithm, p)) {
      spec.count_refused = core::info(spec.algorithm).rules_count_refused;
    }
  }
}

// `align: calendar` (weeks from Monday, months from the 1st, UTC) needs a calendar unit, not a multiple of one.
void RateLimitReader::calendar_needs_unit(const Found& found) {
  out_.calendar = out_.spec.align == Align::kCalendar;
  if (out_.calendar && (!out_.unit || out_.unit_multiplier != 1)) {
    r_.fail(found.node, found.where +
                            ": calendar alignment needs a unit (second, minute, hour, day, week, month, "
                            "year) without a multiplier");
    out_.calendar = false;
  }
  out_.spec.align = out_.calendar ? Align::kCalendar : Align::kEpoch;
}

void RateLimitReader::validate_spec() {
  for (const ParamError& e : validate(out_.spec)) {
    // Point at the parameter itself where the rule states it.
    const std::string key = e.param == "limit"                  ? "requests_per_unit"
                            : e.param == "window" && n_["unit"] ? "unit"
                                                                : e.param;
    r_.fail(n_[key] ? n_[key] : n_, where_ + ": " + e.param + ": " + e.message);
  }
}

}  // namespace

void read_defaults(RulesReader& r, const YAML::Node& n) {
  if (r.check_map(n, "defaults", with_params({"algorithm"}))) r.defaults = n;
}

void read_rate_limit(RulesReader& r, const YAML::Node& n, const std::string& where, RateLimit& out) {
  out.pos = r.pos(n);
  if (!r.check_map(n, where,
                   with_params({"unit", "requests_per_unit", "unlimited", "name", "replaces", "window",
                                "unit_multiplier", "algorithm", "max_in_flight", "lease_ttl"}))) {
    return;
  }
  RateLimitReader(r, n, where, out).read();
}

}  // namespace rk::rules
