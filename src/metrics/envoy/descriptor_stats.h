// metrics/envoy/descriptor_stats.h: envoyproxy/ratelimit's per-descriptor counters (total_hits, over_limit,
// near_limit, within_limit, shadow_mode) as Prometheus metrics with upstream's names and labels (metrics/names.h,
// stats_key.h), fed by the Service as one of its decision observers.
//
//   auto stats = std::make_shared<rk::metrics::envoy::DescriptorStats>(registry);
//   rk::service::Service service(reloader, clock, {.observer = rk::service::observe_all({tracker, stats})});
//
// What is counted, per charged decision under a rule (not unlimited or replaced ones, not a request's own `limit`,
// not dry runs), with hits the descriptor's hits: see count_hits().
//
// Cardinality: a rule's own series (labels from the rules file) exist from the first rule set that has it. Where
// detailed_metric or value_to_metric put a request's values in the labels, each rule gets at most
// max_value_series label sets of its own (the first ones seen; never removed, as counters must not vanish); the
// values of every later set are counted in the rule's own series, as if the options were off. So clients can add
// at most rules x max_value_series x 5 series, whatever they send.
//
// Each stats key (upstream's whole name, sanitized) has five counters of its own (KeyCounters), the ones statsd
// sends under that name (keys_since()); the Prometheus series, which keep only the key's first three parts as
// labels, are computed at scrape time as the sum of the keys that share them. So a decision is counted once.
//
// Thread safety: observe() may run on any number of threads. Like the dashboard's Tracker, a shared lock guards
// the index of the current rule set's rules, taken exclusively when a new set is first seen; each rule's value
// series have their own mutex; the list of keys has its own, taken only when a key is new and by keys_since();
// counters are atomics.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "metrics/envoy/stats_key.h"
#include "metrics/registry.h"
#include "service/service.h"

namespace rk::metrics::envoy {

struct DescriptorStatsOptions {
  double near_limit_ratio = 0.8;       // upstream's NEAR_LIMIT_RATIO
  std::size_t max_value_series = 100;  // per rule: label sets made of request values (detailed_metric, value_to_metric)
};

// How one decision moves the five counters.
struct Hits {
  std::uint64_t total = 0, over = 0, near = 0, within = 0, shadow = 0;
};

// upstream's accounting (src/limiter/base_limiter.go) over a decision. total: the hits. Let through: within, and
// near for the part of the hits past floor(requests_per_unit x ratio) (the count after them being
// requests_per_unit - limit_remaining). Over the limit (or let through by shadow mode): over, and shadow for a
// shadow_mode rule; all of the hits, since a refused request is refused whole (upstream, whose counter takes the
// hits either way, splits one that straddles the limit between near and over). A store that did not answer
// (fail_open, fail_closed): total only, as upstream counts a request its Redis failed.
Hits count_hits(const service::DescriptorStatus& status, double near_limit_ratio);

// One stats key's five counters, under upstream's name for them.
struct KeyCounters {
  std::string key;  // sanitized (sanitize_stat_name): "<domain>.<part>...", as upstream's statsd names hold it
  Counter total, over, near, within, shadow;
};

class DescriptorStats final : public service::DecisionObserver {
 public:
  explicit DescriptorStats(Registry& registry, DescriptorStatsOptions options = {});
  ~DescriptorStats() override;

  void observe(const std::shared_ptr<const rules::RuleSet>& set, const rules::Rule& rule, std::string_view key,
               const service::DescriptorStatus& status, Nanos now) override;

  // The stats keys counted so far, from the `from`th on, in the order they appeared; never removed, and each
  // pointer valid for this object's life.
  std::vector<const KeyCounters*> keys_since(std::size_t from) const;
  // Every rule's own counters as upstream's debug listener prints them at /stats, one `name: value` line each,
  // sorted: "ratelimit.service.rate_limit.edge.user.total_hits: 3" (a request's values' series are counted in
  // the Prometheus series alone).
  std::vector<std::string> stats_lines() const;

 private:
  struct RuleStats;
  struct PerRule;
  void bind(const std::shared_ptr<const rules::RuleSet>& set);
  KeyCounters& series_for(const PerRule& r, std::string_view counter_key);
  KeyCounters& counters_for(const std::string& sanitized_key);

  Registry& registry_;
  DescriptorStatsOptions options_;
  mutable std::shared_mutex mu_;
  std::weak_ptr<const rules::RuleSet> bound_;                                 // under mu_: the set by_rule_ indexes
  std::unordered_map<const rules::Rule*, std::unique_ptr<PerRule>> by_rule_;  // under mu_
  std::unordered_map<std::string, std::shared_ptr<RuleStats>> by_key_;        // under mu_: by the rule's stats key
  mutable std::mutex keys_mu_;
  std::vector<std::unique_ptr<KeyCounters>> keys_;         // under keys_mu_, in order of appearance
  std::unordered_map<std::string, KeyCounters*> by_name_;  // under keys_mu_: by KeyCounters::key
  // under keys_mu_: by "domain\nkey1\nkey2", the keys one Prometheus series sums (replaced, never changed)
  std::unordered_map<std::string, std::shared_ptr<const std::vector<const KeyCounters*>>> groups_;
};

}  // namespace rk::metrics::envoy
