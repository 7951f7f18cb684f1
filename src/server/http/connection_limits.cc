#include "server/http/connection_limits.h"

#include <stdexcept>

namespace rk::server::http {

void check_per_ip_exempt(const std::vector<std::string>& list) {
  (void)detail::connection_limits({.per_ip_exempt = list});
}

}  // namespace rk::server::http

namespace rk::server::http::detail {

server::connections::Limits connection_limits(const ServerOptions& options) {
  try {
    (void)server::connections::Networks(options.per_ip_exempt);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("ServerOptions::per_ip_exempt: ") + e.what());
  }
  return {.max = options.max_connections,
          .max_per_ip = options.max_connections_per_ip,
          .per_ip_exempt = options.per_ip_exempt};
}

server::connections::Address address_of(const asio::ip::address& a) {
  server::connections::Address out;
  if (a.is_v4()) {
    const auto bytes = a.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  } else {
    out.v4 = false;
    const auto bytes = a.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  }
  return out;
}

}  // namespace rk::server::http::detail
