#include "server/http/session.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <exception>
#include <limits>
#include <stdexcept>
#include <utility>

#include "server/http/reply_channel.h"
#include "server/http/response_writer.h"
#include "server/http/server_impl.h"
#include "server/http/worker.h"

namespace rk::server::http::detail {

namespace {

namespace bhttp = boost::beast::http;
using std::chrono::milliseconds;

constexpr std::size_t kReadSize = 4096;           // the least asked of each read; a longer head grows the buffer
constexpr std::size_t kBatchBytes = 64 * 1024;    // pipelined answers go out in writes of about this much
constexpr std::size_t kKeepCapacity = 64 * 1024;  // a buffer grown past this is released once its request is done
// After a final answer, what the client still sends is discarded for at most kLingerTime (see linger()); past
// kLingerBytes the connection closes as soon as the client has the answer.
constexpr milliseconds kLingerTime{1000};
constexpr milliseconds kRejectLinger{100};  // for a 503, which a flood of connections may be getting
constexpr std::size_t kLingerBytes = 1 << 20;
constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

Session::Session(tcp::socket socket, Worker& worker, Admission admission)
    : socket_(std::move(socket)),
      worker_(worker),
      server_(worker.server),
      counted_(admission.counted),
      ip_key_(std::move(admission.ip_key)),
      linger_time_(kLingerTime),
      tls_context_(std::move(admission.tls)) {
  error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  socket_.non_blocking(true, ec);  // write() first sends what fits at once, without an asynchronous operation
  if (tls_context_) tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, *tls_context_);
  if (!admission.peer.is_unspecified()) remote_ip_ = admission.peer.to_string();
  worker_.link(this);  // last: nothing after it throws
  if (counted_) server_.connection(+1);
}

Session::~Session() {
  if (channel_) channel_->close();
  worker_.unmark_idle(this);
  worker_.unlink(this);
  if (!ip_key_.empty()) server_.limits.give_ip(ip_key_);
  if (counted_) {
    server_.limits.give();
    server_.connection(-1);
  }
}

template <class F>
void Session::guarded(F&& f) noexcept {
  try {
    f();
  } catch (...) {  // out of memory, say: lose this connection, not the thread
    close();
  }
}

void Session::start() noexcept {
  guarded([&] {
    channel_ = std::make_shared<ReplyChannel>(worker_.ioc->get_executor(), weak_from_this(), this);
    wait_for_request(server_.options.header_timeout);
    if (tls_) return handshake();
    read();
  });
}

// Under the first request's deadline (on_tick closes a handshake not done by then) and sheddable like an idle
// connection, so that connections that never finish their handshake hold nothing for long.
void Session::handshake() {
  handshaking_ = true;
  tls_->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](error_code ec) {
    self->guarded([&] {
      self->handshaking_ = false;
      if (self->phase_ == Phase::kClosed) return;  // timed out, shed or stopped meanwhile: counted there if at all
      if (ec) {
        // Closed having sent nothing (a TCP health check, a port scan) is no failed handshake, as a plaintext
        // connection closed before its request is no bad request.
        const bool probe = ec == asio::ssl::error::stream_truncated &&
                           BIO_number_read(SSL_get_rbio(self->tls_->native_handle())) == 0;
        if (!probe) self->server_.bad_request("tls_handshake");
        return self->close();
      }
      self->read();
    });
  });
}

void Session::reject(std::string_view reason, std::string_view message) noexcept {
  guarded([&] {
    append_error(out_, 503, reason, message);
    final_ = true;
    linger_time_ = kRejectLinger;
    (void)write();
  });
}

void Session::read() {
  reading_ = true;
  const std::size_t size = std::max(kReadSize, buffer_.capacity() - buffer_.size());
  auto done = [self = shared_from_this()](error_code ec, std::size_t n) {
    self->guarded([&] { self->on_read(ec, n); });
  };
  if (tls_) return tls_->async_read_some(buffer_.prepare(size), std::move(done));
  socket_.async_read_some(buffer_.prepare(size), std::move(done));
}

void Session::on_read(error_code ec, std::size_t n) {
  reading_ = false;
  if (phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kLinger) {
    lingered_ += n;
    if (ec) return close();  // the client closed too (or reset): nothing is left to protect
    if (lingered_ > kLingerBytes && answer_received()) return close();
    return read();
  }
  if (final_) return;      // the last answer is being written; its completion lingers
  if (ec) return close();  // the client closed or reset; a request it had begun goes with it
  buffer_.commit(n);
  process();
}

