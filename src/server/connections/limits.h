// server/connections/limits.h: how many connections a listener holds, and from whom; the rules every listener
// (the HTTP ones, gRPC) counts its connections by.
//
//   ConnectionLimits limits({.max = 10000, .max_per_ip = 256, .per_ip_exempt = {"127.0.0.0/8"}});  // bad exempt
//                                                     // entry: std::invalid_argument "'x' is not an IP address ..."
//   std::string key = limits.ip_key(peer);   // "" if max_per_ip does not apply to this peer
//   if (!key.empty() && !limits.take_ip(key)) { ...refuse: too_many_connections_from_ip... }
//   if (!limits.take() && !shed_an_idle_one()) { limits.give(); ...refuse: too_many_connections... }
//   ...when the connection is gone: limits.give(); limits.give_ip(key);
//
// Thread safety: every method from any thread. The total (max) is an atomic; the counts by address (max_per_ip) are
// under a mutex, taken once when a connection is accepted and once when it is gone, never per request.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

struct sockaddr;

namespace rk::server::connections {

// An IP address as the limits see it: IPv4 (an IPv4-mapped IPv6 address is IPv4) or IPv6, in network order.
struct Address {
  bool v4 = true;
  std::array<std::uint8_t, 16> bytes{};  // IPv4: the first 4
  bool unspecified() const noexcept;     // 0.0.0.0 or ::, also what a peer already gone reads as
};

// The peer address of an accepted socket (a sockaddr_in or sockaddr_in6); unspecified for another family.
Address address_of(const sockaddr* peer);

// A list of addresses ("10.0.0.7", "::1") and CIDR ranges ("10.0.0.0/8").
class Networks {
 public:
  // std::invalid_argument for an entry that is neither: "'10.0.0.0/33' is not an IP address or CIDR range (like
  // 10.0.0.0/8)".
  explicit Networks(const std::vector<std::string>& list);
  bool contain(const Address& a) const noexcept;

 private:
  struct Range {
    Address base;  // host bits cleared
    unsigned prefix;
  };
  std::vector<Range> ranges_;
};

struct Limits {
  std::size_t max = 10000;                 // connections at once
  std::size_t max_per_ip = 256;            // from one IPv4 address or IPv6 /64; 0: no limit
  std::vector<std::string> per_ip_exempt;  // addresses and ranges max_per_ip does not apply to (a proxy in front)
};

class ConnectionLimits {
 public:
  explicit ConnectionLimits(const Limits& limits);

  // Whom max_per_ip counts this peer as: its IPv4 address, or its IPv6 /64 (what one client is usually given, so
  // that a client cannot step around the bound through its own prefix); "" if the limit does not apply to it (no
  // limit, an exempt address, a peer already gone).
  std::string ip_key(const Address& a) const;
  bool take_ip(const std::string& key);  // false: the address has its fill
  void give_ip(const std::string& key) noexcept;

  // Counts one more connection; false if it had no place under max. It is counted all the same: the caller sheds
  // an idle connection to make room, or give()s it back.
  bool take() noexcept { return total_.fetch_add(1, std::memory_order_relaxed) < max_; }
  void give() noexcept { total_.fetch_sub(1, std::memory_order_relaxed); }

  bool busy() const noexcept {  // 3/4 of max or more are taken: idle connections give way
    return total_.load(std::memory_order_relaxed) * 4 >= max_ * 3;
  }
  std::size_t count() const noexcept { return total_.load(std::memory_order_relaxed); }
  std::size_t max() const noexcept { return max_; }
  std::size_t max_per_ip() const noexcept { return max_per_ip_; }

 private:
  const std::size_t max_;
  const std::size_t max_per_ip_;
  const Networks exempt_;
  std::atomic<std::size_t> total_{0};
  std::mutex mu_;
  std::unordered_map<std::string, std::size_t> per_ip_;  // under mu_: admitted connections by ip_key()
};

}  // namespace rk::server::connections
