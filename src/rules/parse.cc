#include "rules/parse.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>

#include "core/registry.h"

namespace rk::rules {

namespace {

class Parser {
 public:
  Parser(std::string file, std::vector<ConfigError>& errors) : file_(std::move(file)), errors_(errors) {}

  void domain(const YAML::Node& root, DomainConfig& out);

 private:
  SourcePos pos(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    return {file_, m.line + 1, m.column + 1};
  }
  void fail(const YAML::Node& n, std::string message) { errors_.push_back({pos(n), std::move(message)}); }

  // Checks `n` is a map whose keys are all in `allowed` and appear once. Returns false if it is not a map.
  bool check_map(const YAML::Node& n, const std::string& where, std::initializer_list<std::string_view> allowed) {
    return check_map(n, where, std::vector<std::string_view>(allowed));
  }
  bool check_map(const YAML::Node& n, const std::string& where, const std::vector<std::string_view>& allowed);
  std::optional<std::string> string(const YAML::Node& n, const std::string& where);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& where);
  std::optional<std::uint32_t> uint32(const YAML::Node& n, const std::string& where);
  std::optional<double> number(const YAML::Node& n, const std::string& where);
  std::optional<Nanos> duration(const YAML::Node& n, const std::string& where);

  void descriptors(const YAML::Node& list, const std::string& where, int depth, std::vector<Descriptor>& out);
  void descriptor(const YAML::Node& n, const std::string& where, int depth, Descriptor& out);
  void rate_limit(const YAML::Node& n, const std::string& where, RateLimit& out);
  void defaults(const YAML::Node& n);
  void forward_auth(const YAML::Node& n, ForwardAuth& out);

