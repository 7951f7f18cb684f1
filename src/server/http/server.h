// server/http/server.h: ratekeeper's HTTP/1.1 server, the protocol adapter between sockets and a Handler.
//
// It parses requests, calls one function per request, and writes its answer; it knows nothing of rate limits.
// Boost.Beast and Asio stay inside the library's .cc files: nothing here needs them, so the code base does not
// compile Beast.
//
//   rk::server::http::Server server({.port = 8080, .threads = 2},
//                           [](const rk::server::http::Request& req, rk::server::http::Response& res) {
//                             if (req.path != "/hello") { res.status = 404; res.body = R"({"error":"no"})"; return; }
//                             res.headers.emplace_back("X-Seen", std::string(req.header("user-agent")));
//                             res.body = R"({"hello":"world"})";
//                           });
//   server.start();  // serving when it returns; port() tells the port picked for port 0
//   ...
//   server.stop();   // refuses new connections, lets requests in flight finish, joins its threads
//
// TLS (ServerOptions::tls): every connection handshakes first, on its worker's event loop like any read (a client
// that stalls holds no thread), under the limits below; reload_tls() swaps in rotated files for new connections.
//
// How it serves: `threads` threads, each with its own event loop, all accepting from one listening socket; each
// connection goes to the thread with the fewest connections and stays there (no thread per connection, no locks
// per request). HTTP/1.1
// connections are kept alive, HTTP/1.0 ones when the request asks; pipelined requests are answered in order.
// `Expect: 100-continue` is honoured. The server writes Content-Length (Content-Type from Response) and
// `Connection: close` when it will close; HEAD gets the head only; 204 and 304 get no body. A handler's own
// Content-Length, Transfer-Encoding and Connection headers are dropped (`Connection: close` still closes).
//
// Limits, defaults in brackets. Each refusal calls ServerEvents::on_bad_request(reason), and none can crash the
// process. Error answers are JSON: {"error":{"code":N,"reason":"<reason>","message":"<what was wrong>"}}.
//
//   input                                                        answer                reason
//   malformed request line, header or chunked body; a            400, then close       "malformed"
//     Transfer-Encoding other than chunked (any, in HTTP/1.0)
//   body over max_body_bytes [64 KiB], chunked or not            413, then close       "body_too_large"
//   request line and headers over max_header_bytes [16 KiB]      431, then close       "header_too_large"
//   request head not in within header_timeout [10 s] of its      408, then close       "timeout"
//     first byte, or its body not within a further header_timeout
//   a new connection that sends nothing within header_timeout    close                 "timeout"
//   with TLS: a handshake that fails (plaintext sent, no common  close                 "tls_handshake"
//     protocol, a client certificate missing or untrusted) or
//     that has not ended within header_timeout (a connection
//     closed having sent nothing is not counted)
//   a client that does not read its answers for idle_timeout     close                 "timeout"
//   a kept-alive connection idle for idle_timeout [60 s]         close                 (not counted)
//   a connection beyond max_connections_per_ip [256] from one    503, then close       "too_many_connections_from_ip"
//     IPv4 address or IPv6 /64 (per_ip_exempt ones aside)
//   a connection beyond max_connections [10,000] while every     503, then close       "too_many_connections"
//     connection is busy (otherwise the longest idle one is shed to make room)
//   a connection whose descriptor is fd_ceiling or past it       close                 "descriptor_reserve"
//   the handler throws, or answers what cannot be sent (status   500, connection kept  (on_handler_error)
//     outside 200-599; a header name not a token; CR, LF or NUL in a value)
// Idle connections give way (one client must not hold every place with kept-alive connections it does not use):
// while the server holds 3/4 of max_connections or more, a connection idle for busy_idle_timeout [5 s] is closed
// (a new one that has sent nothing included), and a new connection that finds every place taken sheds the
// connection of its thread that has been idle longest. Behind a proxy every connection comes from the proxy's
// address: list it in per_ip_exempt, so that only max_connections bounds it.
// Timeouts are checked every tenth of the shortest of header_timeout, idle_timeout and busy_idle_timeout (10 ms to
// 1 s), so one fires up to that much late. After a last answer (an error, `Connection: close`) the server shuts its
// side and discards what the client still sends, until the client closes too, for up to 1 s (0.1 s after a 503;
// never past idle_timeout), so that the client reads the answer rather than a reset; past 1 MiB discarded it closes
// as soon as the client's TCP has acknowledged the answer. Each connection keeps its buffers from one request to the
// next (a buffer grown past 64 KiB is released): a kept-alive request costs the server no heap allocation.
//
// Thread safety: the handler runs on the server's threads, many calls at once; it must not block for long, since
// the other connections of its thread wait. Events are called on the server's threads too (and on the thread of
// stop() for connections a timed-out drain leaves). start() and stop() may be called from any thread, stop() any
// number of times and from several threads at once; it is not async-signal-safe (call it from a thread that
// sigwait()s, not from a signal handler). stop() from inside a handler only begins the drain (a thread cannot
// join itself); the destructor, which must not run on a server thread, finishes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/tls/tls_files.h"

