// metrics/envoy/stats_key.h: envoyproxy/ratelimit's stats key for a descriptor, and the Prometheus labels its
// default mapping (src/stats/prom/default_mapper.yaml) makes of it. Pure functions: descriptor_stats.h counts.
//
//   rule "edge": remote_address (no value), detailed_metric     request remote_address=10.0.0.1
//   stats key    "edge.remote_address_10.0.0.1"                 (plain: "edge.remote_address")
//   sanitized    "edge.remote_address_10_0_0_1"                 (':' and '|' and an IPv4 address's dots become '_')
//   labels       {domain="edge", key1="remote_address_10_0_0_1", key2=""}
//
// Upstream's key is "<domain>.<part>..." with one part per descriptor entry: the key, then "_<value>" when the
// value is in it. Which value: the rule's own for an exact or wildcard rule (its pattern, "*" and all), none for a
// key-only rule, unless value_to_metric puts the request's value there (a wildcard with share_threshold keeps its
// pattern); detailed_metric on the matched rule puts every entry's request value there ("key_" for an empty one),
// share_threshold's patterns still winning.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rules/ruleset.h"

namespace rk::metrics::envoy {

// One level of the rule's descriptor path, from the top.
struct Level {
  std::string key;
  std::optional<std::string> value;  // the rule's value (a pattern if wildcard); absent for a key-only rule
  bool wildcard = false;
  bool value_to_metric = false;
  bool share_threshold = false;
};

// The path of the descriptor holding `limit` (a rules::Rule's limit) in its domain, and that descriptor's
// detailed_metric; no levels if no descriptor of the domain holds it.
struct RulePath {
  std::vector<Level> levels;
  bool detailed_metric = false;
};
RulePath path_of(const rules::DomainConfig& domain, const rules::RateLimit* limit);

// upstream's stats key for the rule alone (its FullKey): what any request it matches counts under, without the
// two options.
std::string rule_stats_key(std::string_view domain, std::span<const Level> levels);

// Whether a request's values can change the rule's stats key (detailed_metric, or value_to_metric where the rule
// does not fix the value itself).
bool key_has_values(std::span<const Level> levels, bool detailed_metric);

// upstream's stats key for one request: `values` holds, per level, what the counter key holds (the request's
// value, or the pattern of a share_threshold wildcard).
std::string request_stats_key(std::string_view domain, std::span<const Level> levels, bool detailed_metric,
                              std::span<const std::string_view> values);

// upstream's stats key for a decision the Service observed: `rule` of `set`, with its counter key (rules::Match).
std::string stats_key_of(const rules::RuleSet& set, const rules::Rule& rule, std::string_view counter_key);

// upstream's SanitizeStatName: ':' and '|' become '_', and so do the dots of anything shaped like an IPv4
// address (\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}, leftmost first, as Go's regexp finds them).
std::string sanitize_stat_name(std::string_view key);

struct Labels {
  std::string domain, key1, key2;
};

// The default mapping's labels for a sanitized key: its first three dot-separated parts (key2 empty for a key of
// two parts); parts past the third are dropped, as the mapping's regex drops them.
Labels prometheus_labels(std::string_view sanitized_key);

}  // namespace rk::metrics::envoy