  std::string file_;
  std::vector<ConfigError>& errors_;
  std::optional<YAML::Node> defaults_;  // the file's `defaults:` map, if any
  std::size_t count_ = 0;
};

// `keys` followed by the name of every algorithm parameter (core/registry.h).
std::vector<std::string_view> with_params(std::initializer_list<std::string_view> keys) {
  std::vector<std::string_view> out(keys);
  for (core::Param p : core::kAllParams) out.push_back(core::param_name(p));
  return out;
}

bool Parser::check_map(const YAML::Node& n, const std::string& where, const std::vector<std::string_view>& allowed) {
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
    const std::string k = it->first.Scalar();
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

std::optional<std::string> Parser::string(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) {
    fail(n, where + ": expected a string");
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<bool> Parser::boolean(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  fail(n, where + ": expected true or false");
  return std::nullopt;
}

std::optional<std::uint32_t> Parser::uint32(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc{} && p == s.data() + s.size() && v <= 0xFFFFFFFFull) return static_cast<std::uint32_t>(v);
    fail(n, where + ": '" + s + "' is not a whole number from 0 to 4294967295");
    return std::nullopt;
  }
  fail(n, where + ": expected a whole number");
  return std::nullopt;
}

std::optional<double> Parser::number(const YAML::Node& n, const std::string& where) {
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

std::optional<Nanos> Parser::duration(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    if (auto d = parse_duration(n.Scalar())) return d;
    fail(n, where + ": '" + n.Scalar() + "' is not a duration (like 10s, 250ms, 1.5m, 2h, 1d)");
    return std::nullopt;
  }
  fail(n, where + ": expected a duration");
  return std::nullopt;
}

// Whether a parameter from `defaults:` applies to a rule of algorithm `a` (on the rule itself every parameter is
// taken, and validation names the ones that do not apply).
bool default_applies(Algorithm a, std::string_view key) {
  const auto p = core::parse_param(key);
  return !p || core::takes(a, *p);
}

void Parser::defaults(const YAML::Node& n) {
  if (!check_map(n, "defaults", with_params({"algorithm"}))) return;
  defaults_ = n;
}

void Parser::rate_limit(const YAML::Node& n, const std::string& where, RateLimit& out) {
  out.pos = pos(n);
  if (!check_map(n, where, with_params({"unit", "requests_per_unit", "unlimited", "name", "replaces", "window",
                                        "unit_multiplier", "algorithm"}))) {
    return;
  }
  const std::size_t errors_before = errors_.size();
  if (n["name"]) out.name = string(n["name"], where + ".name").value_or("");
  if (n["unlimited"]) out.unlimited = boolean(n["unlimited"], where + ".unlimited").value_or(false);
  if (n["replaces"]) {
    const YAML::Node r = n["replaces"];
    if (!r.IsSequence() || r.size() == 0) {
      fail(r, where + ".replaces: expected a non-empty list of {name: ...}");
    } else {
      for (std::size_t i = 0; i < r.size(); ++i) {
        const std::string w = where + ".replaces[" + std::to_string(i) + "]";
        if (!check_map(r[i], w, {"name"})) continue;
        if (!r[i]["name"]) {
          fail(r[i], w + ": needs a name");
          continue;
        }
        auto name = string(r[i]["name"], w + ".name");
        if (name && name->empty()) fail(r[i]["name"], w + ".name: must not be empty");
        if (name && !name->empty() && *name == out.name) fail(r[i]["name"], w + ": a rule cannot replace itself");
        if (name) out.replaces.push_back(*name);
      }
    }
  }
  if (out.unlimited) {
    for (std::string_view k : with_params({"unit", "requests_per_unit", "window", "unit_multiplier", "algorithm"})) {
      if (n[std::string(k)]) fail(n[std::string(k)], where + ": '" + std::string(k) + "' makes no sense with unlimited: true");
    }
    return;
  }

  if (n["unit"]) {
    if (auto s = string(n["unit"], where + ".unit")) {
      out.unit = parse_unit(*s);
      if (!out.unit) fail(n["unit"], where + ".unit: '" + *s + "' is not a unit (second, minute, hour, day, week, month, year)");
    }
  }
  std::optional<Nanos> window;
  if (n["window"]) {
    window = duration(n["window"], where + ".window");
    if (n["unit"]) fail(n["window"], where + ": give either unit or window, not both");
  }
  if (n["unit_multiplier"]) {
    if (auto m = uint32(n["unit_multiplier"], where + ".unit_multiplier")) {
      if (*m == 0) fail(n["unit_multiplier"], where + ".unit_multiplier: must be at least 1");
      out.unit_multiplier = std::max<std::uint32_t>(*m, 1);
    }
    if (!n["unit"]) fail(n["unit_multiplier"], where + ".unit_multiplier: needs a unit");
  }
  if (!n["unit"] && !n["window"]) fail(n, where + ": needs a unit (or a window)");
  if (!n["requests_per_unit"]) {
    fail(n, where + ": needs requests_per_unit");
  } else {
    out.requests_per_unit = uint32(n["requests_per_unit"], where + ".requests_per_unit").value_or(0);
  }
  if (errors_.size() != errors_before) return;

  if (out.unit) {
    // A year times 4294967295 does not fit in 64 bits of nanoseconds (validation takes at most 100 years).
    const std::int64_t unit_ns = unit_length(*out.unit).count();
    if (unit_ns > Nanos::max().count() / out.unit_multiplier) {
      fail(n["unit_multiplier"], where + ".unit_multiplier: " + std::to_string(out.unit_multiplier) + " times a " +
                                     std::string(unit_name(*out.unit)) + " is too long a window (at most 100 years)");
      return;
    }
    window = Nanos{unit_ns * out.unit_multiplier};
  }
  // A parameter comes from the rule, else from the file's defaults.
  struct Param {
    YAML::Node node;
    std::string where;
    bool present = false;
  };
  auto param = [&](const char* key) -> Param {
    if (n[key]) return {n[key], where + "." + key, true};
    if (defaults_) {
      const YAML::Node& d = *defaults_;
      if (d[key]) return {d[key], std::string("defaults.") + key, true};
    }
    return {};
  };
  LimitSpec& spec = out.spec;
  spec.algorithm = Algorithm::kFixedWindow;
  if (auto [a, w, present] = param("algorithm"); present) {
    if (auto s = string(a, w)) {
      if (auto alg = parse_algorithm(*s)) {
        spec.algorithm = *alg;
      } else {
        fail(a, w + ": unknown algorithm '" + *s + "' (" + core::algorithm_names() + ")");
      }
    }
  }
  spec.limit = out.requests_per_unit;
  spec.window = window.value_or(Nanos{1'000'000'000});
  const Algorithm alg = spec.algorithm;
  // Defaults apply where the algorithm has the parameter; on the rule itself, any parameter is checked.
  auto applies = [&](const char* key) { return n[key] || (param(key).present && default_applies(alg, key)); };
  if (applies("half_life")) {
    auto [node, w, present] = param("half_life");
    spec.half_life = duration(node, w);
  }
  if (applies("burst")) {
    auto [node, w, present] = param("burst");
    spec.burst = number(node, w);
  }
  if (applies("capacity")) {
    auto [node, w, present] = param("capacity");
    spec.capacity = number(node, w);
  }
  if (applies("count_refused")) {
    auto [node, w, present] = param("count_refused");
    spec.count_refused = boolean(node, w);
  } else if (core::takes(alg, core::Param::kCountRefused)) {
    spec.count_refused = core::info(alg).rules_count_refused;
  }
  if (applies("align")) {
    auto [node, w, present] = param("align");
    if (auto s = string(node, w)) {
      if (*s == "calendar") {
        out.calendar = true;
      } else if (*s != "epoch") {
        fail(node, w + ": '" + *s + "' is not an alignment (epoch, calendar)");
      }
    }
    if (out.calendar && (!out.unit || out.unit_multiplier != 1)) {
      fail(node, w + ": calendar alignment needs a unit (second, minute, hour, day, week, month, year) without a "
                     "multiplier");
      out.calendar = false;
    }
    spec.align = out.calendar ? Align::kCalendar : Align::kEpoch;
  }
  if (out.requests_per_unit == 0) {
    out.blocked = true;  // envoyproxy/ratelimit: every request over the limit
    return;
  }
  for (const ParamError& e : validate(spec)) {
    // Point at the parameter itself where the rule states it.
    const std::string key = e.param == "limit" ? "requests_per_unit" : e.param == "window" && n["unit"] ? "unit" : e.param;
    fail(n[key] ? n[key] : n, where + ": " + e.param + ": " + e.message);
  }
}

void Parser::descriptor(const YAML::Node& n, const std::string& where, int depth, Descriptor& out) {
  out.pos = pos(n);
  if (++count_ > kMaxDescriptors) {
    if (count_ == kMaxDescriptors + 1) fail(n, where + ": more than " + std::to_string(kMaxDescriptors) + " descriptors in one file");
    return;
  }
  if (!check_map(n, where, {"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric",
                            "value_to_metric", "share_threshold", "metadata"})) {
    return;
  }
  if (!n["key"]) {
    fail(n, where + ": needs a key");
  } else if (auto k = string(n["key"], where + ".key")) {
    out.key = *k;
    if (out.key.empty()) fail(n["key"], where + ".key: must not be empty");
  }
  if (n["value"]) {
    out.value = string(n["value"], where + ".value");
    out.wildcard = out.value && out.value->find('*') != std::string::npos;
  }
  const std::string here = where + " (" + out.key + (out.value ? "=" + *out.value : "") + ")";
  if (n["rate_limit"]) {
    out.rate_limit.emplace();
    rate_limit(n["rate_limit"], here + ".rate_limit", *out.rate_limit);
  }
  auto flag = [&](const char* key, bool& field) {
    if (n[key]) field = boolean(n[key], here + "." + key).value_or(false);
  };
  flag("shadow_mode", out.shadow_mode);
  flag("quota_mode", out.quota_mode);
  flag("detailed_metric", out.detailed_metric);
  flag("value_to_metric", out.value_to_metric);
  flag("share_threshold", out.share_threshold);
  if (out.share_threshold && !out.wildcard) {
    fail(n["share_threshold"], here + ".share_threshold: only for a value with a '*' wildcard");
  }
  if (n["metadata"] && !n["metadata"].IsMap()) fail(n["metadata"], here + ".metadata: expected a map");
  if (n["descriptors"]) {
    if (depth >= kMaxDepth) {
      fail(n["descriptors"], here + ": descriptors nested deeper than " + std::to_string(kMaxDepth) + " levels");
    } else {
      descriptors(n["descriptors"], here + ".descriptors", depth + 1, out.descriptors);
    }
  }
}

void Parser::descriptors(const YAML::Node& list, const std::string& where, int depth, std::vector<Descriptor>& out) {
  // `descriptors:` with nothing after it: none (envoyproxy/ratelimit loads a placeholder domain this way).
  if (list.IsNull()) return;
  if (!list.IsSequence()) {
    fail(list, where + ": expected a list of descriptors");
    return;
  }
  std::map<std::pair<std::string, std::string>, SourcePos> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    Descriptor d;
    descriptor(list[i], where + "[" + std::to_string(i) + "]", depth, d);
    const auto id = std::make_pair(d.key, d.value ? "=" + *d.value : std::string());
    if (!d.key.empty()) {
      const auto [it, fresh] = seen.emplace(id, d.pos);
      if (!fresh) {
        fail(list[i], where + "[" + std::to_string(i) + "]: the descriptor " + d.key + (d.value ? "=" + *d.value : "") +
                          " is already defined at line " + std::to_string(it->second.line));
      }
    }
    out.push_back(std::move(d));
  }
}

bool parse_cidr(std::string_view text, Cidr& out) {
  std::string addr(text);
  int prefix = -1;
  if (const auto slash = addr.find('/'); slash != std::string::npos) {
    const std::string p = addr.substr(slash + 1);
    addr.resize(slash);
    int v = 0;
    const auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc{} || ptr != p.data() + p.size() || p.empty()) return false;
    prefix = v;
  }
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    if (prefix > 32) return false;
    std::memset(out.bytes, 0, 10);
    out.bytes[10] = out.bytes[11] = 0xff;
    std::memcpy(out.bytes + 12, &v4, 4);
    out.prefix = 96 + (prefix < 0 ? 32 : prefix);
    return true;
  }
  if (inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    if (prefix > 128) return false;
    std::memcpy(out.bytes, &v6, 16);
    out.prefix = prefix < 0 ? 128 : prefix;
    return true;
  }
  return false;
}

