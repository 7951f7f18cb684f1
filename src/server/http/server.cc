// The connections, threads and listening socket behind server.h.
//
// Thread safety / invariants:
// - Each Worker owns an io_context run by exactly one thread. A Session lives on the worker that accepted it, and
//   everything it does (reads, writes, the handler, timeouts, stop) runs on that thread: no locks per request.
// - The workers share one listening socket, each through its own descriptor (a dup), so a thread busy in a
//   handler does not take new connections from an idle one, and binding fails as usual if the port is taken
//   (SO_REUSEPORT would let a second server on the same port share it silently).
// - A Session is owned by the shared_ptrs in its pending completion handlers. It has at most one read and one
//   write in flight; both at once only while a final answer (an error, a 408) goes out. Each worker keeps an
//   intrusive list of its sessions, for the timeout sweep and for stop().
// - Server::Impl::connections counts the sessions admitted under max_connections, across workers (atomic);
//   `per_ip` counts them by address under `ip_mu` (taken once when a connection is accepted and once when it is
//   gone, never per request); `stopping` is set once by stop(); the rest of Impl is written before the threads
//   start.
// - Each Worker also keeps its idle sessions (waiting for a request, nothing pending) in a second intrusive list,
//   longest idle first, so that a new connection finding every place taken can shed one in O(1).
#include "server/http/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "server/http/request_parser.h"
#include "server/http/response_writer.h"

namespace rk::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kReadSize = 4096;           // the least asked of each read; a longer head grows the buffer
constexpr std::size_t kBatchBytes = 64 * 1024;    // pipelined answers go out in writes of about this much
constexpr std::size_t kKeepCapacity = 64 * 1024;  // a buffer grown past this is released once its request is done
constexpr std::size_t kLingerBytes = 1 << 20;     // after a final answer, discard at most this much...
constexpr milliseconds kLingerTime{1000};         // ...for at most this long, before closing
constexpr milliseconds kRejectLinger{100};        // for a 503, which a flood of connections may be getting
constexpr milliseconds kAcceptRetry{10};          // after accept fails (out of descriptors, say)
constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

template <class F, class... Args>
void notify(const F& hook, Args&&... args) noexcept {
  if (!hook) return;
  try {
    hook(std::forward<Args>(args)...);
  } catch (...) {  // a metrics or log hook must not take a connection down
  }
}

// The peer's address, IPv4-mapped IPv6 as IPv4; unspecified if the peer is already gone.
asio::ip::address peer_address(const tcp::socket& socket) {
  error_code ec;
  const auto address = socket.remote_endpoint(ec).address();
  if (ec) return {};
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address;
}

// Timeouts are checked by a sweep over the worker's sessions, so a request costs no timer operation; the sweep
// runs ten times per shortest timeout.
Clock::duration sweep_interval(const ServerOptions& o) {
  const auto shortest = std::min({o.header_timeout, o.idle_timeout, o.busy_idle_timeout});
  return std::clamp<Clock::duration>(shortest / 10, milliseconds(10), milliseconds(1000));
}

// ServerOptions::per_ip_exempt, parsed.
struct Networks {
  std::vector<asio::ip::network_v4> v4;
  std::vector<asio::ip::network_v6> v6;

  explicit Networks(const std::vector<std::string>& list) {
    for (const std::string& text : list) {
      const auto slash = text.find('/');
      error_code ec;
      const auto address = asio::ip::make_address(text.substr(0, slash), ec);
      if (!ec && slash != std::string::npos) {
        if (address.is_v4()) v4.push_back(asio::ip::make_network_v4(text, ec));
        else v6.push_back(asio::ip::make_network_v6(text, ec));
      } else if (!ec) {
        if (address.is_v4()) v4.emplace_back(address.to_v4(), 32);
        else v6.emplace_back(address.to_v6(), 128);
      }
      if (ec) {
        throw std::invalid_argument("ServerOptions::per_ip_exempt: '" + text +
                                    "' is not an IP address or CIDR range (like 10.0.0.0/8)");
      }
    }
  }
  bool contain(const asio::ip::address& a) const {
    if (a.is_v4()) {
      return std::any_of(v4.begin(), v4.end(), [&](const auto& n) {
        return asio::ip::network_v4(a.to_v4(), n.prefix_length()).canonical() == n.canonical();
      });
    }
    return std::any_of(v6.begin(), v6.end(), [&](const auto& n) {
      return asio::ip::network_v6(a.to_v6(), n.prefix_length()).canonical() == n.canonical();
    });
  }
};

}  // namespace

