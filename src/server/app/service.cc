#include "server/app/service.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace rk::app {

namespace {

constexpr std::uint32_t kUnlimitedRemaining = std::numeric_limits<std::uint32_t>::max();

std::uint32_t clamp_remaining(double r) {
  if (!(r > 0)) return 0;
  if (r >= 4294967295.0) return kUnlimitedRemaining;
  return static_cast<std::uint32_t>(std::floor(r));
}

void describe(DescriptorStatus& st, const rules::RateLimit& limit, const std::string& name) {
  st.has_limit = true;
  st.name = name;
  st.requests_per_unit = limit.requests_per_unit;
  st.unit = limit.unit;
  st.window = limit.unit ? Nanos{rules::unit_length(*limit.unit).count() * limit.unit_multiplier} : limit.spec.window;
  st.algorithm = limit.spec.algorithm;
}

// A blocked limit (requests_per_unit 0) refuses everything; Envoy reports its window's reset.
void apply_blocked(DescriptorStatus& st, std::int64_t now) {
  st.code = Code::kOverLimit;
  st.limit_remaining = 0;
  st.retry_after = kNever;
  const std::int64_t w = std::max<std::int64_t>(1, st.window.count());
  st.duration_until_reset = Nanos{w - ((now % w) + w) % w};
}

void apply(DescriptorStatus& st, const Decision& d) {
  st.code = d.allowed ? Code::kOk : Code::kOverLimit;
  st.limit_remaining = clamp_remaining(d.remaining);
  st.retry_after = d.retry_after;
  st.duration_until_reset = d.allowed || d.retry_after == kNever ? d.reset_after : d.retry_after;
  st.estimate = d.estimate;
}

struct Pending {
  std::size_t index;
  std::shared_ptr<Limiter> limiter;  // null: blocked
  std::string key;
  std::uint64_t hits;
  bool shadow;
};

}  // namespace

std::string_view code_name(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kOverLimit: return "OVER_LIMIT";
    case Code::kUnknown: break;
  }
  return "UNKNOWN";
}

Service::Service(rules::Reloader& rules, std::shared_ptr<const Clock> clock, ServiceOptions options)
    : rules_(rules), clock_(std::move(clock)), options_(std::move(options)) {}

std::optional<RequestError> Service::validate(const CheckRequest& r) const {
  const RequestLimits& l = options_.limits;
  auto too_long = [](std::size_t n, std::size_t max) {
    return "is " + std::to_string(n) + " bytes, over the limit of " + std::to_string(max);
  };
  if (r.domain.empty()) return RequestError{"domain", "must not be empty"};
  if (r.domain.size() > l.max_domain_bytes) return RequestError{"domain", too_long(r.domain.size(), l.max_domain_bytes)};
  if (r.descriptors.empty()) return RequestError{"descriptors", "must not be empty"};
  if (r.descriptors.size() > l.max_descriptors) {
    return RequestError{"descriptors", "has " + std::to_string(r.descriptors.size()) + " descriptors, over the limit of " +
                                           std::to_string(l.max_descriptors)};
  }
  if (r.hits_addend > l.max_hits) {
    return RequestError{"hits_addend", std::to_string(r.hits_addend) + " is over the limit of " + std::to_string(l.max_hits)};
  }
  for (std::size_t i = 0; i < r.descriptors.size(); ++i) {
    const CheckDescriptor& d = r.descriptors[i];
    const std::string at = "descriptors[" + std::to_string(i) + "]";
    if (d.entries.empty()) return RequestError{at + ".entries", "must not be empty"};
    if (d.entries.size() > l.max_entries) {
      return RequestError{at + ".entries", "has " + std::to_string(d.entries.size()) + " entries, over the limit of " +
                                               std::to_string(l.max_entries)};
    }
    if (d.hits_addend && *d.hits_addend > l.max_hits) {
      return RequestError{at + ".hits_addend",
                          std::to_string(*d.hits_addend) + " is over the limit of " + std::to_string(l.max_hits)};
    }
    for (std::size_t j = 0; j < d.entries.size(); ++j) {
      const auto& [key, value] = d.entries[j];
      const std::string e = at + ".entries[" + std::to_string(j) + "]";
      if (key.empty()) return RequestError{e + ".key", "must not be empty"};
      if (key.size() > l.max_key_bytes) return RequestError{e + ".key", too_long(key.size(), l.max_key_bytes)};
      if (value.size() > l.max_value_bytes) return RequestError{e + ".value", too_long(value.size(), l.max_value_bytes)};
    }
  }
  return std::nullopt;
}

std::shared_ptr<Limiter> Service::override_limiter(const std::string& domain, const LimitOverride& o) {
  const std::string id = domain + "\n" + std::to_string(o.requests_per_unit) + "/" + std::string(rules::unit_name(o.unit));
  std::lock_guard lock(overrides_mu_);
  if (auto it = overrides_.find(id); it != overrides_.end()) return it->second;
  if (overrides_.size() >= options_.max_overrides) overrides_.clear();  // bounded; the counters start afresh
  LimitSpec spec{.algorithm = Algorithm::kFixedWindow,
                 .limit = static_cast<double>(o.requests_per_unit),
                 .window = rules::unit_length(o.unit),
                 .count_refused = true};
  auto limiter = std::make_shared<Limiter>(spec, options_.store, clock_);
  overrides_.emplace(id, limiter);
  return limiter;
}