void Parser::forward_auth(const YAML::Node& n, ForwardAuth& out) {
  const std::string where = "forward_auth";
  if (!check_map(n, where, {"deny_status", "trusted_proxies", "descriptors"})) return;
  out.enabled = true;
  if (n["deny_status"]) {
    const auto s = uint32(n["deny_status"], where + ".deny_status");
    if (s && (*s < 400 || *s > 599)) fail(n["deny_status"], where + ".deny_status: must be a 4xx or 5xx status");
    if (s) out.deny_status = static_cast<int>(*s);
  }
  if (n["trusted_proxies"]) {
    const YAML::Node t = n["trusted_proxies"];
    if (!t.IsSequence()) {
      fail(t, where + ".trusted_proxies: expected a list of addresses or CIDR ranges");
    } else {
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string w = where + ".trusted_proxies[" + std::to_string(i) + "]";
        auto s = string(t[i], w);
        Cidr c;
        if (s && !parse_cidr(*s, c)) fail(t[i], w + ": '" + *s + "' is not an IP address or CIDR range");
        if (s) out.trusted_proxies.push_back(c);
      }
    }
  }
  const YAML::Node d = n["descriptors"];
  if (!d || !d.IsSequence() || d.size() == 0) {
    fail(d ? d : n, where + ".descriptors: expected a non-empty list, each {entries: [...]}");
    return;
  }
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::string w = where + ".descriptors[" + std::to_string(i) + "]";
    if (!check_map(d[i], w, {"entries"})) continue;
    const YAML::Node entries = d[i]["entries"];
    if (!entries || !entries.IsSequence() || entries.size() == 0) {
      fail(entries ? entries : d[i], w + ".entries: expected a non-empty list");
      continue;
    }
    std::vector<EntrySource> built;
    for (std::size_t j = 0; j < entries.size(); ++j) {
      const std::string we = w + ".entries[" + std::to_string(j) + "]";
      const YAML::Node e = entries[j];
      if (!check_map(e, we, {"key", "from", "header", "query", "segments", "value"})) continue;
      EntrySource src;
      if (!e["key"]) fail(e, we + ": needs a key");
      else src.key = string(e["key"], we + ".key").value_or("");
      const std::string from = e["from"] ? string(e["from"], we + ".from").value_or("") : "";
      static const std::pair<std::string_view, Source> kSources[] = {
          {"client_ip", Source::kClientIp}, {"header", Source::kHeader},      {"method", Source::kMethod},
          {"path", Source::kPath},          {"path_prefix", Source::kPathPrefix}, {"host", Source::kHost},
          {"query", Source::kQuery},        {"value", Source::kValue}};
      const auto it = std::find_if(std::begin(kSources), std::end(kSources), [&](auto& s) { return s.first == from; });
      if (it == std::end(kSources)) {
        fail(e["from"] ? e["from"] : e, we + ".from: '" + from +
                                            "' is not a source (client_ip, header, method, path, path_prefix, host, "
                                            "query, value)");
        continue;
      }
      src.source = it->second;
      auto need = [&](const char* key) {
        if (!e[key]) {
          fail(e, we + ": from: " + from + " needs '" + key + "'");
          return std::string();
        }
        return string(e[key], we + "." + key).value_or("");
      };
      if (src.source == Source::kHeader) src.name = need("header");
      if (src.source == Source::kQuery) src.name = need("query");
      if (src.source == Source::kValue) src.name = need("value");
      if (e["segments"]) {
        if (src.source != Source::kPathPrefix) fail(e["segments"], we + ".segments: only with from: path_prefix");
        const auto s = uint32(e["segments"], we + ".segments");
        if (s && (*s < 1 || *s > 64)) fail(e["segments"], we + ".segments: must be from 1 to 64");
        if (s) src.segments = *s;
      }
      built.push_back(std::move(src));
    }
    out.descriptors.push_back(std::move(built));
  }
}

