// server/api/admin_throttle.h: wrong admin tokens counted per client address, so that guessing the token
// (--admin-token-file) goes at one guess per `refill` once a few are spent, whatever the guesser's speed.
//
//   AdminThrottle throttle;                                  // 10 wrong tokens at once, then one every 6 s
//   if (Nanos wait = throttle.wait(client, now); wait > Nanos{0}) ...   // 429, Retry-After: wait
//   if (!right) throttle.failed(client, now);
//
// Each address has a bucket of `burst` tries that refills one per `refill` (a GCRA schedule: one time per address,
// when its bucket is full again); only a wrong token spends one. The table holds at most `max_addresses`
// addresses, a few hundred KB. An address whose bucket is full is the same as one never seen, and is the one to go
// when a place is needed; when every place holds an address still refilling, the addresses without a place share
// one bucket: many addresses at once are throttled together rather than let through, and the table never grows.
// An IPv6 client is counted by its /64 (what one host is usually given), an IPv4 client by its address.
//
// Thread safety: every member may be called from any thread (one mutex; the admin listener has one thread).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ratekeeper/units.h"

namespace rk::server::api {

struct AdminThrottleOptions {
  int burst = 10;                          // wrong tokens an address may send at once
  Nanos refill = std::chrono::seconds(6);  // then one more each this long
  std::size_t max_addresses = 4096;        // the table's bound
};

class AdminThrottle {
 public:
  explicit AdminThrottle(AdminThrottleOptions options = {});

  // How long `client` (an address as the HTTP server gives it) must wait before its token is looked at; 0: now.
  Nanos wait(std::string_view client, Nanos now);
  // `client` sent a wrong token at `now`.
  void failed(std::string_view client, Nanos now);
  // Addresses in the table (for tests: the bound holds).
  std::size_t addresses() const;

 private:
  // The bucket of `key`: its place in the table, one made if there is room, else the shared one. mu_ held.
  Nanos* bucket(const std::string& key, Nanos now, bool make);
  // Drops the addresses whose bucket is full again, at most once per time one could be. mu_ held.
  void drop_refilled(Nanos now);

  const AdminThrottleOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Nanos> full_at_;  // mu_: per address, when its bucket is full again
  Nanos shared_full_at_{0};                         // mu_: the bucket of the addresses without a place
  Nanos next_drop_{0};                              // mu_: no address is refilled before this
};

}  // namespace rk::server::api
