// server/http/server.h: an HTTP/1.1 server for ratekeeper's listeners, on Boost.Beast, with its types hidden.
//
//   rk::http::Server server({.address = "127.0.0.1", .port = 8080, .threads = 2},
//                           [](const rk::http::Request& req, rk::http::Response& res) { res.body = "{}"; });
//   server.start();   // bound and serving when it returns; port() tells a port picked for port 0
//   ...
//   server.stop();    // stops accepting, finishes requests in flight (up to drain_timeout), joins its threads
//
// Keep-alive (HTTP/1.1 by default, HTTP/1.0 on request), pipelined requests answered in order, on `threads`
// threads, each with its own event loop and its own SO_REUSEPORT acceptor: no thread per connection.
//
// Limits, each answered and counted through ServerEvents::on_bad_request(reason), never a crash:
//   malformed request                 400 and close            "malformed"
//   body over max_body_bytes          413 and close            "body_too_large"
//   head over max_header_bytes        431 and close            "header_too_large"
//   head not in within header_timeout 408 (if anything came) and close   "timeout"
//   idle keep-alive past idle_timeout close
//   over max_connections              503 and close            "too_many_connections"
//   the handler throws                500, connection kept     "handler_error"
// A kept-alive connection must send each next head within idle_timeout.
//
// Thread safety: the handler runs on a server thread, many at once; it must not block for long. stop() may be
// called from any thread, more than once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rk::http {

struct Request {
  std::string_view method;
  std::string_view target;  // path and query as received
  std::string_view path;    // without the query
  std::string_view query;
  std::string_view body;
  std::string_view remote_ip;
  std::string_view header(std::string_view name) const;                 // case-insensitive; "" if absent
  std::vector<std::string_view> headers(std::string_view name) const;   // every value, in order
  const void* message = nullptr;  // the parsed message, for header lookups
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

using Handler = std::function<void(const Request&, Response&)>;

struct ServerOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0: a free port, see port()
  int threads = 2;
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_connections = 10000;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds drain_timeout{5000};
};

struct ServerEvents {
  std::function<void(std::string_view reason)> on_bad_request;
  std::function<void(int delta)> on_connection;  // +1 when a connection opens, -1 when it closes
};

class Server {
 public:
  // Throws std::runtime_error naming the address if it cannot listen.
  Server(ServerOptions options, Handler handler, ServerEvents events = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void start();
  std::uint16_t port() const;
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk::http