class Worker;
class Session;

}  // namespace rk::http

namespace rk::http::detail {

// The way back to a connection for a deferred answer (Reply). Thread safety: deliver() from any thread; open()
// and close() on the connection's thread. `mu_` guards `open_`, closed before the connection or its event loop
// goes, so that a late Reply never touches either.
class ReplyChannel : public std::enable_shared_from_this<ReplyChannel> {
 public:
  ReplyChannel(asio::io_context::executor_type executor, std::weak_ptr<Session> session, Session* raw)
      : executor_(executor), session_(std::move(session)), raw_(raw) {}

  Reply defer();  // from the handler, on the connection's thread
  void deliver(std::uint64_t seq, Response response, bool dropped) noexcept;
  void close() noexcept {
    std::lock_guard lock(mu_);
    open_ = false;
  }

 private:
  asio::io_context::executor_type executor_;
  std::weak_ptr<Session> session_;
  Session* raw_;  // for defer(), which runs inside the session's own handler call
  std::mutex mu_;
  bool open_ = true;
};

}  // namespace rk::http::detail

namespace rk::http {

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  ServerEvents events;
  std::uint16_t port = 0;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::optional<Networks> exempt;  // set by the constructor

  std::mutex ip_mu;
  std::unordered_map<std::string, std::size_t> per_ip;  // under ip_mu: admitted connections by ip_key()

  // Whom max_connections_per_ip counts this peer as: its IPv4 address, or its IPv6 /64 (what one client is
  // usually given); "" if the limit does not apply to it.
  std::string ip_key(const asio::ip::address& a) const;
  bool take_ip(const std::string& key);  // false: the address has its fill
  void give_ip(const std::string& key) noexcept;
  bool busy() const noexcept {  // idle connections give way from here on
    return connections.load(std::memory_order_relaxed) * 4 >= options.max_connections * 3;
  }

  std::mutex mu;  // start() and stop() from outside the server's threads
  bool started = false;
  bool joined = false;
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::size_t running = 0;  // threads still in their event loop; under done_mu

  // The listening socket, which each worker's acceptor holds a dup of: shutting it down (stop()) refuses new
  // connections at once, even while every thread is busy in a handler.
  int listen_fd = -1;
  std::vector<std::unique_ptr<Worker>> workers;  // last: destroyed first, while the members above are alive

  ~Impl() { close_listener(); }
  void close_listener() noexcept {
    if (listen_fd >= 0) ::close(listen_fd);
    listen_fd = -1;
  }

  void bad_request(std::string_view reason) const noexcept { notify(events.on_bad_request, reason); }
  void connection(int delta) const noexcept { notify(events.on_connection, delta); }
  void handler_error(std::string_view what) const noexcept { notify(events.on_handler_error, what); }
  bool on_own_thread() const;
  void request_stop();
  void bind();
  void run(Worker& worker);
};

namespace {
thread_local const Server::Impl* tls_server = nullptr;  // the server whose thread this is, if any
}  // namespace

bool Server::Impl::on_own_thread() const { return tls_server == this; }

// One thread's event loop, its descriptor of the listening socket, and its sessions.
class Worker {
 public:
  explicit Worker(Server::Impl& s) : server(s), tick(sweep_interval(s.options)) {
    ioc.emplace(1);
    acceptor.emplace(*ioc);
    sweep.emplace(*ioc);
    retry.emplace(*ioc);
  }
  ~Worker();

