// server/api/admin_throttle.cc: a bucket of wrong tokens per address, in a table that never grows past its bound.
#include "server/api/admin_throttle.h"

#include <algorithm>

#include "server/api/client_address.h"

namespace rk::server::api {

namespace {

// The address by which a client is counted: an IPv6 host by its /64, so that it cannot step around its bucket
// through its own prefix. Text that is no address (none in a server; a test's request) is counted as it is.
std::string address_key(std::string_view client) {
  const auto ip = parse_ip(client);
  return ip ? client_key(*ip, {}) : std::string(client);
}

}  // namespace

AdminThrottle::AdminThrottle(AdminThrottleOptions options) : options_(options) {}

Nanos AdminThrottle::wait(std::string_view client, Nanos now) {
  std::lock_guard lock(mu_);
  const Nanos* full_at = bucket(address_key(client), now, false);
  if (full_at == nullptr) return Nanos{0};
  // A try is left while the bucket is less than a whole `burst` from full.
  const Nanos tolerance = options_.refill * (std::max(options_.burst, 1) - 1);
  return std::max(Nanos{0}, *full_at - now - tolerance);
}

void AdminThrottle::failed(std::string_view client, Nanos now) {
  std::lock_guard lock(mu_);
  Nanos* full_at = bucket(address_key(client), now, true);
  *full_at = std::max(*full_at, now) + options_.refill;
  if (full_at != &shared_full_at_) next_drop_ = std::min(next_drop_, *full_at);
}

std::size_t AdminThrottle::addresses() const {
  std::lock_guard lock(mu_);
  return full_at_.size();
}

Nanos* AdminThrottle::bucket(const std::string& key, Nanos now, bool make) {
  if (const auto it = full_at_.find(key); it != full_at_.end()) return &it->second;
  if (full_at_.size() >= options_.max_addresses) drop_refilled(now);
  if (full_at_.size() < options_.max_addresses) {
    return make ? &full_at_.emplace(key, now).first->second : nullptr;  // nullptr: a full bucket, never spent
  }
  return &shared_full_at_;
}

void AdminThrottle::drop_refilled(Nanos now) {
  if (now < next_drop_) return;  // none is full before then: a flood of new addresses costs no walk each
  Nanos next = Nanos::max();
  for (auto it = full_at_.begin(); it != full_at_.end();) {
    if (it->second <= now) {
      it = full_at_.erase(it);
    } else {
      next = std::min(next, it->second);
      ++it;
    }
  }
  next_drop_ = next;
}

}  // namespace rk::server::api
