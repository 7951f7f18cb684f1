// store/redis/url.h: where the Redis client connects and how: a node's address, the client's options, and the URL
// (`--redis`) that fills them.
//
//   auto options = rk::store::redis::ClientOptions::parse_url("redis+sentinel://10.0.0.1,10.0.0.2/mymaster");
//   options.command_timeout = std::chrono::milliseconds(50);   // the rest is not in a URL
//   rk::store::redis::endpoint_text(options.endpoints[0]);             // "10.0.0.1:26379"
//
// A host is an IP address or a DNS name; a name is kept as written and resolved by the client at every connection
// (transport.h), so that a name moved by a failover is followed. rediss:// (and rediss+cluster://,
// rediss+sentinel://) speak TLS, with the files of `tls`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rk::store::redis {

struct Endpoint {
  std::string host;
  std::uint16_t port = 6379;
};

// "127.0.0.1:6379", "[::1]:7000".
std::string endpoint_text(const Endpoint& e);

// "host:port", "[v6]:port" or a host alone (port 6379), as in URLs and redirects. Throws std::invalid_argument
// naming `where` (the URL, "a redirect") and the problem.
Endpoint parse_endpoint(std::string_view text, std::string_view where);

// TLS to Redis (rediss://): the server's certificate is checked against `ca_file` (empty: the system's CAs) and
// `server_name` (empty: the host it is reached by; an IP address is checked against the certificate's IP SANs).
// `cert_file` and `key_file` (both or neither): the client's own certificate, for servers that ask for one.
struct TlsOptions {
  std::string ca_file, cert_file, key_file, server_name;
  bool any() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty() || !server_name.empty(); }
};

struct ClientOptions {
  enum class Mode : std::uint8_t { kSingle, kCluster, kSentinel };
  // redis://[user[:password]@]host[:port][/db], redis+cluster://[user[:password]@]h1:p1,h2:p2,...,
  // redis+sentinel://[user[:password]@]h1:p1[,h2:p2]/primary-name; rediss in place of redis: over TLS. Throws
  // std::invalid_argument naming the problem.
  static ClientOptions parse_url(std::string_view url);

  Mode mode = Mode::kSingle;
  bool tls = false;  // rediss
  TlsOptions tls_files;
  std::vector<Endpoint> endpoints;  // the server; the cluster's seeds; the sentinels
  std::string primary_name;         // sentinel
  std::string username, password;
  // When given, the password is this file's content (without a final newline), read again whenever the file
  // changes (base/secret_file.h): it wins over `password`.
  std::string password_file;
  int db = 0;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds command_timeout{100};
  int connections_per_node = 2;
  // While commands await their replies, the client's thread polls its connections for up to `spin` before it
  // sleeps, so that a reply from a Redis close by is read without the wakeup a sleeping thread costs (about half of a
  // loopback round trip on a virtual machine). Spins that end with nothing to do are backed off: after n in a row,
  // the next 2^n waits (at most 256) sleep at once, so a Redis further away than `spin` costs little. 0: off.
  std::chrono::microseconds spin{0};
  std::chrono::milliseconds backoff_min{50};
  std::chrono::milliseconds backoff_max{2000};
};

// The URL again, without the password: "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster".
std::string describe(const ClientOptions& options);

}  // namespace rk::store::redis
