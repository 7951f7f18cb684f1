// server/grpc/acceptor.h (internal): the gRPC listener's own accept(): each connection is counted and capped before
// gRPC sees it, and idle ones give way, under the same rules as the HTTP listener's (server/connections/limits.h).
//
//   Acceptor acceptor({.address = "127.0.0.1:0", .limits = {.max = 1000}}, events);  // binds; throws
//                                                    // std::runtime_error "cannot listen for gRPC on ...: ..."
//   acceptor.port();
//   acceptor.start([&](int listener_fd, int fd) { ...gRPC's ExternalConnectionAcceptor takes fd... });
//   acceptor.stop();   // new connections are refused; those handed over stay gRPC's
//
// A new connection, in this order: closed at once if its descriptor's number is at or past fd_ceiling (descriptors
// are handed out lowest first, so the process then holds that many: the rest are kept for the admin listener and the
// process itself); refused if its address has max_per_ip; if max are held, the connection that has received nothing
// for longest (at least kMinQuiet) is shed to make room, or else the new one is refused; otherwise handed to gRPC.
// While 3/4 of max or more are held, connections that have received nothing for busy_idle_timeout are shed too.
// "Shed" is shutdown(): gRPC reads the end of the stream and closes the connection; the client opens a new one.
//
// How it knows what gRPC holds: one thread, one epoll set of the listening socket, an eventfd for stop(), and, for
// each connection handed over, a duplicate of its descriptor registered for nothing but HUP (edge-triggered). gRPC
// shuts a connection down in both directions before it closes it, whatever ends it (the peer, its idle timeout, a
// handshake not done in time), and that is the HUP: the place is given back and the duplicate closed. The duplicate
// is also how this thread reads a connection's TCP_INFO (the kernel's time since it last received data) and shuts it
// down, with no race with gRPC closing its own descriptor and the number being reused. Each connection so costs two
// descriptors, which the budget (cli/serve/fd_budget.h) counts.
//
// Thread safety: the constructor, start() and stop() from one thread; the handoff and the events run on the
// acceptor's thread. Everything else is that thread's only.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/connections/limits.h"

namespace rk::server::grpc::detail {

struct AcceptorOptions {
  std::string address = "127.0.0.1:0";  // IP:PORT or [IPv6]:PORT; port 0 picks a free one
  server::connections::Limits limits;
  std::chrono::milliseconds busy_idle_timeout{5000};
  int fd_ceiling = 0;  // 0: none
};

struct AcceptorEvents {
  std::function<void(int delta)> connection;             // +1 handed to gRPC, -1 gone
  std::function<void(std::string_view reason)> refused;  // too_many_connections, too_many_connections_from_ip,
                                                         // descriptor_reserve
};

// A connection that received data more recently than this is not shed to make room: it is in use.
inline constexpr std::chrono::milliseconds kMinQuiet{100};

class Acceptor {
 public:
  using Handoff = std::function<void(int listener_fd, int fd)>;

  Acceptor(AcceptorOptions options, AcceptorEvents events);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  int port() const { return port_; }
  void start(Handoff handoff);
  void stop();  // idempotent; joins the thread

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  int wait_ms() const;
  void accept_all();
  void admit(int fd, const sockaddr_storage& peer);
  bool make_room();                  // sheds the connection quiet longest, if one is quiet enough
  void sweep();                      // busy: sheds connections quiet for busy_idle_timeout
  void release(int dup, bool shed);  // a connection is gone (or shed): its place given back
  void refuse(int fd, std::string_view reason);
  std::uint32_t quiet_ms(int dup) const;  // since the connection last received data; 0 if unknown
  void pause_accepting(bool paused);

  const AcceptorOptions options_;
  const AcceptorEvents events_;
  server::connections::ConnectionLimits limits_;
  Handoff handoff_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  bool stopped_ = false;

  // The acceptor thread's only.
  std::unordered_map<int, std::string> conns_;  // connections handed over: our duplicate's descriptor -> ip_key
  std::vector<int> candidates_;       // the quietest from the last scan, quietest at the back (some may be gone)
  Clock::time_point rescan_after_{};  // the last scan found none quiet enough: none before this
  Clock::time_point next_sweep_{};
  Clock::time_point paused_until_{};  // accept() ran out of descriptors: wait before trying again
};

}  // namespace rk::server::grpc::detail