namespace rk::server::http {

struct Response;
struct PreparedTls;  // tls_context.h: a listener's TLS files, read and checked, not yet in use
namespace detail {
class ReplyChannel;  // reply_channel.h
}  // namespace detail

// An answer given later, from any thread: what Request::defer() hands out.
//
//   handler = [&](const Request& req, Response&) {
//     auto body = std::string(req.body);      // copy what the answer needs: the request's views die on return
//     store.lookup_async(body, [reply = req.defer()](std::string found) mutable {
//       reply.send({.body = std::move(found)});  // on any thread, once
//     });
//   };
//
// The connection waits (reading nothing more) until the answer is sent; pipelined requests behind it are answered
// after it, in order. A Reply dropped unsent answers 500 (and calls on_handler_error); one sent after its server
// has stopped, or its connection has gone, is discarded.
class Reply {
 public:
  Reply() = default;
  Reply(Reply&& other) noexcept;
  Reply& operator=(Reply&& other) noexcept;
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  ~Reply();

  void send(Response response);  // at most once; later calls do nothing
  explicit operator bool() const { return channel_ != nullptr; }

 private:
  friend class detail::ReplyChannel;
  Reply(std::shared_ptr<detail::ReplyChannel> channel, std::uint64_t seq) : channel_(std::move(channel)), seq_(seq) {}
  std::shared_ptr<detail::ReplyChannel> channel_;
  std::uint64_t seq_ = 0;
};

struct Field {
  std::string_view name;
  std::string_view value;
};

// Whether a field's name is `name`: case-insensitive, as field names compare (RFC 9110 5.1).
bool is_field(const Field& field, std::string_view name);

// One request, valid only during the handler call: every view points into the connection's buffers.
struct Request {
  std::string_view method;
  std::string_view target;  // path and query as received
  std::string_view path;    // the target up to '?'
  std::string_view query;   // after '?', "" if none
  std::string_view body;
  std::string_view remote_ip;     // the peer's address without the port; IPv4-mapped IPv6 shown as IPv4
  std::span<const Field> fields;  // every header field in the order received (trailers of a chunked body left out)

  // Case-insensitive; the first value, "" if absent.
  std::string_view header(std::string_view name) const;
  // Case-insensitive; every value, in order.
  std::vector<std::string_view> headers(std::string_view name) const;

  // Answer this request later through the Reply rather than through the handler's Response, which is then
  // ignored. At most once per request (a second call throws std::logic_error); null outside a server.
  Reply defer() const;

  detail::ReplyChannel* channel = nullptr;  // set by the server
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";  // "" for no Content-Type
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // More header fields, already as field lines ("Name: value\r\n" each), sent after `headers`: for a handler that
  // formats many in place, with no allocation per field (the server keeps its capacity from one request to the
  // next, as body's). Checked as `headers` are; Content-Length, Transfer-Encoding and Connection may not be among
  // them (a 500).
  std::string field_lines;