  void accept();
  void arm_sweep();
  void begin_stop();
  void link(Session* s) noexcept;
  void unlink(Session* s) noexcept;
  void mark_idle(Session* s) noexcept;    // s begins to wait for a request: it goes to the back of `idle`
  void unmark_idle(Session* s) noexcept;  // s is no longer idle (or never was)

  Server::Impl& server;
  const Clock::duration tick;
  Session* sessions = nullptr;  // intrusive list, this worker's thread only
  Session* idle_front = nullptr;  // idle sessions, longest idle first; this worker's thread only
  Session* idle_back = nullptr;
  bool stopping = false;        // this worker's thread only
  std::thread thread;
  std::optional<asio::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> sweep;
  std::optional<asio::steady_timer> retry;

 private:
  void on_accept(tcp::socket socket);
  bool shed_idle() noexcept;  // closes the session idle longest, if any
};

// What a new connection was admitted under; nothing for one that is refused.
struct Admission {
  asio::ip::address peer;
  bool counted = false;  // holds a place under max_connections
  std::string ip_key;    // holds one under max_connections_per_ip too ("": none)
};

// One connection: read requests, answer them in order, until either side closes or a limit is hit.
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
  void skip_empty_lines();
  void begin_request();
  bool head_over_limit(std::size_t used, error_code ec);
  void on_head();
  void answer();
  void finish_answer();
  void run_handler(const Request& req);
  void handler_failed(const std::string& problem);
  void fail(error_code ec);
  void write();
  void on_write(error_code ec);
  void linger();
  void close() noexcept;
  bool quiet();
  void wait_for_request(Clock::duration timeout);

  tcp::socket socket_;
  Worker& worker_;
  Server::Impl& server_;
  const bool counted_;        // admitted under max_connections (a rejected one is not)
  const std::string ip_key_;  // and under max_connections_per_ip, if not ""
  std::string remote_ip_;
  beast::flat_buffer buffer_;
  detail::RequestData data_;
  std::optional<detail::RequestParser> parser_;
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
  Clock::duration linger_time_ = kLingerTime;
  std::size_t head_bytes_ = 0;  // of the current request's head, parsed so far
  std::size_t lingered_ = 0;
  std::shared_ptr<detail::ReplyChannel> channel_;  // made by start(), for deferred answers
  std::uint64_t seq_ = 0;                          // of the request whose answer is deferred
  bool deferring_ = false;                         // the running handler called defer()
  std::shared_ptr<Session> held_;                  // while kWaiting: nothing else keeps the session alive
};

// ---- Session ----

Session::Session(tcp::socket socket, Worker& worker, Admission admission)
    : socket_(std::move(socket)),
      worker_(worker),
      server_(worker.server),
      counted_(admission.counted),
      ip_key_(std::move(admission.ip_key)) {
  error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  if (!admission.peer.is_unspecified()) remote_ip_ = admission.peer.to_string();
  worker_.link(this);  // last: nothing after it throws
  if (counted_) server_.connection(+1);
}

Session::~Session() {
  if (channel_) channel_->close();
  worker_.unmark_idle(this);
  worker_.unlink(this);
  if (!ip_key_.empty()) server_.give_ip(ip_key_);
  if (counted_) {
    server_.connections.fetch_sub(1, std::memory_order_relaxed);
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
    channel_ = std::make_shared<detail::ReplyChannel>(worker_.ioc->get_executor(), weak_from_this(), this);
    wait_for_request(server_.options.header_timeout);
    read();
  });
}

void Session::reject(std::string_view reason, std::string_view message) noexcept {
  guarded([&] {
    detail::append_error(out_, 503, reason, message);
    final_ = true;
    linger_time_ = kRejectLinger;
    write();
  });
}

void Session::read() {
  reading_ = true;
  const std::size_t size = std::max(kReadSize, buffer_.capacity() - buffer_.size());
  socket_.async_read_some(buffer_.prepare(size), [self = shared_from_this()](error_code ec, std::size_t n) {
    self->guarded([&] { self->on_read(ec, n); });
  });
}

