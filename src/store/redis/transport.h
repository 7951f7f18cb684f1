// store/redis/transport.h: one connection's bytes to a Redis node or a sentinel: its host name resolved (again at
// every connection, so that a name a failover moved is followed), TCP, and for rediss:// TLS over it, with the
// server's certificate and name checked.
//
//   auto tls = rk::store::redis::make_tls_context(options);  // null for redis://; throws naming a bad flag or file
//   auto link = std::make_shared<rk::store::redis::Link>(ioc, tls, options.tls_files.server_name);
//   link->open(endpoint, [](const std::optional<LinkFailure>& f) { ... });  // resolved, connected, TLS shaken
//   link->write(std::move(bytes), [](error_code) { ... });
//   link->read([](error_code, std::string_view bytes) { ... });
//
// A link connects once: after close() or a failure, a new one is made. Its handlers hold it (a shared_ptr), so that
// a closed link's late completions find its buffers alive; no callback runs after close(). The caller bounds open()
// with its own deadline (close() ends it): resolving, connecting and the handshake all count.
//
// Thread safety: none; a link is used on its io_context's thread only.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "store/redis/url.h"

namespace boost::asio::ssl {
class context;
}

namespace rk::store::redis {

// The TLS settings every connection of a client shares: the CA, the client's certificate and key, read at once.
// Null when `options.tls` is false. Throws std::invalid_argument naming the flag (--redis-tls-ca, ...) and the file
// for a file that cannot be read or holds no certificate or key, a certificate without its key, or a TLS file with
// a redis:// URL.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const ClientOptions& options);

struct LinkFailure {
  std::string message;  // "cannot connect to Redis at ...: Connection refused", "TLS handshake with ... failed: ..."
  bool tls = false;     // the TLS handshake failed (a certificate refused, a server not speaking TLS)
};

class Link : public std::enable_shared_from_this<Link> {
 public:
  // `tls` null: plain TCP. `server_name`: the name the certificate must carry (empty: the endpoint's host).
  Link(boost::asio::io_context& ioc, std::shared_ptr<boost::asio::ssl::context> tls, std::string server_name);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  using Opened = std::function<void(const std::optional<LinkFailure>&)>;
  void open(const Endpoint& endpoint, Opened done);
  // One write at a time; `bytes` are kept until it completes.
  void write(std::string bytes, std::function<void(boost::system::error_code)> done);
  // One read at a time: what arrived, valid during the call.
  void read(std::function<void(boost::system::error_code, std::string_view)> done);
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk::store::redis
