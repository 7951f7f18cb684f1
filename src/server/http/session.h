// server/http/session.h (internal): one connection. It reads requests, has the handler answer them, and writes
// the answers in order, until either side closes or a limit is hit.
//
//   std::make_shared<Session>(std::move(socket), worker, admission)->start();    // admitted: serve it
//   std::make_shared<Session>(std::move(socket), worker, {})->reject(...);        // refused: 503, then close
//
// Thread safety / invariants:
// - Everything a Session does runs on its worker's thread; only Reply (reply_channel.h) reaches it from other
//   threads, by posting to that thread.
// - A Session is owned by the shared_ptrs in its pending completion handlers (and, while it waits for a deferred
//   answer, by itself). It has at most one read and one write in flight; both at once only while a final answer
//   (an error, a 408) goes out.
// - Its worker's sweep calls on_tick() for the timeouts; a session never arms a timer of its own.
// - After its last answer it lingers: it shuts its side and discards what the client still sends, for a bounded
//   time, so that closing does not reset the connection before the client has the answer (linger() in session.cc).
// - With TLS, the handshake comes first, in phase kIdle under the header timeout like a first request, and is
//   shed like an idle connection when the server is full; the TLS stream has one read and one write in flight at
//   most, as the socket does.
#pragma once

#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/connection_limits.h"
#include "server/http/net.h"
#include "server/http/request_parser.h"
#include "server/http/server.h"

namespace rk::server::http::detail {

class ReplyChannel;
class Worker;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Worker& worker, Admission admission);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() noexcept;
  void reject(std::string_view reason, std::string_view message) noexcept;  // 503, then close
  void on_tick(Clock::time_point now, bool busy) noexcept;
  bool shed() noexcept;  // idle, with nothing from the client pending: closes, true; otherwise false
  void on_stop() noexcept;

  // Reply's side: the handler deferred its answer; the answer arrives (on this session's thread).
  std::uint64_t begin_deferral();
  void on_reply(std::uint64_t seq, Response response, bool dropped) noexcept;
  // Server teardown: no deferred answer can arrive any more; returns the session's hold on itself, if any.
  std::shared_ptr<Session> abandon() noexcept;

  Session* prev = nullptr;  // Worker::sessions
  Session* next = nullptr;
  Session* idle_prev = nullptr;  // Worker::idle_front...idle_back, while `idle`
  Session* idle_next = nullptr;
  bool idle = false;
  Clock::time_point idle_since{};

 private:
  // kIdle: waiting for a request's first byte; kHead, kBody: a request is arriving; kWaiting: its handler deferred
  // the answer (nothing more is read meanwhile); kLinger: the final answer is out and our side is shut; what the
  // client still sends is discarded until it closes.
  enum class Phase : std::uint8_t { kIdle, kHead, kBody, kWaiting, kLinger, kClosed };

  template <class F>
  void guarded(F&& f) noexcept;  // any exception closes this connection, and only it
  void read();
  void on_read(error_code ec, std::size_t n);
  void process();
  void parse();
  void skip_empty_lines();
  void begin_request();
  bool head_over_limit(std::size_t used, error_code ec);
  void on_head();
  void answer();
  void finish_answer();
  void run_handler(const Request& req);
  void handler_failed(const std::string& problem);
  void fail(error_code ec);
  bool write();
  void on_write(error_code ec);
  bool written(error_code ec);
  void linger();
  bool answer_received() noexcept;
  void close() noexcept;
  bool quiet();
  void wait_for_request(Clock::duration timeout);
  void handshake();
  void tls_linger();

  tcp::socket socket_;
  Worker& worker_;
  Server::Impl& server_;
  const bool counted_;        // admitted under max_connections (a rejected one is not)
  const std::string ip_key_;  // and under max_connections_per_ip, if not ""
  std::string remote_ip_;
  boost::beast::flat_buffer buffer_;
  RequestData data_;
  std::optional<RequestParser> parser_;
  Response response_;
  std::string out_;  // answers not yet written, in order
  Phase phase_ = Phase::kIdle;
  bool reading_ = false;
  bool writing_ = false;
  bool final_ = false;                  // out_ ends with the connection's last answer
  bool first_ = true;                   // no request answered yet
  bool closing_ = false;                // the server is stopping: answer what has begun, then close
  Clock::time_point deadline_{};        // of the phase
  Clock::time_point write_deadline_{};  // while writing_
  Clock::duration linger_time_;         // how long lingering may last
  std::size_t head_bytes_ = 0;          // of the current request's head, parsed so far
  std::size_t lingered_ = 0;
  std::shared_ptr<ReplyChannel> channel_;  // made by start(), for deferred answers
  std::uint64_t seq_ = 0;                  // of the request whose answer is deferred
  bool deferring_ = false;                 // the running handler called defer()
  bool replied_ = false;                   // kWaiting: the deferred answer is in response_, out_ being written
  std::shared_ptr<Session> held_;          // while kWaiting: nothing else keeps the session alive
  // With TLS: the stream over socket_ (declared after it, so gone before it), and the context it was made from,
  // kept for the connection's life whatever Server::reload_tls() does meanwhile. Null for plaintext: each read and
  // write asks which, and that is all plaintext pays.
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls_;
  bool handshaking_ = false;
};

}  // namespace rk::server::http::detail
