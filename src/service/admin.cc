// service/admin.cc: what the admin API asks of the service beside decisions: a key's state forgotten (reset) and hot
// keys' states looked at (peek_keys), from whichever store holds them, waiting for a remote one's answer.
#include <future>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "service/service.h"
#include "service/wait_for.h"

namespace rk::service {

std::variant<std::vector<bool>, RequestError> Service::reset(const CheckRequest& request) {
  if (auto e = validate(request)) return *e;
  std::vector<bool> out(request.descriptors.size(), false);
  const auto set = rules_.current();
  if (!set) return out;
  const bool remote = uses_remote(set->domain(request.domain));
  const bool batched = uses_batcher(set->domain(request.domain));
  std::vector<rules::Entry> entries;
  std::vector<std::string> keys;
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    entries.clear();
    for (const auto& [k, v] : request.descriptors[i].entries) entries.push_back({k, v});
    const rules::Match m = set->match(request.domain, entries);
    if (!m.rule || !m.rule->limiter) continue;
    out[i] = m.rule->limiter->reset(m.counter_key);  // the local fallback's state too
    if (remote) {
      keys.push_back(m.rule->store_prefix + m.counter_key);
      at.push_back(i);
    }
  }
  if (!keys.empty() && batched) {
    std::promise<void> promise;
    options_.batcher->reset(std::move(keys), [&promise] { promise.set_value(); });
    promise.get_future().wait();
  } else if (!keys.empty()) {
    const auto existed = wait_for<std::vector<std::optional<bool>>>(
        [&](auto done) { options_.remote->reset(std::move(keys), std::move(done)); });
    for (std::size_t j = 0; j < at.size() && j < existed.size(); ++j) {
      if (existed[j].value_or(false)) out[at[j]] = true;
    }
  }
  return out;
}

std::vector<std::optional<Decision>> Service::peek_keys(const rules::RuleSet& set, const rules::Rule& rule,
                                                        const std::vector<std::string>& keys) {
  std::vector<std::optional<Decision>> out(keys.size());
  if (!rule.limiter || keys.empty()) return out;
  const Nanos now = clock_->now();
  if (!uses_remote(set.domain(rule.domain))) {
    for (std::size_t i = 0; i < keys.size(); ++i) out[i] = rule.limiter->peek_at(keys[i], now, 1);
    return out;
  }
  if (uses_batcher(set.domain(rule.domain))) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      out[i] = wait_for<Decision>([&](auto done) {
        options_.batcher->decide(rule.limiter->spec(), rule.store_prefix + keys[i], 1, true, now, std::move(done));
      });
    }
    return out;
  }
  if (breaker_ && !breaker_->allow()) return out;
  std::vector<store::remote::RemoteOp> ops;
  for (const auto& k : keys) ops.push_back({&rule.limiter->spec(), rule.store_prefix + k, 1, true});
  const auto results = wait_for<std::vector<store::remote::RemoteResult>>(
      [&](auto done) { options_.remote->decide(std::move(ops), now, std::move(done)); });
  bool available = !results.empty();
  for (std::size_t i = 0; i < keys.size() && i < results.size(); ++i) {
    available &= results[i].status != store::remote::RemoteResult::Status::kUnavailable;
    if (results[i].status == store::remote::RemoteResult::Status::kOk) out[i] = results[i].decision;
  }
  if (breaker_) breaker_->record(available);
  return out;
}

}  // namespace rk::service