void Session::on_read(error_code ec, std::size_t n) {
  reading_ = false;
  if (phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kLinger) {
    lingered_ += n;
    if (ec || lingered_ > kLingerBytes) return close();
    return read();
  }
  if (final_) return;      // the last answer is being written; its completion lingers
  if (ec) return close();  // the client closed or reset; a request it had begun goes with it
  buffer_.commit(n);
  process();
}

// Parses and answers every complete request in the buffer, then writes the answers or reads for more.
void Session::process() {
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
  if (!out_.empty()) return write();
  if (phase_ == Phase::kWaiting) return;  // on_reply goes on
  if (closing_ && phase_ == Phase::kIdle && quiet()) return close();
  read();
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
                    !detail::asks_to_close(response_);
  detail::append_response(out_, response_,
                          {.head_only = data_.method() == "HEAD", .keep_alive = keep, .http10 = data_.version() == 10});
  if (data_.body().capacity() > kKeepCapacity) std::string().swap(data_.body());
  if (response_.body.capacity() > kKeepCapacity) std::string().swap(response_.body);
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
  deferring_ = false;
  std::string problem;
  try {
    server_.handler(req, response_);
    if (!deferring_) problem = detail::check_response(response_);
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
  response_.body = detail::error_json(500, "handler_error", "the server could not answer this request");
}

std::uint64_t Session::begin_deferral() {
  if (deferring_) throw std::logic_error("Request::defer() called twice for one request");
  deferring_ = true;
  return ++seq_;
}

void Session::on_reply(std::uint64_t seq, Response response, bool dropped) noexcept {
  if (phase_ != Phase::kWaiting || seq != seq_) return;  // stale, or the connection has closed meanwhile
  const std::shared_ptr<Session> self = std::move(held_);
  guarded([&] {
    deferring_ = false;
    phase_ = Phase::kBody;
    if (dropped) {
      handler_failed("the handler's deferred Reply was dropped unsent");
    } else {
      response_ = std::move(response);
      if (std::string problem = detail::check_response(response_); !problem.empty()) handler_failed(problem);
    }
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
    detail::append_error(out_, 431, "header_too_large",
                         "the request head is over " + std::to_string(server_.options.max_header_bytes) + " bytes");
  } else if (ec == bhttp::error::body_limit) {
    server_.bad_request("body_too_large");
    detail::append_error(out_, 413, "body_too_large",
                         "the request body is over " + std::to_string(server_.options.max_body_bytes) + " bytes");
  } else {
    server_.bad_request("malformed");
    detail::append_error(out_, 400, "malformed", "malformed request: " + ec.message());
  }
  final_ = true;
}

void Session::write() {
  writing_ = true;
  write_deadline_ = Clock::now() + server_.options.idle_timeout;
  asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](error_code ec, std::size_t) {
    self->guarded([&] { self->on_write(ec); });
  });
}

void Session::on_write(error_code ec) {
  writing_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) return close();
  out_.clear();
  if (out_.capacity() > kKeepCapacity) std::string().swap(out_);
  if (final_) return linger();
  if (phase_ == Phase::kIdle) wait_for_request(server_.options.idle_timeout);
  process();  // pipelined requests may be waiting in the buffer
}

void Session::wait_for_request(Clock::duration timeout) {
  const auto now = Clock::now();
  deadline_ = now + timeout;
  idle_since = now;
  worker_.mark_idle(this);
}

