// server/http/connection_limits.h (internal): how many connections the server holds, and from whom.
//
//   ConnectionLimits limits(options);        // throws std::invalid_argument for a bad per_ip_exempt entry
//   std::string key = limits.ip_key(peer);   // "" if max_connections_per_ip does not apply to this peer
//   if (!key.empty() && !limits.take_ip(key)) { ...503 too_many_connections_from_ip... }
//   if (!limits.take() && !shed_an_idle_one()) { limits.give(); ...503 too_many_connections... }
//   ...when the connection is gone: limits.give(); limits.give_ip(key);
//
// Thread safety: every method from any thread. The total (max_connections) is an atomic, counted across the
// workers; the counts by address (max_connections_per_ip) are under a mutex, taken once when a connection is
// accepted and once when it is gone, never per request.
#pragma once

#include <atomic>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/http/net.h"
#include "server/http/server.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace rk::http::detail {

// ServerOptions::per_ip_exempt, parsed.
class Networks {
 public:
  explicit Networks(const std::vector<std::string>& list);  // std::invalid_argument naming a bad entry
  bool contain(const asio::ip::address& a) const;

 private:
  std::vector<asio::ip::network_v4> v4_;
  std::vector<asio::ip::network_v6> v6_;
};

// What a new connection was admitted under; nothing for one that is refused.
struct Admission {
  asio::ip::address peer;
  std::shared_ptr<boost::asio::ssl::context> tls;  // the TLS context the connection is served with; null: plaintext
  bool counted = false;  // holds a place under max_connections
  std::string ip_key;    // holds one under max_connections_per_ip too ("": none)
};

class ConnectionLimits {
 public:
  explicit ConnectionLimits(const ServerOptions& options);

  // Whom max_connections_per_ip counts this peer as: its IPv4 address, or its IPv6 /64 (what one client is
  // usually given); "" if the limit does not apply to it (no limit, an exempt address, a peer already gone).
  std::string ip_key(const asio::ip::address& a) const;
  bool take_ip(const std::string& key);  // false: the address has its fill
  void give_ip(const std::string& key) noexcept;

  // Counts one more connection; false if it had no place under max_connections. It is counted all the same:
  // the caller sheds an idle connection to make room, or give()s it back.
  bool take() noexcept { return total_.fetch_add(1, std::memory_order_relaxed) < max_; }
  void give() noexcept { total_.fetch_sub(1, std::memory_order_relaxed); }

  bool busy() const noexcept {  // 3/4 of max_connections or more are taken: idle connections give way
    return total_.load(std::memory_order_relaxed) * 4 >= max_ * 3;
  }

 private:
  const std::size_t max_;
  const std::size_t max_per_ip_;
  const Networks exempt_;
  std::atomic<std::size_t> total_{0};
  std::mutex mu_;
  std::unordered_map<std::string, std::size_t> per_ip_;  // under mu_: admitted connections by ip_key()
};

}  // namespace rk::http::detail
