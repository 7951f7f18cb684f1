#include "server/http/connection_limits.h"

#include <algorithm>
#include <stdexcept>

namespace rk::http {

void check_per_ip_exempt(const std::vector<std::string>& list) { (void)detail::Networks(list); }

}  // namespace rk::http

namespace rk::http::detail {

Networks::Networks(const std::vector<std::string>& list) {
  for (const std::string& text : list) {
    const auto slash = text.find('/');
    error_code ec;
    const auto address = asio::ip::make_address(text.substr(0, slash), ec);
    if (!ec && slash != std::string::npos) {
      if (address.is_v4()) v4_.push_back(asio::ip::make_network_v4(text, ec));
      else v6_.push_back(asio::ip::make_network_v6(text, ec));
    } else if (!ec) {
      if (address.is_v4()) v4_.emplace_back(address.to_v4(), 32);
      else v6_.emplace_back(address.to_v6(), 128);
    }
    if (ec) {
      throw std::invalid_argument("ServerOptions::per_ip_exempt: '" + text +
                                  "' is not an IP address or CIDR range (like 10.0.0.0/8)");
    }
  }
}

bool Networks::contain(const asio::ip::address& a) const {
  if (a.is_v4()) {
    return std::any_of(v4_.begin(), v4_.end(), [&](const auto& n) {
      return asio::ip::network_v4(a.to_v4(), n.prefix_length()).canonical() == n.canonical();
    });
  }
  return std::any_of(v6_.begin(), v6_.end(), [&](const auto& n) {
    return asio::ip::network_v6(a.to_v6(), n.prefix_length()).canonical() == n.canonical();
  });
}

ConnectionLimits::ConnectionLimits(const ServerOptions& options)
    : max_(options.max_connections),
      max_per_ip_(options.max_connections_per_ip),
      exempt_(options.per_ip_exempt) {}

std::string ConnectionLimits::ip_key(const asio::ip::address& a) const {
  if (max_per_ip_ == 0 || a.is_unspecified() || exempt_.contain(a)) return {};
  if (a.is_v4()) {
    const auto bytes = a.to_v4().to_bytes();
    return std::string(bytes.begin(), bytes.end());
  }
  const auto bytes = a.to_v6().to_bytes();
  return std::string(bytes.begin(), bytes.begin() + 8);
}

bool ConnectionLimits::take_ip(const std::string& key) {
  std::lock_guard lock(mu_);
  std::size_t& n = per_ip_[key];
  if (n >= max_per_ip_) return false;  // n > 0: the entry was there before
  ++n;
  return true;
}

void ConnectionLimits::give_ip(const std::string& key) noexcept {
  std::lock_guard lock(mu_);
  const auto it = per_ip_.find(key);
  if (it != per_ip_.end() && --it->second == 0) per_ip_.erase(it);
}

}  // namespace rk::http::detail
