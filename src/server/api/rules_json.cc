// server/api/rules_json.cc: GET /v1/rules (routes.h): the active rules as JSON, each rule's algorithm with every
// parameter it runs with.
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <utility>

#include "core/registry.h"
#include "server/api/routes.h"

namespace rk::server::api {

namespace {

using nlohmann::json;

}  // namespace

// A rule's algorithm and every parameter it runs with, the defaults it took included. A calendar-aligned window
// has no fixed length: it says its period ("month") instead of window_seconds.
static void limit_json(const rules::RateLimit& l, nlohmann::json& rule) {
  const LimitSpec spec = core::with_defaults(l.spec);
  rule["algorithm"] = algorithm_name(spec.algorithm);
  if (spec.align == Align::kCalendar) {
    rule["align"] = "calendar";
    const auto days = std::chrono::duration_cast<std::chrono::hours>(spec.window).count() / 24;
    rule["calendar_period"] = days == 7    ? "week"
                              : days == 30 ? "month"
                                           : "year";  // the only three (ratekeeper/params.h)
  } else {
    rule["window_seconds"] = to_seconds(spec.window);
  }
  if (spec.half_life) rule["half_life_seconds"] = to_seconds(*spec.half_life);
  if (spec.burst) rule["burst"] = *spec.burst;
  if (spec.capacity) rule["capacity"] = *spec.capacity;
  if (core::takes(spec.algorithm, core::Param::kCountRefused)) rule["count_refused"] = core::counts_refused(spec);
}

std::string rules_json(const rules::RuleSet* set) {
  if (!set) return R"({"version":null,"domains":[]})";
  json domains = json::array();
  for (const rules::DomainConfig& d : set->domains()) {
    json list = json::array();
    for (const auto& r : set->rules()) {
      if (r->domain != d.domain) continue;
      json rule = {{"path", r->path}, {"name", r->name}, {"shadow_mode", r->shadow_mode}};
      const rules::RateLimit& l = *r->limit;
      if (l.unlimited) {
        rule["unlimited"] = true;
      } else if (l.concurrency) {
        rule["algorithm"] = rules::algorithm_shown(l);
        rule["max_in_flight"] = l.concurrency->max_in_flight;
        rule["lease_ttl_seconds"] = to_seconds(l.concurrency->lease_ttl);
      } else {
        rule["requests_per_unit"] = l.requests_per_unit;
        if (l.unit) rule["unit"] = rules::unit_name(*l.unit);
        if (l.blocked) {
          rule["blocked"] = true;  // refuses everything; no algorithm runs
          rule["algorithm"] = rules::algorithm_shown(l);
          rule["window_seconds"] = to_seconds(l.spec.window);
        } else {
          limit_json(l, rule);
        }
        if (r->limiter) rule["keys"] = r->limiter->stats().keys;
      }
      list.push_back(std::move(rule));
    }
    domains.push_back({{"domain", d.domain},
                       {"file", d.file},
                       {"shadow_mode", d.shadow_mode},
                       {"all_or_nothing", d.all_or_nothing},
                       {"forward_auth", d.forward_auth.enabled},
                       {"rules", std::move(list)}});
  }
  const auto loaded = std::chrono::duration_cast<std::chrono::milliseconds>(set->loaded_at().time_since_epoch());
  return json{{"version", set->version()}, {"loaded_at_unix_ms", loaded.count()}, {"domains", std::move(domains)}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rk::server::api
