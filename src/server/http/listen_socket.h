// server/http/listen_socket.h (internal): the listening socket the workers share.
//
// Each worker accepts through its own acceptor, holding its own descriptor of the one socket (a dup), so a thread
// busy in a handler does not hold up new connections (which worker then serves one is worker.h's choice), and
// binding fails as usual if the port is taken (SO_REUSEPORT would let a second server on the same port share it
// silently). The Listener keeps one more descriptor of its own: shutting it down (refuse()) refuses new
// connections at once, even while every thread is busy in a handler.
//
//   Listener listener;
//   listener.open("127.0.0.1", 0, acceptors);  // throws std::runtime_error "cannot listen on 127.0.0.1:0: ..."
//   listener.port();                           // the port picked
//   listener.refuse();                         // stop(): later connects are refused, pending accepts fail
//   listener.close();                          // once no thread accepts any more
//
// Thread safety: open() before the threads start; refuse() once, from stop(); close() after the threads are joined.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "server/http/net.h"

namespace rk::server::http::detail {

class Listener {
 public:
  Listener() = default;
  ~Listener() { close(); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds address:port and listens on acceptors[0] (address: an IPv4 or IPv6 address, not a host name), and
  // gives every other acceptor a dup of that socket.
  void open(const std::string& address, std::uint16_t port, std::span<tcp::acceptor* const> acceptors);
  std::uint16_t port() const { return port_; }
  tcp protocol() const { return protocol_; }  // of the connections accepted
  // Linux: shutting down a listening socket stops it listening (later connects are refused) and fails the
  // acceptors' pending accepts; the descriptor itself stays ours until close().
  void refuse() noexcept;
  void close() noexcept;

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  tcp protocol_ = tcp::v4();
};

}  // namespace rk::server::http::detail