void Parser::domain(const YAML::Node& root, DomainConfig& out) {
  out.file = file_;
  if (!root.IsMap()) {
    errors_.push_back({{file_, 1, 1}, "a rules file is a map with a domain and its descriptors"});
    return;
  }
  check_map(root, "rules", {"domain", "descriptors", "defaults", "shadow_mode", "all_or_nothing", "forward_auth",
                            "store", "redis_failure"});
  if (!root["domain"]) {
    errors_.push_back({{file_, 1, 1}, "domain: missing (every rules file names its domain)"});
  } else if (auto d = string(root["domain"], "domain")) {
    out.domain = *d;
    if (out.domain.empty()) fail(root["domain"], "domain: must not be empty");
  }
  if (root["defaults"]) defaults(root["defaults"]);
  if (root["shadow_mode"]) out.shadow_mode = boolean(root["shadow_mode"], "shadow_mode").value_or(false);
  if (root["all_or_nothing"]) out.all_or_nothing = boolean(root["all_or_nothing"], "all_or_nothing").value_or(false);
  if (root["store"]) {
    if (auto s = string(root["store"], "store")) {
      if (*s == "memory") out.store = StoreKind::kMemory;
      else if (*s == "redis") out.store = StoreKind::kRedis;
      else fail(root["store"], "store: unknown store '" + *s + "' (memory, redis)");
    }
  }
  if (root["redis_failure"]) {
    if (auto s = string(root["redis_failure"], "redis_failure")) {
      if (auto p = parse_failure_policy(*s)) out.redis_failure = *p;
      else fail(root["redis_failure"], "redis_failure: unknown policy '" + *s + "' (fail_open, fail_closed, local)");
    }
  }
  if (root["descriptors"]) descriptors(root["descriptors"], "descriptors", 1, out.descriptors);
  if (root["forward_auth"]) forward_auth(root["forward_auth"], out.forward_auth);
}

}  // namespace

