// server/http/worker.h (internal): one of the server's threads: its event loop, its acceptor on the shared
// listening socket, its timeout sweep, and the connections (Sessions) it accepted.
//
// Thread safety / invariants:
// - Each Worker owns an io_context run by exactly one thread. A Session lives on the worker that accepted it, and
//   everything it does (reads, writes, the handler, timeouts, stop) runs on that thread: no locks per request.
// - The worker keeps an intrusive list of its sessions (`sessions`), for the timeout sweep and for stop(), and a
//   second one of its idle sessions (waiting for a request, nothing pending), longest idle first, so that a new
//   connection finding every place taken can shed one in O(1). Both are this worker's thread's only.
// - Timeouts are checked by a sweep over the sessions, so a request costs no timer operation; the sweep runs ten
//   times per shortest timeout (every `tick`).
// - A new connection is admitted under the server's ConnectionLimits, or answered 503 and closed.
// - Connections are spread over the workers by count: whichever worker accepts a connection (the first to wake),
//   it goes to the worker with the fewest (`load()`, ties to the acceptor), handed over through that worker's event
//   loop. Otherwise the worker that happens to be running when a burst of connections arrives takes them all (Asio
//   accepts again at once while the backlog is not empty), and the other threads sit idle: with wrk's 64
//   connections, one thread served 64, 50 or 40 of them from run to run (bench/RESULTS.md, "Two threads").
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <optional>
#include <thread>

#include "server/http/net.h"
#include "server/http/server.h"

namespace rk::server::http::detail {

class Session;

class Worker {
 public:
  explicit Worker(Server::Impl& s);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void accept();      // accepts connections until stopped; on the worker's thread, or before it starts
  void arm_sweep();   // checks the sessions' timeouts every `tick`
  void begin_stop();  // stop(): no more accepting, idle sessions close, the rest close once answered
  void link(Session* s) noexcept;
  void unlink(Session* s) noexcept;
  void mark_idle(Session* s) noexcept;    // s begins to wait for a request: it goes to the back of `idle`
  void unmark_idle(Session* s) noexcept;  // s is no longer idle (or never was)
  // Connections this worker serves, or has been handed and not yet taken up; read by the other workers' threads.
  std::size_t load() const noexcept {
    return linked_.load(std::memory_order_relaxed) + incoming_.load(std::memory_order_relaxed);
  }

  Server::Impl& server;
  const Clock::duration tick;
  Session* sessions = nullptr;    // intrusive list, this worker's thread only
  Session* idle_front = nullptr;  // idle sessions, longest idle first; this worker's thread only
  Session* idle_back = nullptr;
  bool stopping = false;  // this worker's thread only
  std::thread thread;
  std::optional<asio::io_context> ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> sweep;
  std::optional<asio::steady_timer> retry;

 private:
  class Handoff;
  void place(tcp::socket socket);  // on the least loaded worker: here, or handed over
  void adopt(int fd);              // on this worker's thread: a connection another worker accepted for it
  void on_accept(tcp::socket socket);
  bool shed_idle() noexcept;  // closes the session idle longest, if any

  // Written by this worker's thread (linked_, per connection) or by the worker handing a connection over
  // (incoming_); on a line of their own, away from what this thread writes per request.
  alignas(64) std::atomic<std::size_t> linked_{0};  // sessions in `sessions`
  std::atomic<std::size_t> incoming_{0};            // handed over, not yet adopted
};

}  // namespace rk::server::http::detail
