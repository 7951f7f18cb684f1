// store/redis/url.h: where the Redis client connects and how: a node's address, the client's options, and the URL
// (`--redis`) that fills them.
//
//   auto options = rk::redis::ClientOptions::parse_url("redis+sentinel://10.0.0.1,10.0.0.2/mymaster");
//   options.command_timeout = std::chrono::milliseconds(50);   // the rest is not in a URL
//   rk::redis::endpoint_text(options.endpoints[0]);             // "10.0.0.1:26379"
//
// Host names are not resolved: an address is an IP address (or "localhost"), so that connecting never waits on DNS.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rk::redis {

struct Endpoint {
  std::string host;
  std::uint16_t port = 6379;
};

// "127.0.0.1:6379", "[::1]:7000".
std::string endpoint_text(const Endpoint& e);

// "host:port", "[v6]:port" or a host alone (port 6379), as in URLs and redirects. Throws std::invalid_argument
// naming `where` (the URL, "a redirect") and the problem.
Endpoint parse_endpoint(std::string_view text, std::string_view where);

struct ClientOptions {
  enum class Mode : std::uint8_t { kSingle, kCluster, kSentinel };
  // redis://[user[:password]@]host[:port][/db], redis+cluster://[user[:password]@]h1:p1,h2:p2,...,
  // redis+sentinel://[user[:password]@]h1:p1[,h2:p2]/primary-name. Throws std::invalid_argument naming the problem.
  static ClientOptions parse_url(std::string_view url);

  Mode mode = Mode::kSingle;
  std::vector<Endpoint> endpoints;  // the server; the cluster's seeds; the sentinels
  std::string primary_name;         // sentinel
  std::string username, password;
  int db = 0;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds command_timeout{100};
  int connections_per_node = 2;
  std::chrono::milliseconds backoff_min{50};
  std::chrono::milliseconds backoff_max{2000};
};

// The URL again, without the password: "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster".
std::string describe(const ClientOptions& options);

}  // namespace rk::redis