  // Begins a field line in field_lines and returns it, for the value to be appended; end_field() ends the line.
  std::string& begin_field(std::string_view name) { return field_lines.append(name).append(": "); }
  void end_field() { field_lines.append("\r\n"); }
};

// Called on a server thread; must not block long (answer through req.defer() instead of waiting). An exception it
// throws becomes a 500.
using Handler = std::function<void(const Request&, Response&)>;

// TLS on a listener: PEM files (server/tls/tls_files.h), read when the Server is made and again by
// Server::reload_tls(); a file that cannot be used is a TlsFileError naming it.
using TlsFiles = server::tls::TlsFiles;
using TlsFileError = server::tls::TlsFileError;

// Reads and checks the files as the Server would (the key matches the certificate); throws TlsFileError.
void check_tls_files(const TlsFiles& files);

struct ServerOptions {
  std::string address = "127.0.0.1";  // an IPv4 or IPv6 address, not a host name
  std::uint16_t port = 0;             // 0: a free port, see port()
  int threads = 2;
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_header_bytes = 16 * 1024;  // request line and header fields
  std::size_t max_connections = 10000;
  std::size_t max_connections_per_ip = 256;  // per IPv4 address or IPv6 /64; 0: no limit
  // Addresses ("10.0.0.7", "::1") or CIDR ranges ("10.0.0.0/8") max_connections_per_ip does not apply to: a proxy
  // in front of the server. A bad one throws std::invalid_argument from the constructor.
  std::vector<std::string> per_ip_exempt;
  std::chrono::milliseconds header_timeout{10000};    // a request head must be in within this of its first byte
  std::chrono::milliseconds idle_timeout{60000};      // a kept-alive connection may wait this long for its next request
  std::chrono::milliseconds busy_idle_timeout{5000};  // ...and this long while 3/4 of max_connections are taken
  std::chrono::milliseconds drain_timeout{5000};      // stop() waits this long for requests in flight
  // A new connection whose descriptor's number is this or more is closed at once, unanswered (0: none).
  // Descriptors are handed out lowest first, so the process then holds that many: those past it are kept for the
  // admin listener and the process itself (cli/serve/fd_budget.h).
  int fd_ceiling = 0;
  // Set: every connection speaks TLS (HTTPS). The handshake counts as the start of the first request: it must end
  // within header_timeout of the connection, and the connection holds its place under the limits meanwhile. A
  // connection the limits refuse is closed without an answer (a 503 would need a handshake first).
  std::optional<TlsFiles> tls;
};

// Optional hooks, for metrics and logs; called on the server's threads. An exception they throw is ignored.
struct ServerEvents {
  // "malformed", "body_too_large", "header_too_large", "timeout", "too_many_connections",
  // "too_many_connections_from_ip", "descriptor_reserve" or, with TLS, "tls_handshake" (a handshake that failed: no
  // common protocol, a missing or untrusted client certificate, plaintext sent to the TLS port).
  std::function<void(std::string_view reason)> on_bad_request;
  std::function<void(int delta)> on_connection;  // +1 when a connection is accepted, -1 when it is gone
  // The handler threw (what() of the exception) or answered something that cannot be sent. The client gets a
  // 500 that does not repeat this text.
  std::function<void(std::string_view what)> on_handler_error;
};

// Throws what Server's constructor would for a bad ServerOptions::per_ip_exempt (std::invalid_argument naming
// the entry), so that a command line can be checked before anything listens.
void check_per_ip_exempt(const std::vector<std::string>& list);

class Server {
 public:
  // Binds and listens, so a bad address or a port in use throws std::runtime_error here, like
  // "cannot listen on 127.0.0.1:80: Permission denied". Connections wait in the backlog until start().
  Server(ServerOptions options, Handler handler, ServerEvents events = {});
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void start();  // starts the threads; does nothing if started or stopped already
  // Rereads ServerOptions::tls's files (a certificate rotated): connections from now on use them, connections open
  // keep what they began with. Throws TlsFileError, keeping the files in use, if they cannot be used (a key that
  // does not match the certificate, as when one file is rewritten before the other); does nothing without TLS.
  // From any thread.
  void reload_tls();
  // reload_tls() in two steps, for listeners that share their files and must change together: prepare_tls() reads
  // and checks the files (throws TlsFileError, changing nothing; null without TLS), install_tls() gives what it read
  // to this server's new connections (nothing without TLS). Read once, installed in both, two listeners never serve
  // different certificates, and a read that fails changes neither. From any thread.
  std::shared_ptr<const PreparedTls> prepare_tls() const;
  // prepare_tls() from files already read and checked (server::tls::read_tls_files), for a read that listeners other
  // than HTTP ones (gRPC) take too. Null without TLS.
  std::shared_ptr<const PreparedTls> prepare_tls(std::shared_ptr<const server::tls::TlsPem> pem) const;
  void install_tls(std::shared_ptr<const PreparedTls> prepared);
  std::uint16_t port() const;  // the port listened on, valid from construction on
  // Stops accepting, closes idle connections, lets requests in flight finish and answers them with
  // `Connection: close` (up to drain_timeout), then joins the threads.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk::server::http
