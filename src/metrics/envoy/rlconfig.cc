// metrics/envoy/rlconfig.cc: the rules as upstream's /rlconfig prints them.
#include "metrics/envoy/rlconfig.h"

#include "base/ascii.h"
#include "metrics/envoy/stats_key.h"

namespace rk::metrics::envoy {

std::string rlconfig_text(const rules::RuleSet& set) {
  std::string out;
  for (const auto& rule : set.rules()) {
    const rules::DomainConfig* domain = set.domain(rule->domain);
    if (!domain || !rule->limit) continue;
    const RulePath path = path_of(*domain, rule->limit);
    if (path.levels.empty()) continue;
    const rules::RateLimit& limit = *rule->limit;
    out += rule_stats_key(rule->domain, path.levels);
    out += ": unit=";
    out += limit.unit && !limit.unlimited ? base::ascii_upper(rules::unit_name(*limit.unit)) : "UNKNOWN";
    out += " requests_per_unit=" + std::to_string(limit.unlimited ? 0 : limit.requests_per_unit);
    out += rule->shadow_mode ? ", shadow_mode: true\n" : ", shadow_mode: false\n";
  }
  return out;
}

}  // namespace rk::metrics::envoy
