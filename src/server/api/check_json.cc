#include "server/api/check_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace rk::server::api {

namespace {

using nlohmann::json;

struct Bad {
  std::string field;
  std::string message;
};

// Looks a field up by its snake_case name or proto3 JSON's lowerCamelCase.
const json* field(const json& obj, std::string_view snake, std::string_view camel) {
  if (auto it = obj.find(std::string(snake)); it != obj.end()) return &*it;
  if (!camel.empty()) {
    if (auto it = obj.find(std::string(camel)); it != obj.end()) return &*it;
  }
  return nullptr;
}

void only_fields(const json& obj, const std::string& at, std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, v] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      throw Bad{at.empty() ? k : at + "." + k, "unknown field"};
    }
  }
}

std::string string_at(const json& v, const std::string& at) {
  if (!v.is_string()) throw Bad{at, "must be a string"};
  return v.get<std::string>();
}

// proto3 JSON writes 64-bit integers as strings; accept both.
std::uint64_t uint_at(const json& v, const std::string& at, std::uint64_t max) {
  std::uint64_t n = 0;
  if (v.is_number_unsigned()) {
    n = v.get<std::uint64_t>();
  } else if (v.is_number_integer()) {
    throw Bad{at, "must not be negative"};
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.empty() || s.size() > 20 ||
        !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); })) {
      throw Bad{at, "must be a whole number"};
    }
    try {
      n = std::stoull(s);
    } catch (...) {
      throw Bad{at, "must be a whole number from 0 to " + std::to_string(max)};
    }
  } else {
    throw Bad{at, "must be a whole number"};
  }
  if (n > max) throw Bad{at, std::to_string(n) + " is over the limit of " + std::to_string(max)};
  return n;
}

std::vector<std::pair<std::string, std::string>> entries_at(const json& es, const std::string& at) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!es.is_array()) throw Bad{at, "must be a list"};
  for (std::size_t k = 0; k < es.size(); ++k) {
    const json& e = es[k];
    const std::string eat = at + "[" + std::to_string(k) + "]";
    if (!e.is_object()) throw Bad{eat, "must be an object with key and value"};
    only_fields(e, eat, {"key", "value"});
    const json* key = field(e, "key", "");
    const json* value = field(e, "value", "");
    out.emplace_back(key ? string_at(*key, eat + ".key") : "", value ? string_at(*value, eat + ".value") : "");
  }
  return out;
}

service::LeaseRequest lease_from_json(const json& j, bool release) {
  if (!j.is_object()) throw Bad{"", "the body must be a JSON object"};
  if (release) {
    only_fields(j, "", {"domain", "entries", "lease"});
  } else {
    only_fields(j, "", {"domain", "entries"});
  }
  service::LeaseRequest r;
  if (const json* d = field(j, "domain", "")) r.domain = string_at(*d, "domain");
  if (const json* es = field(j, "entries", "")) r.entries = entries_at(*es, "entries");
  if (const json* l = field(j, "lease", "")) r.lease = string_at(*l, "lease");
  return r;
}

service::ReserveRequest reserve_from_json(const json& j, bool settle) {
  if (!j.is_object()) throw Bad{"", "the body must be a JSON object"};
  if (settle) {
    only_fields(j, "", {"domain", "entries", "reservation", "actual"});
  } else {
    only_fields(j, "", {"domain", "entries", "estimate", "ttl_seconds"});
  }
  service::ReserveRequest r;
  if (const json* d = field(j, "domain", "")) r.domain = string_at(*d, "domain");
  if (const json* es = field(j, "entries", "")) r.entries = entries_at(*es, "entries");
  const char* amount = settle ? "actual" : "estimate";
  const json* a = field(j, amount, "");
  if (!a) throw Bad{amount, "missing"};
  if (a->is_number_float()) throw Bad{amount, "must be a whole number"};
  r.amount = uint_at(*a, amount, kMaxReservationAmount);
  if (const json* id = field(j, "reservation", "")) r.reservation = string_at(*id, "reservation");
  if (const json* t = field(j, "ttl_seconds", "")) {
    if (!t->is_number()) throw Bad{"ttl_seconds", "must be a number"};
    const double s = t->get<double>();
    if (!(s >= 0.001 && s <= 86400)) throw Bad{"ttl_seconds", "must be from 0.001 to 86400"};
    r.ttl = Nanos{static_cast<std::int64_t>(std::llround(s * 1e9))};
  }
  return r;
}

