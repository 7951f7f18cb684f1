// server/api/client_address.h: IP addresses as forward-auth reads them from a peer or a proxy's header, and the
// text a client is keyed by: its address cut to a prefix, so that one IPv6 host (which is handed a whole /64) is
// one client, not 2^64 of them.
//
//   auto a = rk::server::api::parse_ip("[2001:db8:1:2:aaaa::1]:443");
//   rk::server::api::client_key(*a, {.ipv4 = 32, .ipv6 = 64})        // "2001:db8:1:2::/64"
//   rk::server::api::client_key(*rk::server::api::parse_ip("::ffff:192.0.2.7"), {})  // "192.0.2.7": IPv4-mapped is
//   IPv4
//
// Keys are in canonical text (RFC 5952 for IPv6, dotted quad for IPv4), with "/bits" only when the prefix is
// shorter than the address, so that every address of one prefix gives the same key byte for byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rules/config.h"

namespace rk::server::api {

struct IpAddress {
  std::uint8_t bytes[16] = {};  // IPv4 as ::ffff:a.b.c.d, like rules::Cidr
  bool v4() const;
};

// An address, possibly with spaces or tabs around it, as "[v6]:port" or "v4:port" as some proxies write it; nullopt
// for anything else (a host name, a zone index, garbage).
std::optional<IpAddress> parse_ip(std::string_view text);

// Canonical text of the whole address.
std::string format_ip(const IpAddress& a);

bool in_cidr(const IpAddress& a, const rules::Cidr& range);

struct ClientPrefixes {
  int ipv4 = 32;  // 1..32
  int ipv6 = 64;  // 1..128: a /64 is what one subscriber or one host is usually given
};

// The client's key: the address with the bits past its family's prefix cleared, then "/bits" unless whole.
std::string client_key(const IpAddress& a, ClientPrefixes prefixes);

}  // namespace rk::server::api