// Shut our side and discard what still comes, so that closing does not reset the connection (which can destroy
// the answer before the client reads it) while the client is still sending, a rejected body say.
void Session::linger() {
  phase_ = Phase::kLinger;
  buffer_.clear();
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  deadline_ = Clock::now() + std::min<Clock::duration>(linger_time_, server_.options.idle_timeout);
  if (!reading_) read();
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
        if (first_) server_.bad_request("timeout");  // connected, and sent nothing within header_timeout
        return close();
      case Phase::kHead:
      case Phase::kBody:
        server_.bad_request("timeout");
        detail::append_error(
            out_, 408, "timeout",
            "the request did not arrive within " + std::to_string(server_.options.header_timeout.count()) + " ms");
        final_ = true;
        return write();  // alongside the pending read, which will see final_
      case Phase::kWaiting:
      case Phase::kLinger:
      case Phase::kClosed:
        return close();
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

// ---- Worker ----

Worker::~Worker() {
  // No deferred answer may reach a session from here on (a Reply sent now is discarded), and a session waiting
  // for one, which holds itself, is let go while `sessions` is still walkable.
  std::vector<std::shared_ptr<Session>> held;
  for (Session* s = sessions; s; s = s->next) {
    if (auto self = s->abandon()) held.push_back(std::move(self));
  }
  held.clear();
  // Asio objects go before their io_context; destroying it destroys the pending handlers, and with them the
  // sessions, which unlink themselves from `sessions` (still alive).
  acceptor.reset();
  sweep.reset();
  retry.reset();
  ioc.reset();
}

void Worker::link(Session* s) noexcept {
  s->next = sessions;
  if (sessions) sessions->prev = s;
  sessions = s;
}

void Worker::mark_idle(Session* s) noexcept {
  unmark_idle(s);
  s->idle = true;
  s->idle_prev = idle_back;
  if (idle_back) idle_back->idle_next = s;
  else idle_front = s;
  idle_back = s;
}

void Worker::unmark_idle(Session* s) noexcept {
  if (!s->idle) return;
  s->idle = false;
  if (s->idle_prev) s->idle_prev->idle_next = s->idle_next;
  else idle_front = s->idle_next;
  if (s->idle_next) s->idle_next->idle_prev = s->idle_prev;
  else idle_back = s->idle_prev;
  s->idle_prev = s->idle_next = nullptr;
}

// Only this thread's sessions: another thread's would have to be closed on that thread, after this connection
// has been answered or refused. While the server is this full, busy_idle_timeout sheds theirs.
bool Worker::shed_idle() noexcept {
  for (Session* s = idle_front; s;) {
    Session* following = s->idle_next;  // shed() unlinks s, and a session that is not quiet stays
    if (s->shed()) return true;
    s = following;
  }
  return false;
}

void Worker::unlink(Session* s) noexcept {
  if (s->prev)
    s->prev->next = s->next;
  else
    sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  if (stopping && !sessions && sweep) sweep->cancel();  // drained: let the event loop end
}

void Worker::accept() {
  acceptor->async_accept([this](error_code ec, tcp::socket socket) {
    if (stopping || server.stopping.load(std::memory_order_relaxed) || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, say: try again shortly rather than spin on an error that has not gone away.
      retry->expires_after(kAcceptRetry);
      retry->async_wait([this](error_code wec) {
        if (!wec && !stopping) accept();
      });
      return;
    }
    try {
      on_accept(std::move(socket));
    } catch (...) {  // out of memory: the socket closes; keep accepting
    }
    accept();
  });
}

void Worker::on_accept(tcp::socket socket) {
  Admission admission{.peer = peer_address(socket)};
  std::string key = server.ip_key(admission.peer);
  if (!key.empty() && !server.take_ip(key)) {
    server.bad_request("too_many_connections_from_ip");
    std::make_shared<Session>(std::move(socket), *this, std::move(admission))
        ->reject("too_many_connections_from_ip",
                 "too many connections from this address (" + std::to_string(server.options.max_connections_per_ip) +
                     "); reuse one, or try again later");
    return;
  }
  // A shed session keeps its place until it is gone, so the count may pass max_connections by the sessions
  // closing meanwhile; their descriptors are already closed.
  if (server.connections.fetch_add(1, std::memory_order_relaxed) >= server.options.max_connections && !shed_idle()) {
    server.connections.fetch_sub(1, std::memory_order_relaxed);
    if (!key.empty()) server.give_ip(key);
    server.bad_request("too_many_connections");
    std::make_shared<Session>(std::move(socket), *this, std::move(admission))
        ->reject("too_many_connections", "the server has too many connections; try again later");
    return;
  }
  admission.counted = true;
  admission.ip_key = std::move(key);
  std::shared_ptr<Session> session;
  try {
    session = std::make_shared<Session>(std::move(socket), *this, admission);
  } catch (...) {
    server.connections.fetch_sub(1, std::memory_order_relaxed);
    if (!admission.ip_key.empty()) server.give_ip(admission.ip_key);
    throw;
  }
  session->start();
}

void Worker::arm_sweep() {
  sweep->expires_after(tick);
  sweep->async_wait([this](error_code ec) {
    if (ec) return;
    const auto now = Clock::now();
    const bool busy = server.busy();
    for (Session* s = sessions; s;) {
      Session* following = s->next;  // on_tick never frees s: its pending handlers own it
      s->on_tick(now, busy);
      s = following;
    }
    if (!(stopping && !sessions)) arm_sweep();
  });
}

void Worker::begin_stop() {
  stopping = true;
  error_code ec;
  acceptor->close(ec);
  retry->cancel();
  for (Session* s = sessions; s;) {
    Session* following = s->next;
    s->on_stop();
    s = following;
  }
  if (!sessions) sweep->cancel();
}

// ---- Server ----

void check_per_ip_exempt(const std::vector<std::string>& list) { (void)Networks(list); }

std::string Server::Impl::ip_key(const asio::ip::address& a) const {
  if (options.max_connections_per_ip == 0 || a.is_unspecified() || exempt->contain(a)) return {};
  if (a.is_v4()) {
    const auto bytes = a.to_v4().to_bytes();
    return std::string(bytes.begin(), bytes.end());
  }
  const auto bytes = a.to_v6().to_bytes();
  return std::string(bytes.begin(), bytes.begin() + 8);
}

bool Server::Impl::take_ip(const std::string& key) {
  std::lock_guard lock(ip_mu);
  std::size_t& n = per_ip[key];
  if (n >= options.max_connections_per_ip) return false;  // n > 0: the entry was there before
  ++n;
  return true;
}

void Server::Impl::give_ip(const std::string& key) noexcept {
  std::lock_guard lock(ip_mu);
  const auto it = per_ip.find(key);
  if (it != per_ip.end() && --it->second == 0) per_ip.erase(it);
}

void Server::Impl::bind() {
  const bool v6 = options.address.find(':') != std::string::npos;
  const std::string where = (v6 ? "[" + options.address + "]" : options.address) + ":" + std::to_string(options.port);
  error_code ec;
  const auto address = asio::ip::make_address(options.address, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": '" + options.address + "' is not an IP address");
  const tcp::endpoint endpoint(address, options.port);
  tcp::acceptor& first = *workers.front()->acceptor;
  first.open(endpoint.protocol(), ec);
  if (!ec) first.set_option(asio::socket_base::reuse_address(true), ec);  // restart despite TIME_WAIT
  if (!ec) first.bind(endpoint, ec);
  if (!ec) first.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
  port = first.local_endpoint().port();
  listen_fd = ::dup(first.native_handle());
  if (listen_fd < 0)
    throw std::runtime_error("cannot listen on " + where + ": " + std::system_category().message(errno));
  for (std::size_t i = 1; i < workers.size(); ++i) {
    const int fd = ::dup(listen_fd);
    if (fd >= 0) workers[i]->acceptor->assign(endpoint.protocol(), fd, ec);
    if (fd < 0 || ec) {
      if (fd >= 0) ::close(fd);
      throw std::runtime_error("cannot listen on " + where + ": " +
                               (fd < 0 ? std::system_category().message(errno) : ec.message()));
    }
  }
}

void Server::Impl::run(Worker& worker) {
  tls_server = this;
  for (;;) {
    try {
      worker.ioc->run();
      break;
    } catch (...) {  // every handler guards itself; this is the last resort, and the loop goes on
    }
  }
  {
    std::lock_guard lock(done_mu);
    --running;
  }
  done_cv.notify_all();
}

void Server::Impl::request_stop() {
  if (stopping.exchange(true)) return;
  // Linux: shutting down a listening socket stops it listening (later connects are refused) and fails the
  // acceptors' pending accepts; the descriptor itself stays ours until close_listener().
  ::shutdown(listen_fd, SHUT_RD);
  for (auto& w : workers) {
    Worker* worker = w.get();
    asio::post(*worker->ioc, [worker] { worker->begin_stop(); });
  }
}

Server::Server(ServerOptions options, Handler handler, ServerEvents events) : impl_(std::make_unique<Impl>()) {
  if (options.threads < 1) {
    throw std::invalid_argument("ServerOptions::threads is " + std::to_string(options.threads) +
                                "; it must be at least 1");
  }
  if (!handler) throw std::invalid_argument("the Server's handler is empty");
  impl_->exempt.emplace(options.per_ip_exempt);
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  impl_->events = std::move(events);
  for (int i = 0; i < impl_->options.threads; ++i) impl_->workers.push_back(std::make_unique<Worker>(*impl_));
  impl_->bind();
}

Server::~Server() {
  stop();
  impl_->workers.clear();
}

void Server::start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.started || s.stopping.load()) return;
  s.started = true;
  for (auto& w : s.workers) {
    Worker* worker = w.get();
    worker->accept();
    worker->arm_sweep();
    {
      std::lock_guard done(s.done_mu);
      ++s.running;
    }
    try {
      worker->thread = std::thread([&s, worker] { s.run(*worker); });
    } catch (...) {
      std::lock_guard done(s.done_mu);
      --s.running;
      throw;
    }
  }
}

