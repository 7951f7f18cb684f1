// dashboard/tracker.h: what the dashboard shows of the traffic, kept as it happens: per rule, counters of
// decisions by result, the last minutes of those counters (a ring of samples, so that a page opened after the
// traffic draws it at once) and a bounded sketch of the hottest keys (hot_keys.h). The Service tells it of every
// charged decision (service::DecisionObserver); the admin endpoints read it. Nothing here scans the store.
//
//   auto tracker = std::make_shared<rk::dashboard::Tracker>();
//   rk::service::Service service(reloader, clock, {.observer = tracker});
//   sampler.start(rk::dashboard::kRateSampleInterval, [&] { tracker->sample(clock->now()); });  // serve does
//   ...
//   for (const auto& r : tracker->rates(*service.rules(), true)) ...   // GET /v1/admin/rates?history=1
//   tracker->hot(rule, 10, now)                                        // GET /v1/admin/hot-keys
//
// Rules are tracked by (domain, descriptor path), the names metrics use: counters and hot keys carry over a reload
// that keeps the rule, and a rule that goes away is forgotten with it, so memory follows the number of rules.
//
// Thread safety: observe() may run on any number of threads at once, with reads. A shared lock guards the map from
// the current rule set's Rule pointers to their entries; it is taken exclusively only when a new rule set is first
// seen. Counters are atomics; each rule's sketch has its own mutex; the rings of samples share one mutex, taken
// only by sample() and rates() (never by observe()), always after mu_.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "service/service.h"
#include "dashboard/hot_keys.h"

namespace rk::dashboard {

// How often serve samples the counters, and how many samples each rule keeps: the last two minutes.
inline constexpr Nanos kRateSampleInterval = std::chrono::seconds(1);
inline constexpr std::size_t kRateSamples = 120;

// A rule's counters as sample() found them at `at`.
struct RateSample {
  Nanos at{0};
  std::uint64_t ok = 0;
  std::uint64_t refused = 0;  // over_limit and shadow_over_limit together: what the chart draws dashed
};

struct RuleRates {
  const rules::Rule* rule = nullptr;  // into the set passed to rates()
  std::uint64_t ok = 0;
  std::uint64_t over_limit = 0;
  std::uint64_t shadow_over_limit = 0;  // refused by the limit, let through by shadow mode
  std::vector<RateSample> history;      // with rates(set, true): the last kRateSamples samples, oldest first
};

class Tracker final : public service::DecisionObserver {
 public:
  explicit Tracker(HotKeysOptions hot_keys = {}) : hot_options_(hot_keys) {}

  void observe(const std::shared_ptr<const rules::RuleSet>& set, const rules::Rule& rule, std::string_view key,
               const service::DescriptorStatus& status, Nanos now) override;

  // Every rule's counters into its ring of samples (the oldest dropped past kRateSamples), as of `now`.
  void sample(Nanos now);

  // Every rule of `set` with a limit (unlimited ones decide nothing), in the set's order; zeros for rules not seen.
  // With `history`, each with its samples.
  std::vector<RuleRates> rates(const rules::RuleSet& set, bool history = false) const;
  // The rule's n hottest keys (counter keys, as the rule's limiter knows them).
  std::vector<HotKey> hot(const rules::Rule& rule, std::size_t n, Nanos now) const;

  std::size_t capacity() const { return hot_options_.capacity; }
  Nanos half_life() const { return hot_options_.half_life; }

 private:
  struct Entry {
    explicit Entry(HotKeysOptions o) : keys(o) {}
    std::atomic<std::uint64_t> ok{0}, over{0}, shadow_over{0};
    HotKeys keys;
    std::array<RateSample, kRateSamples> ring{};  // under history_mu_: the samples, next_ the oldest once full
    std::size_t next = 0, samples = 0;            // under history_mu_
  };
  static std::string id(const rules::Rule& rule) { return rule.domain + "\n" + rule.path; }
  const Entry* find(const rules::Rule& rule) const;  // by name: any set's rule

  HotKeysOptions hot_options_;
  mutable std::shared_mutex mu_;
  std::weak_ptr<const rules::RuleSet> bound_;                               // under mu_: the set by_rule_ indexes
  std::unordered_map<const rules::Rule*, std::shared_ptr<Entry>> by_rule_;  // under mu_
  std::unordered_map<std::string, std::shared_ptr<Entry>> by_name_;         // under mu_
  mutable std::mutex history_mu_;                                           // after mu_, when both are taken
};

// A counter key ("<length>:<value>" per descriptor entry, rules/ruleset.h) as people read it: the values joined
// by '/', each entry marked in `secret` shown as its fingerprint (redact.h). A key that is not in that form is
// shown as it is, or as one fingerprint if any entry is secret.
std::string display_key(std::string_view counter_key, const std::vector<bool>& secret = {});

}  // namespace rk::dashboard
