#include "core/concurrency.h"

#include <algorithm>

namespace rk::core {

void expire_leases(ConcurrencyState& s, std::int64_t now) {
  std::erase_if(s.leases, [now](const HeldLease& l) { return l.expires_ns <= now; });
}

AcquireResult acquire_lease(const ConcurrencyParams& p, ConcurrencyState& s, std::int64_t now, const LeaseId& id) {
  expire_leases(s, now);
  AcquireResult r;
  if (s.leases.size() >= p.max_in_flight) {
    r.in_flight = static_cast<std::uint32_t>(s.leases.size());
    std::int64_t first = s.leases.empty() ? now : s.leases.front().expires_ns;
    for (const HeldLease& l : s.leases) first = std::min(first, l.expires_ns);
    r.retry_after_ns = std::max<std::int64_t>(first - now, 0);
    return r;
  }
  // Saturating: a clock near the end of time must not wrap the expiry into the past.
  const std::int64_t expires = now > INT64_MAX - p.lease_ttl_ns ? INT64_MAX : now + p.lease_ttl_ns;
  s.leases.push_back({id, expires});
  r.acquired = true;
  r.in_flight = static_cast<std::uint32_t>(s.leases.size());
  return r;
}

bool release_lease(ConcurrencyState& s, std::int64_t now, const LeaseId& id) {
  expire_leases(s, now);
  const auto it = std::find_if(s.leases.begin(), s.leases.end(), [&](const HeldLease& l) { return l.id == id; });
  if (it == s.leases.end()) return false;
  s.leases.erase(it);
  return true;
}

std::uint32_t leases_held(const ConcurrencyState& s, std::int64_t now) {
  return static_cast<std::uint32_t>(
      std::count_if(s.leases.begin(), s.leases.end(), [now](const HeldLease& l) { return l.expires_ns > now; }));
}

}  // namespace rk::core