std::vector<ConfigError> parse_domain(const std::string& file, const std::string& text, DomainConfig& out) {
  std::vector<ConfigError> errors;
  if (text.size() > kMaxRulesFileBytes) {
    errors.push_back({{file, 1, 1}, "the file is " + std::to_string(text.size()) + " bytes, over the limit of " +
                                        std::to_string(kMaxRulesFileBytes)});
    return errors;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errors.push_back({{file, e.mark.line + 1, e.mark.column + 1}, "not valid YAML: " + e.msg});
    return errors;
  }
  try {
    Parser(file, errors).domain(root, out);
  } catch (const YAML::Exception& e) {
    errors.push_back({{file, e.mark.line + 1, e.mark.column + 1}, "unreadable: " + e.msg});
  }
  return errors;
}

namespace {

// A domain-level setting given in either file applies to the merged domain; given differently in both, it is an
// error (booleans cannot conflict: true in either file wins).
template <class T>
void merge_setting(T& into, const T& from, const char* name, const DomainConfig& a, const DomainConfig& b,
                   std::vector<ConfigError>& errors) {
  if (from == T{}) return;
  if (into != T{} && into != from) {
    errors.push_back({{b.file, 1, 1}, "domain '" + b.domain + "': " + name + " differs from its value in " + a.file +
                                          " (a merged domain's setting is given in one file, or alike in all)"});
  }
  into = from;
}

// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG: the top-level descriptors of `from` join those of `into`; a key=value
// defined in both is an error naming both places.
void merge_domain(DomainConfig& into, DomainConfig&& from, std::vector<ConfigError>& errors) {
  std::map<std::pair<std::string, std::string>, SourcePos> seen;
  const auto id = [](const Descriptor& d) { return std::make_pair(d.key, d.value ? "=" + *d.value : std::string()); };
  for (const Descriptor& d : into.descriptors) seen.emplace(id(d), d.pos);
  for (std::size_t i = 0; i < from.descriptors.size(); ++i) {
    Descriptor& d = from.descriptors[i];
    if (const auto it = seen.find(id(d)); it != seen.end()) {
      errors.push_back({d.pos, "descriptors[" + std::to_string(i) + "]: the descriptor " + d.key +
                                   (d.value ? "=" + *d.value : "") + " of domain '" + into.domain +
                                   "' is already defined at " + it->second.file + ":" +
                                   std::to_string(it->second.line)});
      continue;
    }
    seen.emplace(id(d), d.pos);
    into.descriptors.push_back(std::move(d));
  }
  merge_setting(into.shadow_mode, from.shadow_mode, "shadow_mode", into, from, errors);
  merge_setting(into.all_or_nothing, from.all_or_nothing, "all_or_nothing", into, from, errors);
  merge_setting(into.store, from.store, "store", into, from, errors);
  merge_setting(into.redis_failure, from.redis_failure, "redis_failure", into, from, errors);
  if (from.forward_auth.enabled) {
    if (into.forward_auth.enabled) {
      errors.push_back({{from.file, 1, 1}, "domain '" + from.domain + "': forward_auth is also given in " + into.file +
                                               " (a merged domain's forward_auth is given in one file)"});
    }
    into.forward_auth = std::move(from.forward_auth);
  }
}

}  // namespace

