// metrics/envoy/rlconfig.h: the rules in force as envoyproxy/ratelimit's debug listener prints its configuration at
// /rlconfig: one line per rule with a limit, its stats key (stats_key.h) first.
//
//   edge.user: unit=HOUR requests_per_unit=2, shadow_mode: false
//   edge.remote_address_10.0.0.1: unit=UNKNOWN requests_per_unit=0, shadow_mode: false    (an unlimited rule)
//
// A rule whose limit has no unit (`window:`) shows unit=UNKNOWN, as upstream shows one it has none for. Rules come
// in the rule set's order (upstream's follows its maps' and varies).
#pragma once

#include <string>

#include "rules/ruleset.h"

namespace rk::metrics::envoy {

std::string rlconfig_text(const rules::RuleSet& set);

}  // namespace rk::metrics::envoy
