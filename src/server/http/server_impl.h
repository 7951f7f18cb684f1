// server/http/server_impl.h (internal): Server::Impl, what the server's threads share: the options, the handler
// and the event hooks, the connection limits, the TLS context, the listening socket, and the workers with their
// threads.
//
// Thread safety: `limits` and `tls` are safe from any thread (connection_limits.h, tls_context.h); `stopping` is
// set once by stop(); `mu` serialises start() and stop() from outside the server's threads; `running` is under
// `done_mu`. The rest is written by the constructor, before the threads start, and only read after.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http/connection_limits.h"
#include "server/http/listen_socket.h"
#include "server/http/server.h"
#include "server/http/tls_context.h"
#include "server/http/worker.h"

namespace rk::server::http {

namespace detail {

// Calls an optional hook; what it throws is ignored.
template <class F, class... Args>
void notify(const F& hook, Args&&... args) noexcept {
  if (!hook) return;
  try {
    hook(std::forward<Args>(args)...);
  } catch (...) {  // a metrics or log hook must not take a connection down
  }
}

}  // namespace detail

struct Server::Impl {
  // Makes one Worker per thread and listens (throws what Server's constructor documents); starts no thread.
  Impl(ServerOptions o, Handler h, ServerEvents e);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  ServerOptions options;
  Handler handler;
  ServerEvents events;
  detail::ConnectionLimits limits;  // after options, which it is made from
  detail::TlsContexts tls;          // likewise; current() is null without TLS
  std::atomic<bool> stopping{false};

  std::mutex mu;  // start() and stop() from outside the server's threads
  bool started = false;
  bool joined = false;
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::size_t running = 0;  // threads still in their event loop; under done_mu

  detail::Listener listener;
  std::vector<std::unique_ptr<detail::Worker>> workers;  // last: destroyed first, while the members above are alive

  void bad_request(std::string_view reason) const noexcept { detail::notify(events.on_bad_request, reason); }
  void connection(int delta) const noexcept { detail::notify(events.on_connection, delta); }
  void handler_error(std::string_view what) const noexcept { detail::notify(events.on_handler_error, what); }
  bool on_own_thread() const;        // true on one of this server's threads
  void request_stop();               // refuses new connections and posts begin_stop() to every worker; once
  void run(detail::Worker& worker);  // a thread's body: the worker's event loop until it ends
};

}  // namespace rk::server::http
