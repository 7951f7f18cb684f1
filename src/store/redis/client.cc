// store/redis/client.cc: the Redis client's thread (Asio's loop, with a spin while replies are awaited) and its
// public face (client.h). A connection's life is in connection.cc, where each command goes in routing.cc (with
// url.cc, what a URL says; sentinel.cc, the Sentinel exchange; cluster.cc, the Cluster's slots).
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>

#include "store/redis/client_impl.h"
#include "store/redis/url.h"

namespace rk::store::redis {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

Client::Impl::Impl(ClientOptions o)
    : options(std::move(o)), tls(make_tls_context(options)), timer(ioc), work(asio::make_work_guard(ioc)) {
  if (!options.password_file.empty()) password_file.emplace("--redis-password-file", options.password_file);
  if (options.connections_per_node < 1) options.connections_per_node = 1;
  if (options.mode == ClientOptions::Mode::kSentinel) {
    sentinel_node = &node_for(Endpoint{"0.0.0.0", 0});  // its endpoint is asked of the sentinels at each connection
  }
}

void Client::Impl::start() {
  tick();
  thread = std::thread([self = shared_from_this()] { self->run(); });
  if (options.mode == ClientOptions::Mode::kCluster) post([this] { refresh_slots(); });
}

// The client's thread: Asio's loop, with a spin (ClientOptions::spin) before each sleep while commands await
// their replies.
void Client::Impl::run() {
  if (options.spin.count() <= 0) {
    ioc.run();
    return;
  }
  while (!ioc.stopped()) {
    if (awaiting()) {
      if (spin_skip > 0) {
        --spin_skip;
      } else if (spin()) {
        continue;
      }
    }
    ioc.run_one();
  }
}

// Polls the connections (and runs what other threads posted) for up to options.spin, while commands await
// replies. True if it ran anything. A spin that timed out without a reply backs the next ones off; one that met a
// reply ends them.
bool Client::Impl::spin() {
  const auto until = Clock::now() + options.spin;
  const std::uint64_t before = replies_read;
  bool ran = false;
  do {
    ran = ioc.poll() > 0 || ran;
    if (replies_read != before) {
      spins_answered.fetch_add(1, std::memory_order_relaxed);
      spin_misses = 0;
      return true;
    }
  } while (!ioc.stopped() && awaiting() && Clock::now() < until);
  if (ioc.stopped() || !awaiting()) return ran;  // nothing awaits now (failed, closed): neither kind of spin
  spins_idle.fetch_add(1, std::memory_order_relaxed);
  spin_skip = 1u << spin_misses;
  spin_misses = std::min(spin_misses + 1, 8u);
  return ran;
}

// Whether a command of a connection made is waiting for its reply.
bool Client::Impl::awaiting() const {
  for (const auto& [_, n] : nodes) {
    for (const auto& c : n->conns) {
      if (c->state == Conn::State::kReady && !c->sent.empty()) return true;
    }
  }
  return false;
}

void Client::Impl::shutdown() {
  closed = true;
  timer.cancel();
  for (auto& [_, n] : nodes) {
    for (auto& c : n->conns) fail_conn(*c, Error::Kind::kClosed, "the Redis client is closed", false);
  }
  work.reset();
}

Client::Client(ClientOptions options) : impl_(std::make_shared<Impl>(std::move(options))) { impl_->start(); }

Client::~Client() { close(); }

void Client::exec(std::vector<std::string> args, std::string_view routing_key, std::function<void(Result)> done,
                  Deadline deadline) {
  if (deadline == Deadline{}) deadline = Clock::now() + impl_->options.command_timeout;
  Impl::Pending p{
      .args = std::move(args), .key = std::string(routing_key), .done = std::move(done), .deadline = deadline};
  auto shared = std::make_shared<Impl::Pending>(std::move(p));
  Impl* impl = impl_.get();
  if (!impl->post([impl, shared] { impl->dispatch(std::move(*shared)); })) {
    Impl::finish(*shared, Error{Error::Kind::kClosed, "the Redis client is closed"});
  }
}

void Client::close() {
  Impl* impl = impl_.get();
  {
    std::lock_guard lock(impl->post_mu);
    if (impl->closing) return;
    asio::post(impl->ioc, [impl] { impl->shutdown(); });
    impl->closing = true;
  }
  if (impl->thread.joinable()) impl->thread.join();
}

std::chrono::milliseconds Client::command_timeout() const { return impl_->options.command_timeout; }

void Client::on_every_connection(std::vector<std::string> args, std::function<void(const Reply&)> answered) {
  Impl* impl = impl_.get();
  auto s = std::make_shared<Impl::Always>(Impl::Always{std::move(args), std::move(answered)});
  impl->post([impl, s] { impl->on_every_connection(std::move(*s)); });
}

std::string Client::describe() const { return store::redis::describe(impl_->options); }

Client::Stats Client::stats() const {
  return {impl_->writes.load(),    impl_->commands.load(),     impl_->timeouts.load(),       impl_->reconnects.load(),
          impl_->redirects.load(), impl_->tls_failures.load(), impl_->spins_answered.load(), impl_->spins_idle.load()};
}

}  // namespace rk::store::redis
