#include "metrics/envoy/stats_key.h"

#include <algorithm>

namespace rk::metrics::envoy {

namespace {

// Depth first, keeping the path in `path`: a rule's descriptor is found once per rule set, not per decision.
bool find(const std::vector<rules::Descriptor>& level, const rules::RateLimit* limit,
          std::vector<const rules::Descriptor*>& path) {
  for (const rules::Descriptor& d : level) {
    path.push_back(&d);
    if ((d.rate_limit && &*d.rate_limit == limit) || find(d.descriptors, limit, path)) return true;
    path.pop_back();
  }
  return false;
}

void append_part(std::string& out, std::string_view key, std::string_view value) {
  out += '.';
  out += key;
  if (!value.empty()) {
    out += '_';
    out += value;
  }
}

// The value a level puts in the key without detailed_metric (upstream's value_to_metric walk).
std::string_view plain_value(const Level& l, std::string_view request_value) {
  if (l.wildcard) return l.value_to_metric && !l.share_threshold ? request_value : std::string_view(*l.value);
  if (l.value) return *l.value;
  return l.value_to_metric ? request_value : std::string_view();
}

std::size_t digits_at(std::string_view s, std::size_t i) {
  std::size_t n = 0;
  while (i + n < s.size() && s[i + n] >= '0' && s[i + n] <= '9') ++n;
  return n;
}

// The length of an IPv4-shaped match starting at i, or 0. Go's regexp backtracks, but only the last group can end
// in a digit (the others must meet a dot), so a run of more than three digits before a dot never matches.
std::size_t ipv4_at(std::string_view s, std::size_t i) {
  std::size_t at = i;
  for (int group = 0; group < 4; ++group) {
    const std::size_t n = digits_at(s, at);
    if (n == 0 || (group < 3 && (n > 3 || at + n >= s.size() || s[at + n] != '.'))) return 0;
    at += std::min<std::size_t>(n, 3) + (group < 3 ? 1 : 0);
  }
  return at - i;
}

}  // namespace

RulePath path_of(const rules::DomainConfig& domain, const rules::RateLimit* limit) {
  std::vector<const rules::Descriptor*> path;
  RulePath out;
  if (!find(domain.descriptors, limit, path)) return out;
  for (const rules::Descriptor* d : path) {
    out.levels.push_back({.key = d->key,
                          .value = d->value,
                          .wildcard = d->wildcard,
                          .value_to_metric = d->value_to_metric,
                          .share_threshold = d->share_threshold});
  }
  out.detailed_metric = path.back()->detailed_metric;
  return out;
}

std::string rule_stats_key(std::string_view domain, std::span<const Level> levels) {
  std::string out(domain);
  for (const Level& l : levels) append_part(out, l.key, l.value ? std::string_view(*l.value) : std::string_view());
  return out;
}

bool key_has_values(std::span<const Level> levels, bool detailed_metric) {
  return detailed_metric || std::any_of(levels.begin(), levels.end(), [](const Level& l) {
           return l.value_to_metric && !l.share_threshold && (l.wildcard || !l.value);
         });
}

std::string request_stats_key(std::string_view domain, std::span<const Level> levels, bool detailed_metric,
                              std::span<const std::string_view> values) {
  std::string out(domain);
  const bool shared = std::any_of(levels.begin(), levels.end(), [](const Level& l) { return l.share_threshold; });
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const Level& l = levels[i];
    const std::string_view v = i < values.size() ? values[i] : std::string_view();
    if (!detailed_metric) {
      append_part(out, l.key, plain_value(l, v));
    } else if (!shared) {
      // upstream writes key + "_" + value for every entry here, even an empty value ("key_").
      out.append(".").append(l.key).append("_").append(v);
    } else {
      append_part(out, l.key, v);  // a share_threshold level's counter-key value is its pattern
    }
  }
  return out;
}

std::string stats_key_of(const rules::RuleSet& set, const rules::Rule& rule, std::string_view counter_key) {
  const rules::DomainConfig* domain = set.domain(rule.domain);
  if (!domain) return {};
  const RulePath path = path_of(*domain, rule.limit);
  const auto values = rules::split_key_parts(counter_key);
  if (!values || !key_has_values(path.levels, path.detailed_metric)) return rule_stats_key(rule.domain, path.levels);
  return request_stats_key(rule.domain, path.levels, path.detailed_metric, *values);
}

std::string sanitize_stat_name(std::string_view key) {
  std::string out(key);
  std::replace(out.begin(), out.end(), ':', '_');
  std::replace(out.begin(), out.end(), '|', '_');
  for (std::size_t i = 0; i < out.size();) {
    const std::size_t n = ipv4_at(out, i);
    if (n == 0) {
      ++i;
      continue;
    }
    std::replace(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(i + n), '.',
                 '_');
    i += n;
  }
  return out;
}

Labels prometheus_labels(std::string_view key) {
  Labels out;
  std::string* parts[] = {&out.domain, &out.key1, &out.key2};
  for (std::string* part : parts) {
    const std::size_t dot = key.find('.');
    *part = key.substr(0, dot);
    if (dot == std::string_view::npos) break;
    key.remove_prefix(dot + 1);
  }
  return out;
}

}  // namespace rk::metrics::envoy