// Parses and answers every complete request in the buffer, then writes the answers or reads for more; when the
// answers go out at once, goes on with what else the buffer holds.
void Session::process() {
  do {
    parse();
    if (out_.empty() || writing_) break;  // a write in flight: its completion writes the rest
  } while (write());
  if (!out_.empty() || writing_ || final_) return;  // on_write goes on
  if (phase_ == Phase::kWaiting) return;            // on_reply goes on
  if (closing_ && phase_ == Phase::kIdle && quiet()) return close();
  read();
}

void Session::parse() {
  while (!final_ && phase_ != Phase::kWaiting) {
    if (phase_ == Phase::kIdle) {
      skip_empty_lines();
      if (buffer_.size() == 0) break;
      begin_request();
    }
    if (buffer_.size() == 0) break;
    error_code ec;
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (phase_ == Phase::kHead && head_over_limit(used, ec)) ec = bhttp::error::header_limit;
    if (ec == bhttp::error::need_more) break;
    if (ec) {
      fail(ec);
      break;
    }
    if (phase_ == Phase::kHead && parser_->is_header_done()) on_head();
    if (parser_->is_done()) {
      answer();
      if (out_.size() >= kBatchBytes) break;
    } else if (used == 0) {
      break;
    }
  }
}

// RFC 9112 2.2: ignore empty lines before a request line (some clients send CRLF after a body).
void Session::skip_empty_lines() {
  const auto* p = static_cast<const char*>(buffer_.data().data());
  std::size_t n = 0;
  while (n < buffer_.size() && (p[n] == '\r' || p[n] == '\n')) ++n;
  buffer_.consume(n);
}

// Beast applies its header limit to the request line and to the fields apart; the limit is on the two together.
bool Session::head_over_limit(std::size_t used, error_code ec) {
  head_bytes_ += used;
  if (ec && ec != bhttp::error::need_more) return false;
  const std::size_t seen = head_bytes_ + (parser_->is_header_done() ? 0 : buffer_.size());
  return seen > server_.options.max_header_bytes;
}

