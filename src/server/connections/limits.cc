#include "server/connections/limits.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace rk::server::connections {

bool Address::unspecified() const noexcept {
  const std::size_t n = v4 ? 4 : 16;
  return std::all_of(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n), [](auto b) { return b == 0; });
}

Address address_of(const sockaddr* peer) {
  Address a;
  if (peer == nullptr) return a;
  if (peer->sa_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, peer, sizeof in);
    std::memcpy(a.bytes.data(), &in.sin_addr, 4);
  } else if (peer->sa_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, peer, sizeof in6);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      std::memcpy(a.bytes.data(), in6.sin6_addr.s6_addr + 12, 4);
    } else {
      a.v4 = false;
      std::memcpy(a.bytes.data(), in6.sin6_addr.s6_addr, 16);
    }
  }
  return a;
}

namespace {

// `text` as an address, or false.
bool parse_address(const std::string& text, Address& out) {
  if (inet_pton(AF_INET, text.c_str(), out.bytes.data()) == 1) {
    out.v4 = true;
    return true;
  }
  out.v4 = false;
  return inet_pton(AF_INET6, text.c_str(), out.bytes.data()) == 1;
}

// Whether the first `prefix` bits of a and b are equal.
bool same_prefix(const Address& a, const Address& b, unsigned prefix) noexcept {
  const unsigned whole = prefix / 8;
  if (std::memcmp(a.bytes.data(), b.bytes.data(), whole) != 0) return false;
  if (prefix % 8 == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - prefix % 8));
  return (a.bytes[whole] & mask) == (b.bytes[whole] & mask);
}

}  // namespace

Networks::Networks(const std::vector<std::string>& list) {
  for (const std::string& text : list) {
    const auto slash = text.find('/');
    Range r{};
    bool ok = parse_address(text.substr(0, slash), r.base);
    const unsigned bits = r.base.v4 ? 32 : 128;
    r.prefix = bits;
    if (ok && slash != std::string::npos) {
      const std::string_view digits = std::string_view(text).substr(slash + 1);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r.prefix);
      ok = !digits.empty() && ec == std::errc{} && end == digits.data() + digits.size() && r.prefix <= bits;
    }
    if (!ok) throw std::invalid_argument("'" + text + "' is not an IP address or CIDR range (like 10.0.0.0/8)");
    ranges_.push_back(r);
  }
}

bool Networks::contain(const Address& a) const noexcept {
  return std::any_of(ranges_.begin(), ranges_.end(),
                     [&](const Range& r) { return r.base.v4 == a.v4 && same_prefix(a, r.base, r.prefix); });
}

ConnectionLimits::ConnectionLimits(const Limits& limits)
    : max_(limits.max), max_per_ip_(limits.max_per_ip), exempt_(limits.per_ip_exempt) {}

std::string ConnectionLimits::ip_key(const Address& a) const {
  if (max_per_ip_ == 0 || a.unspecified() || exempt_.contain(a)) return {};
  return std::string(a.bytes.begin(), a.bytes.begin() + (a.v4 ? 4 : 8));
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

}  // namespace rk::server::connections