std::vector<ConfigError> load_rules(const std::string& path, std::vector<DomainConfig>& out, const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::vector<ConfigError> errors;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string ext = entry.path().extension().string();
      if ((ext == ".yaml" || ext == ".yml") && entry.is_regular_file(ec)) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (ec) errors.push_back({{path, 0, 0}, "cannot read the directory: " + ec.message()});
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    errors.push_back({{path, 0, 0}, "no such file or directory"});
  }
  std::map<std::string, std::size_t> domains;  // domain -> its index in out
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      errors.push_back({{f, 0, 0}, std::string("cannot open: ") + std::strerror(errno)});
      continue;
    }
    std::ostringstream text;
    text << in.rdbuf();
    DomainConfig d;
    auto e = parse_domain(f, text.str(), d);
    if (e.empty() && !d.domain.empty()) {
      const auto [it, fresh] = domains.emplace(d.domain, out.size());
      if (!fresh && options.merge_domains) {
        merge_domain(out[it->second], std::move(d), errors);
        continue;
      }
      if (!fresh) {
        e.push_back({{f, 1, 1}, "domain '" + d.domain + "' is already defined in " + out[it->second].file +
                                    " (--merge-domains merges the files of one domain)"});
      }
    }
    errors.insert(errors.end(), e.begin(), e.end());
    out.push_back(std::move(d));
  }
  return errors;
}

}  // namespace rk::rules