std::variant<CheckResponse, RequestError> Service::check(const CheckRequest& request) { return run(request, true); }
std::variant<CheckResponse, RequestError> Service::dry_run(const CheckRequest& request) { return run(request, false); }

std::variant<std::vector<bool>, RequestError> Service::reset(const CheckRequest& request) {
  if (auto e = validate(request)) return *e;
  std::vector<bool> out(request.descriptors.size(), false);
  const auto set = rules_.current();
  if (!set) return out;
  std::vector<rules::Entry> entries;
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    entries.clear();
    for (const auto& [k, v] : request.descriptors[i].entries) entries.push_back({k, v});
    const rules::Match m = set->match(request.domain, entries);
    if (m.rule && m.rule->limiter) out[i] = m.rule->limiter->reset(m.counter_key);
  }
  return out;
}

std::variant<CheckResponse, RequestError> Service::run(const CheckRequest& request, bool charge) {
  if (auto e = validate(request)) return *e;
  CheckResponse resp;
  resp.rules = rules_.current();
  resp.statuses.resize(request.descriptors.size());
  const std::int64_t now = clock_->now().count();
  const rules::RuleSet* set = resp.rules.get();
  const rules::DomainConfig* domain = set ? set->domain(request.domain) : nullptr;

  // 1. Match every descriptor to its limit.
  std::vector<Pending> pending;
  std::vector<rules::Entry> entries;
  for (std::size_t i = 0; i < request.descriptors.size(); ++i) {
    const CheckDescriptor& d = request.descriptors[i];
    DescriptorStatus& st = resp.statuses[i];
    const std::uint64_t hits = d.hits_addend ? *d.hits_addend : std::max<std::uint64_t>(1, request.hits_addend);
    if (d.limit) {
      st.has_limit = true;
      st.name = "override";
      st.requests_per_unit = d.limit->requests_per_unit;
      st.unit = d.limit->unit;
      st.window = rules::unit_length(d.limit->unit);
      std::string key;
      for (const auto& [k, v] : d.entries) {
        rules::append_key_part(key, k);
        rules::append_key_part(key, v);
      }
      auto limiter = d.limit->requests_per_unit ? override_limiter(request.domain, *d.limit) : nullptr;
      pending.push_back({i, std::move(limiter), std::move(key), hits, false});
      continue;
    }
    if (!domain) continue;
    entries.clear();
    for (const auto& [k, v] : d.entries) entries.push_back({k, v});
    rules::Match m = set->match(request.domain, entries);
    if (!m.rule) continue;
    st.rule = m.rule;
    if (m.rule->limit->unlimited) {
      st.unlimited = true;
      st.name = m.rule->name;
      st.limit_remaining = kUnlimitedRemaining;
      continue;
    }
    describe(st, *m.rule->limit, m.rule->name);
    pending.push_back({i, m.rule->limiter, std::move(m.counter_key), hits, m.rule->shadow_mode || options_.shadow_mode});
  }

  // 2. A limit named in another matched limit's `replaces` is dropped.
  std::set<std::string_view> replaced;
  for (const Pending& p : pending) {
    if (const rules::Rule* r = resp.statuses[p.index].rule) replaced.insert(r->limit->replaces.begin(), r->limit->replaces.end());
  }
  if (!replaced.empty()) {
    std::erase_if(pending, [&](const Pending& p) {
      const rules::Rule* r = resp.statuses[p.index].rule;
      if (!r || r->limit->name.empty() || !replaced.count(r->limit->name)) return false;
      DescriptorStatus& st = resp.statuses[p.index];
      st = DescriptorStatus{};
      st.rule = r;
      st.name = r->name;
      return true;
    });
  }

  // 3. Decide. all_or_nothing: look first, and charge nothing but the refusing limits if any limit refuses.
  bool charge_all = charge;
  std::vector<Decision> looked(pending.size());
  if (charge && domain && domain->all_or_nothing && pending.size() > 1) {
    bool refused = false;
    for (std::size_t k = 0; k < pending.size(); ++k) {
      const Pending& p = pending[k];
      if (!p.limiter) {
        refused |= !p.shadow;
        continue;
      }
      looked[k] = p.limiter->peek_at(p.key, Nanos{now}, p.hits);
      refused |= !looked[k].allowed && !p.shadow;
    }
    charge_all = !refused;
  }
  for (std::size_t k = 0; k < pending.size(); ++k) {
    const Pending& p = pending[k];
    DescriptorStatus& st = resp.statuses[p.index];
    if (!p.limiter) {
      apply_blocked(st, now);
    } else if (charge_all || (charge && !looked[k].allowed && !p.shadow)) {
      apply(st, p.limiter->check_at(p.key, Nanos{now}, p.hits));
      st.charged = true;
    } else {
      apply(st, charge ? looked[k] : p.limiter->peek_at(p.key, Nanos{now}, p.hits));
    }
    if (st.code == Code::kOverLimit && p.shadow) {
      st.code = Code::kOk;
      st.shadowed = true;
    }
  }

  // 4. Overall: over if any descriptor is; quota_mode descriptors only if all of them are.
  std::size_t quota = 0, quota_over = 0;
  bool over = false;
  for (const DescriptorStatus& st : resp.statuses) {
    const bool is_over = st.code == Code::kOverLimit;
    if (st.rule && st.rule->quota_mode) {
      ++quota;
      quota_over += is_over;
    } else {
      over |= is_over;
    }
  }
  resp.overall = over || (quota > 0 && quota_over == quota) ? Code::kOverLimit : Code::kOk;
  return resp;
}

}  // namespace rk::app
