#include "dashboard/tracker.h"

#include "dashboard/redact.h"

#include <algorithm>
#include <charconv>
#include <mutex>

#include "base/same_owner.h"

namespace rk::dashboard {

void Tracker::observe(const std::shared_ptr<const rules::RuleSet>& set, const rules::Rule& rule, std::string_view key,
                      const service::DescriptorStatus& status, Nanos now) {
  if (!set) return;
  std::shared_lock lock(mu_);
  if (!base::same_owner(bound_, set)) {
    lock.unlock();
    {
      std::unique_lock write(mu_);
      if (!base::same_owner(bound_, set)) {
        // A new rule set: index its rules, keeping the entries of rules it still has (by name).
        std::unordered_map<std::string, std::shared_ptr<Entry>> names;
        by_rule_.clear();
        for (const auto& r : set->rules()) {
          auto& e = names[id(*r)];
          if (!e) {
            auto it = by_name_.find(id(*r));
            e = it != by_name_.end() ? it->second : std::make_shared<Entry>(hot_options_);
          }
          by_rule_[r.get()] = e;
        }
        by_name_ = std::move(names);
        bound_ = set;
      }
    }
    lock.lock();
    // Another thread may have bound a newer set meanwhile: then this decision's rule is not indexed; drop it
    // rather than wait (one decision less in the counts, during a reload).
  }
  const auto it = by_rule_.find(&rule);
  if (it == by_rule_.end()) return;
  Entry& e = *it->second;
  const bool refused = status.code == service::Code::kOverLimit;
  (status.shadowed ? e.shadow_over : refused ? e.over : e.ok).fetch_add(1, std::memory_order_relaxed);
  e.keys.add(key, refused || status.shadowed, now);
}

const Tracker::Entry* Tracker::find(const rules::Rule& rule) const {
  auto it = by_name_.find(id(rule));
  return it == by_name_.end() ? nullptr : it->second.get();
}

void Tracker::sample(Nanos now) {
  std::shared_lock lock(mu_);
  std::lock_guard history(history_mu_);
  for (const auto& [name, e] : by_name_) {
    e->ring[e->next] = {
        .at = now,
        .ok = e->ok.load(std::memory_order_relaxed),
        .refused = e->over.load(std::memory_order_relaxed) + e->shadow_over.load(std::memory_order_relaxed)};
    e->next = (e->next + 1) % kRateSamples;
    e->samples = std::min(e->samples + 1, kRateSamples);
  }
}

std::vector<RuleRates> Tracker::rates(const rules::RuleSet& set, bool history) const {
  std::vector<RuleRates> out;
  std::shared_lock lock(mu_);
  for (const auto& r : set.rules()) {
    if (r->limit->unlimited) continue;
    RuleRates rr{.rule = r.get()};
    if (const Entry* e = find(*r)) {
      rr.ok = e->ok.load(std::memory_order_relaxed);
      rr.over_limit = e->over.load(std::memory_order_relaxed);
      rr.shadow_over_limit = e->shadow_over.load(std::memory_order_relaxed);
      if (history) {
        std::lock_guard samples(history_mu_);
        const std::size_t oldest = (e->next + kRateSamples - e->samples) % kRateSamples;
        for (std::size_t i = 0; i < e->samples; ++i) rr.history.push_back(e->ring[(oldest + i) % kRateSamples]);
      }
    }
    out.push_back(std::move(rr));
  }
  return out;
}

std::vector<HotKey> Tracker::hot(const rules::Rule& rule, std::size_t n, Nanos now) const {
  std::shared_lock lock(mu_);
  const Entry* e = find(rule);
  return e ? e->keys.top(n, now) : std::vector<HotKey>{};
}

std::string display_key(std::string_view k, const std::vector<bool>& secret) {
  const bool any_secret = std::find(secret.begin(), secret.end(), true) != secret.end();
  std::string out;
  std::string_view rest = k;
  std::size_t entry = 0;
  while (!rest.empty()) {
    std::size_t len = 0;
    const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
    const std::size_t digits = static_cast<std::size_t>(p - rest.data());
    if (ec != std::errc{} || digits == 0 || digits >= rest.size() || rest[digits] != ':' ||
        len > rest.size() - digits - 1) {
      return any_secret ? fingerprint(k) : std::string(k);
    }
    if (!out.empty()) out += '/';
    const std::string_view value = rest.substr(digits + 1, len);
    if (entry < secret.size() && secret[entry]) {
      out += fingerprint(value);
    } else {
      out.append(value);
    }
    ++entry;
    rest.remove_prefix(digits + 1 + len);
  }
  return out;
}

}  // namespace rk::dashboard