void Session::begin_request() {
  worker_.unmark_idle(this);
  data_.clear();
  parser_.emplace(data_);
  parser_->header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(server_.options.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser_->body_limit(server_.options.max_body_bytes);
  phase_ = Phase::kHead;
  head_bytes_ = 0;
  deadline_ = Clock::now() + server_.options.header_timeout;
}

void Session::on_head() {
  phase_ = Phase::kBody;
  deadline_ = Clock::now() + server_.options.header_timeout;
  if (!parser_->is_done() && data_.expect_continue() && data_.version() >= 11 && buffer_.size() == 0) {
    out_.append(k100Continue);
  }
}

void Session::answer() {
  Request req;
  req.method = data_.method();
  req.target = data_.target();
  const auto q = req.target.find('?');
  req.path = req.target.substr(0, q);
  req.query = q == std::string_view::npos ? std::string_view{} : req.target.substr(q + 1);
  req.body = data_.body();
  req.remote_ip = remote_ip_;
  req.fields = data_.fields();
  req.channel = channel_.get();
  run_handler(req);
  if (deferring_) {
    phase_ = Phase::kWaiting;
    held_ = shared_from_this();
    return;
  }
  finish_answer();
}

void Session::finish_answer() {
  const bool keep = parser_->keep_alive() && !closing_ && !server_.stopping.load(std::memory_order_relaxed) &&
                    !asks_to_close(response_);
  append_response(out_, response_,
                  {.head_only = data_.method() == "HEAD", .keep_alive = keep, .http10 = data_.version() == 10});
  if (data_.body().capacity() > kKeepCapacity) std::string().swap(data_.body());
  if (response_.body.capacity() > kKeepCapacity) std::string().swap(response_.body);
  if (response_.field_lines.capacity() > kKeepCapacity) std::string().swap(response_.field_lines);
  if (buffer_.capacity() > kKeepCapacity && buffer_.size() < kReadSize) buffer_.shrink_to_fit();
  phase_ = Phase::kIdle;
  first_ = false;
  final_ = !keep;
}

// The handler fills response_, reused from the last request so that its strings keep their capacity.
void Session::run_handler(const Request& req) {
  response_.status = 200;
  response_.content_type.assign("application/json");
  response_.headers.clear();
  response_.body.clear();
  response_.field_lines.clear();
  deferring_ = false;
  std::string problem;
  try {
    server_.handler(req, response_);
    if (!deferring_) problem = check_response(response_);
  } catch (const std::exception& e) {
    problem = std::string("the handler threw: ") + e.what();
  } catch (...) {
    problem = "the handler threw something other than a std::exception";
  }
  if (problem.empty()) return;
  handler_failed(problem);
}

void Session::handler_failed(const std::string& problem) {
  deferring_ = false;  // a Reply the handler made before it threw is stale: its seq is passed
  ++seq_;
  server_.handler_error(problem);
  response_.status = 500;
  response_.content_type.assign("application/json");
  response_.headers.clear();
  response_.field_lines.clear();
  response_.body = error_json(500, "handler_error", "the server could not answer this request");
}

std::uint64_t Session::begin_deferral() {
  if (deferring_) throw std::logic_error("Request::defer() called twice for one request");
  deferring_ = true;
  return ++seq_;
}

void Session::on_reply(std::uint64_t seq, Response response, bool dropped) noexcept {
  // Stale, or the connection has closed meanwhile, or the answer is already in, waiting for a write to end.
  if (phase_ != Phase::kWaiting || seq != seq_ || replied_) return;
  const std::shared_ptr<Session> self = std::move(held_);
  guarded([&] {
    deferring_ = false;
    if (dropped) {
      handler_failed("the handler's deferred Reply was dropped unsent");
    } else {
      response_ = std::move(response);
      if (std::string problem = check_response(response_); !problem.empty()) handler_failed(problem);
    }
    // The answers before this one are still being written (a client that pipelines and reads slowly): out_ is
    // the write's until it ends, and on_write appends this answer then.
    if (writing_) {
      replied_ = true;
      return;
    }
    phase_ = Phase::kBody;
    finish_answer();
    process();
  });
}

std::shared_ptr<Session> Session::abandon() noexcept {
  if (channel_) channel_->close();
  ++seq_;
  return std::move(held_);
}

void Session::fail(error_code ec) {
  if (ec == bhttp::error::header_limit) {
    server_.bad_request("header_too_large");
    append_error(out_, 431, "header_too_large",
                 "the request head is over " + std::to_string(server_.options.max_header_bytes) + " bytes");
  } else if (ec == bhttp::error::body_limit) {
    server_.bad_request("body_too_large");
    append_error(out_, 413, "body_too_large",
                 "the request body is over " + std::to_string(server_.options.max_body_bytes) + " bytes");
  } else {
    server_.bad_request("malformed");
    append_error(out_, 400, "malformed", "malformed request: " + ec.message());
  }
  final_ = true;
}

// Plaintext answers are sent at once, as far as the socket's buffer takes them (nearly always whole): an
// asynchronous write would cost an operation, a completion handler and a trip through the event loop per request.
// What does not fit goes out asynchronously. True if all of out_ was sent and the connection goes on at once.
bool Session::write() {
  if (!tls_) {
    error_code ec;
    const std::size_t n = socket_.write_some(asio::buffer(out_), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      if (ec || n == out_.size()) return written(ec);
      out_.erase(0, n);
    }
  }
  writing_ = true;
  write_deadline_ = Clock::now() + server_.options.idle_timeout;
  auto done = [self = shared_from_this()](error_code ec, std::size_t) { self->guarded([&] { self->on_write(ec); }); };
  if (tls_) asio::async_write(*tls_, asio::buffer(out_), std::move(done));
  else asio::async_write(socket_, asio::buffer(out_), std::move(done));
  return false;
}

void Session::on_write(error_code ec) {
  writing_ = false;
  if (!written(ec)) return;
  if (std::exchange(replied_, false)) finish_answer();  // the deferred answer that came meanwhile
  process();                                            // pipelined requests may be waiting in the buffer
}

// out_ is sent (or the write failed): true if the connection goes on to read or answer more.
bool Session::written(error_code ec) {
  if (phase_ == Phase::kClosed) return false;
  if (ec) {
    close();
    return false;
  }
  out_.clear();
  if (out_.capacity() > kKeepCapacity) std::string().swap(out_);
  if (final_) {
    linger();
    return false;
  }
  if (phase_ == Phase::kIdle) wait_for_request(server_.options.idle_timeout);
  return true;
}

void Session::wait_for_request(Clock::duration timeout) {
  const auto now = Clock::now();
  deadline_ = now + timeout;
  idle_since = now;
  worker_.mark_idle(this);
}

// Closing a socket with unread data sends a reset, and a reset can destroy the answer before the client has it:
// a client still sending (a rejected body, say) would read "connection reset" rather than our 413. So after the
// last answer we shut our side (the client reads the answer, then end of stream) and discard what still comes,
// until the client closes too, or for at most linger_time_ (never past idle_timeout; on_tick closes then). A client
// that goes on sending past kLingerBytes is cut off sooner, but only once its TCP has acknowledged all we sent:
// before that, our answer may still be on its way (a segment lost and not yet resent, or held up on a busy machine
// behind the reset), and the reset would discard it from our send queue. Once acknowledged, it is in the client's
// receive buffer, which a reset on Linux leaves readable.
void Session::linger() {
  phase_ = Phase::kLinger;
  buffer_.clear();
  deadline_ = Clock::now() + std::min<Clock::duration>(linger_time_, server_.options.idle_timeout);
  if (tls_) return tls_linger();
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  if (!reading_) read();
}

// TLS ends with a close_notify, which only the TLS stream can send. Its shutdown sends one and then reads until the
// client's own (or its close), discarding what comes meanwhile, which is what lingering is for; the deadline bounds
// it. A read still in flight (a 408 written while a request was arriving) cannot share the stream with a shutdown:
// that client is not reading its answers anyway, and the connection closes.
void Session::tls_linger() {
  if (reading_) return close();
  tls_->async_shutdown([self = shared_from_this()](error_code) { self->guarded([&] { self->close(); }); });
}

// True once the client's TCP has acknowledged everything we sent, our FIN included (or if that cannot be told).
bool Session::answer_received() noexcept {
  int unacknowledged = 0;  // Linux: bytes we wrote that the peer has not acknowledged yet
  return ::ioctl(socket_.native_handle(), SIOCOUTQ, &unacknowledged) != 0 || unacknowledged == 0;
}

void Session::close() noexcept {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  worker_.unmark_idle(this);
  error_code ec;
  socket_.close(ec);  // pending operations end with operation_aborted; the last handler frees the session
}

// Idle, with nothing more from the client in our buffer or the kernel's.
bool Session::quiet() {
  error_code ec;
  return buffer_.size() == 0 && (socket_.available(ec) == 0 || ec);
}

void Session::on_tick(Clock::time_point now, bool busy) noexcept {
  guarded([&] {
    if (phase_ == Phase::kClosed) return;
    if (writing_) {
      if (now < write_deadline_) return;
      server_.bad_request("timeout");  // the client does not read what it asked for
      return close();
    }
    if (busy && idle && now >= idle_since + server_.options.busy_idle_timeout && now < deadline_) {
      return (void)shed();  // giving way is not the client's fault: not counted
    }
    if (phase_ == Phase::kWaiting || now < deadline_) return;  // a deferred answer is the handler's to bound
    switch (phase_) {
      case Phase::kIdle:
        // Connected, and sent nothing (or did not finish its TLS handshake) within header_timeout.
        if (first_) server_.bad_request(handshaking_ ? "tls_handshake" : "timeout");
        return close();
      case Phase::kHead:
      case Phase::kBody:
        server_.bad_request("timeout");
        append_error(
            out_, 408, "timeout",
            "the request did not arrive within " + std::to_string(server_.options.header_timeout.count()) + " ms");
        final_ = true;
        (void)write();  // alongside the pending read, which will see final_
        return;
      case Phase::kWaiting:
      case Phase::kLinger:
      case Phase::kClosed: return close();
    }
  });
}

bool Session::shed() noexcept {
  if (phase_ != Phase::kIdle || writing_ || final_ || !quiet()) return false;  // a request is on its way
  close();
  return true;
}

void Session::on_stop() noexcept {
  guarded([&] {
    closing_ = true;
    if (phase_ == Phase::kIdle && !writing_ && !final_ && quiet()) close();
  });
}

}  // namespace rk::server::http::detail
