#include "server/http/worker.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/http/server_impl.h"
#include "server/http/session.h"

namespace rk::server::http::detail {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kAcceptRetry{10};  // after accept fails (out of descriptors, say)

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

// Ten sweeps per shortest timeout, 10 ms to 1 s apart.
Clock::duration sweep_interval(const ServerOptions& o) {
  const auto shortest = std::min({o.header_timeout, o.idle_timeout, o.busy_idle_timeout});
  return std::clamp<Clock::duration>(shortest / 10, milliseconds(10), milliseconds(1000));
}

}  // namespace

Worker::Worker(Server::Impl& s) : server(s), tick(sweep_interval(s.options)) {
  ioc.emplace(1);
  acceptor.emplace(*ioc);
  sweep.emplace(*ioc);
  retry.emplace(*ioc);
}

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
  linked_.store(linked_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // only this thread writes
}

void Worker::unlink(Session* s) noexcept {
  linked_.store(linked_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  if (s->prev) s->prev->next = s->next;
  else sessions = s->next;
  if (s->next) s->next->prev = s->prev;
  if (stopping && !sessions && sweep) sweep->cancel();  // drained: let the event loop end
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
      place(std::move(socket));
    } catch (...) {  // out of memory: the socket closes; keep accepting
    }
    accept();
  });
}

// A connection on its way to another worker: its descriptor, closed if the handler carrying it is destroyed
// unrun (that worker's event loop ended first), and counted in that worker's load until taken up.
class Worker::Handoff {
 public:
  Handoff(Worker& to, int fd) noexcept : to_(&to), fd_(fd) { to_->incoming_.fetch_add(1, std::memory_order_relaxed); }
  Handoff(Handoff&& o) noexcept : to_(o.to_), fd_(std::exchange(o.fd_, -1)) {}
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;
  Handoff& operator=(Handoff&&) = delete;
  ~Handoff() {
    if (fd_ < 0) return;
    to_->incoming_.fetch_sub(1, std::memory_order_relaxed);
    ::close(fd_);
  }
  void operator()() {
    to_->incoming_.fetch_sub(1, std::memory_order_relaxed);
    to_->adopt(std::exchange(fd_, -1));
  }

 private:
  Worker* to_;
  int fd_;
};

void Worker::place(tcp::socket socket) {
  Worker* to = this;
  std::size_t least = load();
  for (const auto& w : server.workers) {
    if (const std::size_t n = w->load(); n < least) {
      to = w.get();
      least = n;
    }
  }
  if (to == this) return on_accept(std::move(socket));
  error_code ec;
  const int fd = socket.release(ec);  // out of this worker's event loop, still open
  if (ec) return on_accept(std::move(socket));
  asio::post(*to->ioc, Handoff(*to, fd));
}

void Worker::adopt(int fd) {
  tcp::socket socket(*ioc);
  error_code ec;
  socket.assign(server.listener.protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  if (stopping || server.stopping.load(std::memory_order_relaxed)) return;  // closes, as an accept would have
  try {
    on_accept(std::move(socket));
  } catch (...) {  // out of memory: the socket closes
  }
}

void Worker::on_accept(tcp::socket socket) {
  if (const int ceiling = server.options.fd_ceiling; ceiling > 0 && socket.native_handle() >= ceiling) {
    server.bad_request("descriptor_reserve");  // the socket closes at once: what is past it is the admin listener's
    return;
  }
  ConnectionLimits& limits = server.limits;
  Admission admission{.peer = peer_address(socket), .tls = server.tls.current()};
  std::string key = limits.ip_key(address_of(admission.peer));
  if (!key.empty() && !limits.take_ip(key)) {
    server.bad_request("too_many_connections_from_ip");
    if (admission.tls) return;  // a 503 would cost a handshake, which is what a flood wants: the socket closes
    std::make_shared<Session>(std::move(socket), *this, std::move(admission))
        ->reject("too_many_connections_from_ip", "too many connections from this address (" +
                                                     std::to_string(server.options.max_connections_per_ip) +
                                                     "); reuse one, or try again later");
    return;
  }
  // A shed session keeps its place until it is gone, so the count may pass max_connections by the sessions
  // closing meanwhile; their descriptors are already closed.
  if (!limits.take() && !shed_idle()) {
    limits.give();
    if (!key.empty()) limits.give_ip(key);
    server.bad_request("too_many_connections");
    if (admission.tls) return;
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
    limits.give();
    if (!admission.ip_key.empty()) limits.give_ip(admission.ip_key);
    throw;
  }
  session->start();
}

void Worker::arm_sweep() {
  sweep->expires_after(tick);
  sweep->async_wait([this](error_code ec) {
    if (ec) return;
    const auto now = Clock::now();
    const bool busy = server.limits.busy();
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

}  // namespace rk::server::http::detail