service::CheckRequest from_json(const json& j) {
  if (!j.is_object()) throw Bad{"", "the body must be a JSON object"};
  only_fields(j, "", {"domain", "descriptors", "hits_addend", "hitsAddend"});
  service::CheckRequest r;
  if (const json* d = field(j, "domain", "")) r.domain = string_at(*d, "domain");
  if (const json* h = field(j, "hits_addend", "hitsAddend")) r.hits_addend = uint_at(*h, "hits_addend", 0xFFFFFFFFull);
  const json* ds = field(j, "descriptors", "");
  if (!ds) return r;  // the service names an empty list
  if (!ds->is_array()) throw Bad{"descriptors", "must be a list"};
  for (std::size_t i = 0; i < ds->size(); ++i) {
    const json& d = (*ds)[i];
    const std::string at = "descriptors[" + std::to_string(i) + "]";
    if (!d.is_object()) throw Bad{at, "must be an object"};
    only_fields(d, at, {"entries", "hits_addend", "hitsAddend", "limit"});
    service::CheckDescriptor desc;
    if (const json* es = field(d, "entries", "")) desc.entries = entries_at(*es, at + ".entries");
    if (const json* h = field(d, "hits_addend", "hitsAddend")) {
      // Envoy wraps it in UInt64Value, which proto3 JSON writes as the bare number.
      desc.hits_addend = uint_at(*h, at + ".hits_addend", ~std::uint64_t{0});
    }
    if (const json* l = field(d, "limit", "")) {
      const std::string lat = at + ".limit";
      if (!l->is_object()) throw Bad{lat, "must be an object"};
      only_fields(*l, lat, {"requests_per_unit", "requestsPerUnit", "unit"});
      service::LimitOverride o;
      const json* rpu = field(*l, "requests_per_unit", "requestsPerUnit");
      if (!rpu) throw Bad{lat + ".requests_per_unit", "missing"};
      o.requests_per_unit = static_cast<std::uint32_t>(uint_at(*rpu, lat + ".requests_per_unit", 0xFFFFFFFFull));
      const json* unit = field(*l, "unit", "");
      if (!unit) throw Bad{lat + ".unit", "missing"};
      const std::string u = string_at(*unit, lat + ".unit");
      const auto parsed = rules::parse_unit(u);
      if (!parsed) throw Bad{lat + ".unit", "'" + u + "' is not a unit (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR)"};
      o.unit = *parsed;
      desc.limit = o;
    }
    r.descriptors.push_back(std::move(desc));
  }
  return r;
}

}  // namespace

std::string proto_duration(Nanos d) {
  const Nanos whole_ns = std::max(Nanos{0}, d);
  const auto whole = std::chrono::duration_cast<std::chrono::seconds>(whole_ns);
  std::string s = std::to_string(whole.count());
  if (const std::int64_t frac = (whole_ns - whole).count(); frac != 0) {
    char buf[16];
    std::snprintf(buf, sizeof buf, ".%09lld", static_cast<long long>(frac));
    std::string f = buf;
    while (f.size() > 4 && f.ends_with("000")) f.resize(f.size() - 3);  // proto3: 3, 6 or 9 digits
    s += f;
  }
  return s + "s";
}

std::string proto_unit_name(rules::Unit unit) {
  std::string u(rules::unit_name(unit));
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  return u;
}

std::variant<service::CheckRequest, service::RequestError> parse_check_request(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return service::RequestError{"", "the body is not valid JSON"};
  try {
    return from_json(j);
  } catch (const Bad& b) {
    return service::RequestError{b.field, b.message};
  } catch (const json::exception& e) {
    return service::RequestError{"", std::string("unreadable: ") + e.what()};
  }
}

