#include "server/http/server.h"

#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

namespace rk::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Message = bhttp::request<bhttp::string_body>;
using error_code = boost::system::error_code;

namespace {

std::string_view view(beast::string_view s) { return {s.data(), s.size()}; }

std::string json_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += '?';
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string error_body(int status, std::string_view reason, std::string_view message) {
  return "{\"error\":{\"code\":" + std::to_string(status) + ",\"reason\":\"" + json_escape(reason) + "\",\"message\":\"" +
         json_escape(message) + "\"}}";
}

}  // namespace

std::string_view Request::header(std::string_view name) const {
  const auto& m = *static_cast<const Message*>(message);
  const auto it = m.find(beast::string_view(name.data(), name.size()));
  return it == m.end() ? std::string_view{} : view(it->value());
}

std::vector<std::string_view> Request::headers(std::string_view name) const {
  const auto& m = *static_cast<const Message*>(message);
  std::vector<std::string_view> out;
  const auto [lo, hi] = m.equal_range(beast::string_view(name.data(), name.size()));
  for (auto it = lo; it != hi; ++it) out.push_back(view(it->value()));
  return out;
}

class Session;

struct Worker {
  Server::Impl& server;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer retry{ioc};
  std::thread thread;
  std::vector<std::weak_ptr<Session>> sessions;  // this worker's thread only
  std::size_t accepted = 0;

  explicit Worker(Server::Impl& s) : server(s) {}
  void accept();
  void reject(tcp::socket socket);
};

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  ServerEvents events;
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::uint16_t port = 0;
  std::mutex mu;  // start/stop
  bool started = false;
  bool stopped = false;
  std::mutex done_mu;
  std::condition_variable done_cv;
  int running = 0;

  void bad_request(std::string_view reason) const {
    if (events.on_bad_request) events.on_bad_request(reason);
  }
};

// One connection: read a request, answer it, repeat while kept alive. Lives on its worker's thread.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Worker& worker) : stream_(std::move(socket)), worker_(worker), server_(worker.server) {
    error_code ec;
    const auto peer = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      const auto a = peer.address();
      remote_ip_ = a.is_v6() && a.to_v6().is_v4_mapped()
                       ? asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string()
                       : a.to_string();
    }
    server_.connections.fetch_add(1, std::memory_order_relaxed);
    if (server_.events.on_connection) server_.events.on_connection(+1);
  }

  ~Session() {
    server_.connections.fetch_sub(1, std::memory_order_relaxed);
    if (server_.events.on_connection) server_.events.on_connection(-1);
  }

  void start() { read_header(); }

  // stop(): an idle connection closes now; a busy one after its answer.
  void close_if_idle() {
    closing_ = true;
    if (idle_) {
      error_code ec;
      stream_.socket().close(ec);
    }
  }

 private:
  void read_header() {
    idle_ = buffer_.size() == 0;
    if (closing_ && idle_) return shutdown();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    stream_.expires_after(first_ ? server_.options.header_timeout : server_.options.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec, true); });
  }

  void on_read(error_code ec, bool header_only) {
    idle_ = false;
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
      return shutdown();
    }
    if (ec == beast::error::timeout) {
      // The stream closed itself. Something had arrived: a slow or stalled client; nothing: an idle keep-alive.
      if (buffer_.size() > 0 || !header_only) server_.bad_request("timeout");
      return;
    }
    if (ec == bhttp::error::header_limit) return fail(431, "header_too_large", "the request head is over the limit");
    if (ec == bhttp::error::body_limit) return fail(413, "body_too_large", "the request body is over the limit");
    if (ec) return fail(400, "malformed", ec.message());
    if (header_only && !parser_->is_done()) {
      const auto expect = parser_->get()[bhttp::field::expect];
      if (beast::iequals(expect, "100-continue")) {
        static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        asio::async_write(stream_, asio::buffer(kContinue),
                          [self = shared_from_this()](error_code wec, std::size_t) {
                            if (wec) return self->shutdown();
                            self->read_body();
                          });
        return;
      }
      return read_body();
    }
    handle();
  }

  void read_body() {
    stream_.expires_after(server_.options.header_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec, false); });
  }

  void handle() {
    const Message& msg = parser_->get();
    Request req;
    req.method = view(msg.method_string());
    req.target = view(msg.target());
    const auto q = req.target.find('?');
    req.path = req.target.substr(0, q);
    req.query = q == std::string_view::npos ? std::string_view{} : req.target.substr(q + 1);
    req.body = msg.body();
    req.remote_ip = remote_ip_;
    req.message = &msg;
    Response res;
    try {
      server_.handler(req, res);
    } catch (const std::exception& e) {
      res = Response{500, "application/json", {}, error_body(500, "handler_error", e.what())};
      server_.bad_request("handler_error");
    } catch (...) {
      res = Response{500, "application/json", {}, error_body(500, "handler_error", "unknown error")};
      server_.bad_request("handler_error");
    }
    const bool keep = msg.keep_alive() && !closing_ && !server_.stopping.load(std::memory_order_relaxed);
    respond(res, msg.version(), keep, msg.method() == bhttp::verb::head);
  }

  // Writes the answer as one buffer, serialised here: cheaper than Beast's serializer for these small answers.
  void respond(Response& res, unsigned version, bool keep, bool head) {
    first_ = false;
    const int status = res.status >= 100 && res.status <= 999 ? res.status : 500;
    out_.clear();
    out_ += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    out_ += std::to_string(status);
    out_ += ' ';
    const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
    out_.append(reason.data(), reason.size());
    out_ += "\r\n";
    auto header = [this](std::string_view name, std::string_view value) {
      out_ += name;
      out_ += ": ";
      for (char c : value) out_ += (c == '\r' || c == '\n') ? ' ' : c;  // no header injection, whatever the value
      out_ += "\r\n";
    };
    if (!res.content_type.empty()) header("Content-Type", res.content_type);
    for (const auto& [k, v] : res.headers) header(k, v);
    header("Content-Length", std::to_string(res.body.size()));
    if (!keep && version != 10) header("Connection", "close");
    if (keep && version == 10) header("Connection", "keep-alive");
    out_ += "\r\n";
    if (!head) out_ += res.body;
    stream_.expires_after(server_.options.idle_timeout);
    asio::async_write(stream_, asio::buffer(out_), [self = shared_from_this(), keep](error_code ec, std::size_t) {
      if (ec || !keep) return self->shutdown();
      self->read_header();
    });
  }

  void fail(int status, std::string_view reason, std::string_view message) {
    server_.bad_request(reason);
    Response res{status, "application/json", {}, error_body(status, reason, message)};
    respond(res, 11, false, false);
  }

  void shutdown() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string out_;  // the answer being written, reused across requests
  Worker& worker_;
  Server::Impl& server_;
  std::string remote_ip_;
  bool first_ = true;
  bool idle_ = true;
  bool closing_ = false;
};

