// server/http/connection_limits.h (internal): the listener's connection limits (server/connections/limits.h, the
// rules every listener counts by) made from ServerOptions, and what a new connection was admitted under.
//
//   ConnectionLimits limits = connection_limits(options);  // throws std::invalid_argument for a bad per_ip_exempt
//   std::string key = limits.ip_key(address_of(peer));     // then as server/connections/limits.h says
//
// Thread safety: as ConnectionLimits'.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <memory>
#include <string>

#include "server/connections/limits.h"
#include "server/http/net.h"
#include "server/http/server.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace rk::server::http::detail {

using server::connections::ConnectionLimits;

// ServerOptions' limits, for ConnectionLimits.
server::connections::Limits connection_limits(const ServerOptions& options);

// A peer's address as the limits see it.
server::connections::Address address_of(const asio::ip::address& a);

// What a new connection was admitted under; nothing for one that is refused.
struct Admission {
  asio::ip::address peer;
  std::shared_ptr<boost::asio::ssl::context> tls;  // the TLS context the connection is served with; null: plaintext
  bool counted = false;                            // holds a place under max_connections
  std::string ip_key;                              // holds one under max_connections_per_ip too ("": none)
};

}  // namespace rk::server::http::detail
