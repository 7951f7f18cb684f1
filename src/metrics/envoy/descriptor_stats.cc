#include "metrics/envoy/descriptor_stats.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "base/same_owner.h"
#include "metrics/names.h"

namespace rk::metrics::envoy {

// One rule's series, by its stats key: kept across reloads (and after the rule goes), so that a rule's value
// series never exceed max_value_series however often the rules change.
struct DescriptorStats::RuleStats {
  KeyCounters* own = nullptr;
  std::mutex mu;
  std::unordered_map<std::string, KeyCounters*> values;  // under mu: by sanitized key, at most max_value_series
};

// A rule of the bound rule set.
struct DescriptorStats::PerRule {
  std::string domain;
  RulePath path;
  bool has_values = false;  // the request's values can change the labels
  std::shared_ptr<RuleStats> stats;
};

namespace {

// upstream computes the threshold in float32 (float32(limit) * nearLimitRatio, floored as a float64); so does this,
// so that both agree on every limit.
std::uint64_t near_threshold(std::uint32_t limit, double ratio) {
  return static_cast<std::uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(limit) * static_cast<float>(ratio))));
}

}  // namespace

Hits count_hits(const service::DescriptorStatus& st, double near_limit_ratio) {
  Hits h{.total = st.hits};
  if (st.fallback == rules::FailurePolicy::kFailOpen || st.fallback == rules::FailurePolicy::kFailClosed) return h;
  if (st.code == service::Code::kOverLimit || st.shadowed) {
    h.over = st.hits;
    if (st.shadowed && st.rule && st.rule->shadow_mode) h.shadow = st.hits;
    return h;
  }
  h.within = st.hits;
  const std::uint64_t limit = st.requests_per_unit;
  const std::uint64_t after = limit > st.limit_remaining ? limit - st.limit_remaining : 0;
  const std::uint64_t before = after > st.hits ? after - st.hits : 0;
  const std::uint64_t threshold = near_threshold(st.requests_per_unit, near_limit_ratio);
  if (after > threshold) h.near = before >= threshold ? st.hits : after - threshold;
  return h;
}

DescriptorStats::DescriptorStats(Registry& registry, DescriptorStatsOptions options)
    : registry_(registry), options_(options) {}

DescriptorStats::~DescriptorStats() = default;

// The counters of one sanitized stats key, made on first use; its Prometheus series (the sum of the keys with the
// same labels) registered again over the group it joins.
KeyCounters& DescriptorStats::counters_for(const std::string& key) {
  std::lock_guard lock(keys_mu_);
  if (auto it = by_name_.find(key); it != by_name_.end()) return *it->second;
  KeyCounters& k = *keys_.emplace_back(std::make_unique<KeyCounters>());
  k.key = key;
  by_name_.emplace(key, &k);
  const Labels l = prometheus_labels(key);
  auto& group = groups_[l.domain + '\n' + l.key1 + '\n' + l.key2];
  auto members = std::make_shared<std::vector<const KeyCounters*>>(group ? *group : std::vector<const KeyCounters*>{});
  members->push_back(&k);
  group = members;
  namespace n = names;
  const metrics::Labels labels = {{"domain", l.domain}, {"key1", l.key1}, {"key2", l.key2}};
  for (auto [name, member] : {std::pair{n::kEnvoyTotalHits, &KeyCounters::total},
                              {n::kEnvoyOverLimit, &KeyCounters::over},
                              {n::kEnvoyNearLimit, &KeyCounters::near},
                              {n::kEnvoyWithinLimit, &KeyCounters::within},
                              {n::kEnvoyShadowMode, &KeyCounters::shadow}}) {
    registry_.counter_fn(name.name, name.help, labels, [members = group, member] {
      std::uint64_t sum = 0;
      for (const KeyCounters* c : *members) sum += (c->*member).value();
      return sum;
    });
  }
  return k;
}