void Worker::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors, say: try again shortly rather than spin.
      retry.expires_after(std::chrono::milliseconds(10));
      retry.async_wait([this](error_code wec) {
        if (!wec) accept();
      });
      return;
    }
    if (server.connections.load(std::memory_order_relaxed) >= server.options.max_connections) {
      reject(std::move(socket));
    } else {
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto session = std::make_shared<Session>(std::move(socket), *this);
      if (++accepted % 1024 == 0) {
        std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
      }
      sessions.push_back(session);
      session->start();
    }
    accept();
  });
}

void Worker::reject(tcp::socket socket) {
  server.bad_request("too_many_connections");
  const std::string body = error_body(503, "too_many_connections", "the server has too many connections");
  const std::string response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: "
                               "close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  error_code ec;
  asio::write(socket, asio::buffer(response), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

Server::Server(ServerOptions options, Handler handler, ServerEvents events) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  impl_->events = std::move(events);
}

Server::~Server() { stop(); }

void Server::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->started) return;
  Impl& s = *impl_;
  const std::string where = s.options.address + ":" + std::to_string(s.options.port);
  error_code ec;
  const auto address = asio::ip::make_address(s.options.address, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": '" + s.options.address + "' is not an IP address");
  std::uint16_t port = s.options.port;
  const int threads = std::max(1, s.options.threads);
  for (int i = 0; i < threads; ++i) {
    auto w = std::make_unique<Worker>(s);
    const tcp::endpoint endpoint(address, port);
    w->acceptor.open(endpoint.protocol(), ec);
    if (!ec) w->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {
      const int one = 1;
      if (::setsockopt(w->acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        ec.assign(errno, boost::system::system_category());
      }
    }
    if (!ec) w->acceptor.bind(endpoint, ec);
    if (!ec) w->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
    port = w->acceptor.local_endpoint().port();  // the one picked for port 0, shared by the other acceptors
    s.workers.push_back(std::move(w));
  }
  s.port = port;
  s.running = threads;
  for (auto& w : s.workers) {
    w->accept();
    Worker* raw = w.get();
    w->thread = std::thread([raw, &s] {
      raw->ioc.run();
      std::lock_guard done(s.done_mu);
      --s.running;
      s.done_cv.notify_all();
    });
  }
  s.started = true;
}

std::uint16_t Server::port() const { return impl_->port; }

void Server::stop() {
  std::lock_guard lock(impl_->mu);
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  s.stopping = true;
  for (auto& w : s.workers) {
    Worker* raw = w.get();
    asio::post(raw->ioc, [raw] {
      error_code ec;
      raw->acceptor.close(ec);
      raw->retry.cancel();
      for (auto& weak : raw->sessions) {
        if (auto session = weak.lock()) session->close_if_idle();
      }
    });
  }
  {
    std::unique_lock done(s.done_mu);
    if (!s.done_cv.wait_for(done, s.options.drain_timeout, [&] { return s.running == 0; })) {
      for (auto& w : s.workers) w->ioc.stop();
    }
  }
  for (auto& w : s.workers) {
    if (w->thread.joinable()) w->thread.join();
  }
}

}  // namespace rk::http
