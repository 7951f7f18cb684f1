#include "server/api/client_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "server/http/ascii.h"

namespace rk::server::api {

namespace {

constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// Clears every bit of `bytes` from bit `from` (counted from the first byte's top bit) on.
void clear_from(std::uint8_t* bytes, int from, int total_bits) {
  for (int bit = from; bit < total_bits; ++bit) bytes[bit / 8] &= static_cast<std::uint8_t>(~(0x80 >> (bit % 8)));
}

}  // namespace

bool IpAddress::v4() const { return std::memcmp(bytes, kMapped, 12) == 0; }

std::optional<IpAddress> parse_ip(std::string_view text) {
  text = server::http::detail::trim_ows(text);
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  if (s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos) return std::nullopt;
    s = s.substr(1, close - 1);
  } else if (std::count(s.begin(), s.end(), ':') == 1) {
    s.resize(s.find(':'));
  }
  IpAddress a;
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    std::memcpy(a.bytes, kMapped, 12);
    std::memcpy(a.bytes + 12, &v4, 4);
  } else if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(a.bytes, &v6, 16);
  } else {
    return std::nullopt;
  }
  return a;
}

std::string format_ip(const IpAddress& a) {
  char buf[INET6_ADDRSTRLEN];
  if (a.v4()) {
    inet_ntop(AF_INET, a.bytes + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, a.bytes, buf, sizeof buf);
  }
  return buf;
}

bool in_cidr(const IpAddress& a, const rules::Cidr& c) {
  int bits = c.prefix;
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const auto mask = static_cast<std::uint8_t>(bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff);
    if ((a.bytes[i] & mask) != (c.bytes[i] & mask)) return false;
  }
  return true;
}

std::string client_key(const IpAddress& a, ClientPrefixes prefixes) {
  IpAddress masked = a;
  const bool v4 = a.v4();
  const int total = v4 ? 32 : 128;
  const int bits = std::clamp(v4 ? prefixes.ipv4 : prefixes.ipv6, 0, total);
  clear_from(v4 ? masked.bytes + 12 : masked.bytes, bits, total);
  std::string key = format_ip(masked);
  if (bits < total) key += "/" + std::to_string(bits);
  return key;
}

}  // namespace rk::server::api