std::vector<const KeyCounters*> DescriptorStats::keys_since(std::size_t from) const {
  std::lock_guard lock(keys_mu_);
  std::vector<const KeyCounters*> out;
  for (std::size_t i = from; i < keys_.size(); ++i) out.push_back(keys_[i].get());
  return out;
}

// Indexes a new rule set's rules, keeping the series of the rules it still has.
void DescriptorStats::bind(const std::shared_ptr<const rules::RuleSet>& set) {
  std::unique_lock write(mu_);
  if (base::same_owner(bound_, set)) return;
  by_rule_.clear();
  for (const auto& rule : set->rules()) {
    const rules::DomainConfig* domain = set->domain(rule->domain);
    if (!domain || rule->limit->unlimited) continue;  // unlimited rules count nothing, upstream's neither
    auto r = std::make_unique<PerRule>();
    r->domain = rule->domain;
    r->path = path_of(*domain, rule->limit);
    if (r->path.levels.empty()) continue;
    r->has_values = key_has_values(r->path.levels, r->path.detailed_metric);
    const std::string key = rule_stats_key(rule->domain, r->path.levels);
    auto& stats = by_key_[key];
    if (!stats) {
      stats = std::make_shared<RuleStats>();
      stats->own = &counters_for(sanitize_stat_name(key));
    }
    r->stats = stats;
    by_rule_[rule.get()] = std::move(r);
  }
  bound_ = set;
}

// The series of one request's labels, or the rule's own once it has max_value_series of them.
KeyCounters& DescriptorStats::series_for(const PerRule& r, std::string_view counter_key) {
  const auto values = rules::split_key_parts(counter_key);
  if (!values || values->size() != r.path.levels.size()) return *r.stats->own;
  std::string key = sanitize_stat_name(request_stats_key(r.domain, r.path.levels, r.path.detailed_metric, *values));
  RuleStats& stats = *r.stats;
  std::lock_guard lock(stats.mu);
  if (auto it = stats.values.find(key); it != stats.values.end()) return *it->second;
  if (stats.values.size() >= options_.max_value_series) return *stats.own;
  KeyCounters& k = counters_for(key);
  stats.values.emplace(std::move(key), &k);
  return k;
}

void DescriptorStats::observe(const std::shared_ptr<const rules::RuleSet>& set, const rules::Rule& rule,
                              std::string_view key, const service::DescriptorStatus& status, Nanos) {
  if (!set) return;
  std::shared_lock lock(mu_);
  if (!base::same_owner(bound_, set)) {
    lock.unlock();
    bind(set);
    lock.lock();
  }
  // Another thread may have bound a newer set meanwhile: this decision's rule is then not indexed, and is dropped
  // rather than waited for (a decision less in the counts, during a reload).
  const auto it = by_rule_.find(&rule);
  if (it == by_rule_.end()) return;
  const PerRule& r = *it->second;
  const Hits h = count_hits(status, options_.near_limit_ratio);
  KeyCounters& s = r.has_values ? series_for(r, key) : *r.stats->own;
  // Only the counters that move: each is a cache line other threads are bumping too.
  for (auto [c, n] : {std::pair{&s.total, h.total},
                      {&s.over, h.over},
                      {&s.near, h.near},
                      {&s.within, h.within},
                      {&s.shadow, h.shadow}}) {
    if (n) c->inc(n);
  }
}

std::vector<std::string> DescriptorStats::stats_lines() const {
  std::vector<std::string> lines;
  std::shared_lock lock(mu_);
  for (const auto& [key, stats] : by_key_) {
    const KeyCounters& s = *stats->own;
    for (const auto& [name, counter] : {std::pair<const char*, const Counter*>{"total_hits", &s.total},
                                        {"over_limit", &s.over},
                                        {"near_limit", &s.near},
                                        {"within_limit", &s.within},
                                        {"shadow_mode", &s.shadow}}) {
      lines.push_back("ratelimit.service.rate_limit." + key + "." + name + ": " + std::to_string(counter->value()));
    }
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace rk::metrics::envoy