std::variant<service::LeaseRequest, service::RequestError> parse_lease_request(std::string_view body, bool release) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return service::RequestError{"", "the body is not valid JSON"};
  try {
    return lease_from_json(j, release);
  } catch (const Bad& b) {
    return service::RequestError{b.field, b.message};
  } catch (const json::exception& e) {
    return service::RequestError{"", std::string("unreadable: ") + e.what()};
  }
}

std::string lease_answer_json(const service::LeaseAnswer& a, bool release) {
  json out = {{"rule", a.name}, {"max_in_flight", a.max_in_flight}};
  if (release) {
    out["released"] = a.done;
  } else {
    out["acquired"] = a.done;
    out["in_flight"] = a.in_flight;
    out["lease_ttl_seconds"] = to_seconds(a.lease_ttl);
    if (a.done) out["lease"] = a.lease;
    else out["retry_after_seconds"] = to_seconds(a.retry_after);
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<service::ReserveRequest, service::RequestError> parse_reserve_request(std::string_view body, bool settle) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return service::RequestError{"", "the body is not valid JSON"};
  try {
    return reserve_from_json(j, settle);
  } catch (const Bad& b) {
    return service::RequestError{b.field, b.message};
  } catch (const json::exception& e) {
    return service::RequestError{"", std::string("unreadable: ") + e.what()};
  }
}

std::string reserve_answer_json(const service::ReserveAnswer& a, bool settle, std::uint64_t actual) {
  const Decision& d = a.decision;
  json out = {{"rule", a.name}, {"limit", d.limit}, {"remaining", d.remaining}};
  if (settle) {
    out["settled"] = a.done;
    out["reserved"] = a.reserved;
    out["actual"] = actual;
    out["overdrew"] = !d.allowed;
  } else {
    out["reserved"] = a.done;
    out["ttl_seconds"] = to_seconds(a.ttl);
    if (a.done) out["reservation"] = a.reservation;
  }
  if (!d.allowed) out["retry_after_seconds"] = d.retry_after == kNever ? -1.0 : to_seconds(d.retry_after);
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string check_response_json(const service::CheckResponse& r) {
  json statuses = json::array();
  for (const service::DescriptorStatus& st : r.statuses) {
    json s = {{"code", service::code_name(st.code)}, {"limit_remaining", st.limit_remaining}};
    if (st.has_limit) {
      // A rule given by `window:` has no unit: it says its window alone (gRPC, whose enum has no "none", says
      // UNKNOWN). A blocked rule (requests_per_unit 0) runs no algorithm ("blocked") and never admits: retry -1.
      json limit = {{"requests_per_unit", st.requests_per_unit}};
      if (st.unit) limit["unit"] = proto_unit_name(*st.unit);
      if (!st.name.empty()) limit["name"] = st.name;
      s["current_limit"] = std::move(limit);
      s["duration_until_reset"] = proto_duration(st.duration_until_reset);
      const bool blocked = st.rule && st.rule->limit && st.rule->limit->blocked;
      if (blocked) s["blocked"] = true;
      s["algorithm"] = blocked ? rules::algorithm_shown(*st.rule->limit) : algorithm_name(st.algorithm);
      s["window_seconds"] = to_seconds(st.window);
      s["retry_after_seconds"] = st.retry_after == kNever ? -1.0 : to_seconds(st.retry_after);
    }
    if (st.rule) s["rule"] = st.rule->path;
    if (st.unlimited) s["unlimited"] = true;
    if (st.shadowed) s["shadowed"] = true;
    if (st.fallback != rules::FailurePolicy::kDefault) {
      s["fallback"] = rules::failure_policy_name(st.fallback);  // the store did not answer; the policy decided
      s["store_error"] = st.store_error;
    }
    if (st.estimate) s["estimate"] = *st.estimate;
    statuses.push_back(std::move(s));
  }
  json out = {{"overall_code", service::code_name(r.overall)}, {"statuses", std::move(statuses)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rk::server::api
