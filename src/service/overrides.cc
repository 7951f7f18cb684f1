// service/overrides.cc: request overrides' limiters and their judgment (overrides.h): one limiter per configured
// domain and unit, counting against a ceiling, whose count the request's own limit then judges.
#include "service/overrides.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <string>

#include "base/content_hash.h"
#include "service/service.h"

namespace rk::service {

namespace {

static_assert(static_cast<std::size_t>(rules::Unit::kYear) + 1 == 7, "Service::overrides_ holds a limiter per unit");

// Above any requests_per_unit (32 bits) and within a double's exact integers, so that ceiling - remaining is the
// window's count exactly.
constexpr double kOverrideCeiling = 1e12;

}  // namespace

// The remote store's key prefix of request overrides of `unit`: made once per unit, so that a Pending refers to it
// rather than copying it.
std::string_view override_prefix(rules::Unit unit) {
  static const auto prefixes = [] {
    std::array<std::string, static_cast<std::size_t>(rules::Unit::kYear) + 1> p;
    for (std::size_t u = 0; u < p.size(); ++u) {
      p[u] = "rk:override:" + base::content_hash(rules::unit_name(static_cast<rules::Unit>(u))) + ":";
    }
    return p;
  }();
  return prefixes[static_cast<std::size_t>(unit)];
}

// An override limiter's decision (counted against the ceiling, the hits included) judged against the request's
// own limit, as a fixed window that counts refused hits decides: the hits pass if they fit in what the count
// before them left.
Decision judge_override(const Decision& d, std::uint32_t limit, std::uint64_t hits) {
  const auto count = static_cast<std::uint64_t>(kOverrideCeiling - d.remaining);  // remaining 0: at least the ceiling
  const std::uint64_t before = count >= hits ? count - hits : 0;
  Decision out = d;
  out.limit = limit;
  out.allowed = hits <= (before >= limit ? 0 : limit - before);
  out.remaining = static_cast<double>(count >= limit ? 0 : limit - count);
  out.retry_after = out.allowed ? Nanos{0} : hits <= limit ? d.reset_after : kNever;
  return out;
}

// Request overrides keep their counters as envoyproxy/ratelimit does: by domain, unit and entries, not by the limit
// value, which only decides. So sending many distinct limits creates no tables to evict: there is one limiter per
// configured domain and unit (a flood in one domain cannot touch another's counters), and one per unit shared by
// every unconfigured domain (the domain is part of the key). Each is an ordinary store, bounded by its options and
// evicting by CLOCK like a rule's. Domains dropped from the rules lose their limiters at the next lookup.
std::shared_ptr<Limiter> Service::override_limiter(const rules::RuleSet* set, const std::string& domain,
                                                   rules::Unit unit) {
  // Only a configured domain gets here (a request's own limit on an unknown domain is not applied, as upstream), so
  // a flood of made-up domains makes nothing.
  std::lock_guard lock(overrides_mu_);
  if (set && set->version() != overrides_version_) {
    overrides_version_ = set->version();
    std::erase_if(overrides_, [&](const auto& kv) { return !set->domain(kv.first); });
  }
  std::shared_ptr<Limiter>& slot = overrides_[domain][static_cast<std::size_t>(unit)];
  if (!slot) {
    // Counting refused hits too, as Envoy does, against a ceiling no request's limit reaches: judge_override()
    // reads the count back and lets the request's own limit decide.
    LimitSpec spec{.algorithm = Algorithm::kFixedWindow,
                   .limit = kOverrideCeiling,
                   .window = rules::unit_length(unit),
                   .count_refused = true};
    // options_.store's memory budget is all overrides' together: each limiter that can exist gets an equal share.
    StoreOptions store = options_.store;
    if (store.max_memory_bytes) store.max_memory_bytes /= std::max<std::size_t>(1, set ? set->domains().size() : 0) * 7;
    slot = std::make_shared<Limiter>(spec, store, clock_);
  }
  return slot;
}

OverrideStats Service::override_stats() const {
  std::lock_guard lock(overrides_mu_);
  OverrideStats out;
  for (const auto& [domain, units] : overrides_) {
    for (const auto& l : units) {
      if (!l) continue;
      const StoreStats st = l->stats();
      ++out.limiters;
      out.store.keys += st.keys;
      out.store.evictions += st.evictions;
      out.store.forgotten += st.forgotten;
      out.store.memory_bytes += st.memory_bytes;
    }
  }
  return out;
}

}  // namespace rk::service