std::uint16_t Server::port() const { return impl_->port; }

void Server::stop() {
  Impl& s = *impl_;
  if (s.on_own_thread()) {  // from a handler: begin the drain; joining is for another thread
    s.request_stop();
    return;
  }
  std::lock_guard lock(s.mu);
  s.request_stop();
  if (!s.started) {  // no thread will run the posted stop: close the listening socket here
    for (auto& w : s.workers) {
      error_code ec;
      w->acceptor->close(ec);
    }
    return;
  }
  if (s.joined) return;
  {
    std::unique_lock done(s.done_mu);
    if (!s.done_cv.wait_for(done, s.options.drain_timeout, [&] { return s.running == 0; })) {
      for (auto& w : s.workers) w->ioc->stop();  // each loop ends once its current handler returns
    }
  }
  for (auto& w : s.workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  s.joined = true;
  s.workers.clear();  // closes the connections a timed-out drain left open
  s.close_listener();
}

// ---- Reply ----

namespace detail {

Reply ReplyChannel::defer() { return Reply(shared_from_this(), raw_->begin_deferral()); }

void ReplyChannel::deliver(std::uint64_t seq, Response response, bool dropped) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (!open_) return;
    asio::post(executor_, [session = session_, seq, dropped, r = std::move(response)]() mutable {
      if (auto s = session.lock()) s->on_reply(seq, std::move(r), dropped);
    });
  } catch (...) {  // out of memory: the connection's answer is lost; it closes with the server
  }
}

}  // namespace detail

Reply::Reply(Reply&& other) noexcept : channel_(std::move(other.channel_)), seq_(other.seq_) {}

Reply& Reply::operator=(Reply&& other) noexcept {
  if (this != &other) {
    if (channel_) channel_->deliver(seq_, Response{}, true);
    channel_ = std::move(other.channel_);
    seq_ = other.seq_;
  }
  return *this;
}

Reply::~Reply() {
  if (channel_) channel_->deliver(seq_, Response{}, true);
}

void Reply::send(Response response) {
  if (!channel_) return;
  const auto channel = std::move(channel_);
  channel->deliver(seq_, std::move(response), false);
}

Reply Request::defer() const {
  if (!channel) return {};
  return channel->defer();
}

}  // namespace rk::http
