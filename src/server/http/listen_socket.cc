#include "server/http/listen_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace rk::server::http::detail {

void Listener::open(const std::string& address, std::uint16_t port, std::span<tcp::acceptor* const> acceptors) {
  const bool v6 = address.find(':') != std::string::npos;
  const std::string where = (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": '" + address + "' is not an IP address");
  const tcp::endpoint endpoint(ip, port);
  tcp::acceptor& first = *acceptors.front();
  first.open(endpoint.protocol(), ec);
  if (!ec) first.set_option(asio::socket_base::reuse_address(true), ec);  // restart despite TIME_WAIT
  if (!ec) first.bind(endpoint, ec);
  if (!ec) first.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
  port_ = first.local_endpoint().port();
  protocol_ = endpoint.protocol();
  fd_ = ::dup(first.native_handle());
  if (fd_ < 0) throw std::runtime_error("cannot listen on " + where + ": " + std::system_category().message(errno));
  for (std::size_t i = 1; i < acceptors.size(); ++i) {
    const int fd = ::dup(fd_);
    if (fd >= 0) acceptors[i]->assign(endpoint.protocol(), fd, ec);
    if (fd < 0 || ec) {
      if (fd >= 0) ::close(fd);
      throw std::runtime_error("cannot listen on " + where + ": " +
                               (fd < 0 ? std::system_category().message(errno) : ec.message()));
    }
  }
}

void Listener::refuse() noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RD);
}

void Listener::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace rk::server::http::detail
