#include "server/grpc/acceptor.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace rk::server::grpc::detail {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kAcceptRetry{10};  // after accept() fails for want of descriptors
constexpr std::size_t kCandidates = 16;   // shed candidates kept from one scan of the connections
constexpr int kAcceptBatch = 64;          // connections accepted before the events are looked at again

template <class F, class... Args>
void notify(const F& hook, Args&&... args) noexcept {
  if (!hook) return;
  try {
    hook(std::forward<Args>(args)...);
  } catch (...) {  // a metrics hook must not take the listener down
  }
}

std::string errno_text() { return std::system_category().message(errno); }

// "127.0.0.1:8081", "[::]:8081": a numeric address and port, as getaddrinfo reads them.
addrinfo* resolve(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw std::runtime_error("cannot listen for gRPC on " + address + ": not ADDR:PORT");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    throw std::runtime_error("cannot listen for gRPC on " + address + ": '" + host + "' is not an IP address or '" +
                             port + "' not a port");
  }
  return found;
}

int listen_on(const std::string& address, int& port) {
  addrinfo* ai = resolve(address);
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  bool ok = fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  const std::string error = ok ? "" : errno_text();
  freeaddrinfo(ai);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ok = ok && ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0;
  if (!ok) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen for gRPC on " + address + ": " + (error.empty() ? errno_text() : error));
  }
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

bool watch(int epoll_fd, int fd, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

}  // namespace

Acceptor::Acceptor(AcceptorOptions options, AcceptorEvents events)
    : options_(std::move(options)), events_(std::move(events)), limits_(options_.limits) {
  listen_fd_ = listen_on(options_.address, port_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || stop_fd_ < 0 || !watch(epoll_fd_, listen_fd_, EPOLLIN) || !watch(epoll_fd_, stop_fd_, EPOLLIN)) {
    const std::string error = errno_text();
    for (int fd : {listen_fd_, epoll_fd_, stop_fd_}) {
      if (fd >= 0) ::close(fd);
    }
    throw std::runtime_error("cannot listen for gRPC on " + options_.address + ": " + error);
  }
}

Acceptor::~Acceptor() {
  stop();
  for (int fd : {listen_fd_, epoll_fd_, stop_fd_}) ::close(fd);
}

void Acceptor::start(Handoff handoff) {
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { run(); });
}

void Acceptor::stop() {
  if (stopped_) return;
  stopped_ = true;
  ::shutdown(listen_fd_, SHUT_RD);  // later connects are refused
  const std::uint64_t one = 1;
  if (thread_.joinable()) {
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  for (const auto& [dup, key] : conns_) ::close(dup);  // the connections themselves stay gRPC's
  conns_.clear();
}

// How long epoll_wait() may sleep: until accepting resumes, or the next sweep while busy; else until an event.
int Acceptor::wait_ms() const {
  auto until = Clock::time_point::max();
  if (paused_until_ != Clock::time_point{}) until = paused_until_;
  if (limits_.busy()) until = std::min(until, next_sweep_);
  if (until == Clock::time_point::max()) return -1;
  const auto ms = std::chrono::ceil<milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 1000));
}

void Acceptor::run() {
  std::vector<epoll_event> ready(256);
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, ready.data(), static_cast<int>(ready.size()), wait_ms());
    if (n < 0 && errno != EINTR) return;
    bool incoming = false;
    for (int i = 0; i < n; ++i) {  // connections gone first: their places are free for the new ones
      const epoll_event& e = ready[static_cast<std::size_t>(i)];
      if (e.data.fd == stop_fd_) return;
      if (e.data.fd == listen_fd_) incoming = true;
      else if (e.events & EPOLLHUP) release(e.data.fd, false);
    }
    if (paused_until_ != Clock::time_point{} && Clock::now() >= paused_until_) {
      pause_accepting(false);
      incoming = true;
    }
    if (incoming) accept_all();
    if (limits_.busy() && Clock::now() >= next_sweep_) sweep();
  }
}

void Acceptor::pause_accepting(bool paused) {
  epoll_event ev{};
  ev.events = paused ? 0u : static_cast<std::uint32_t>(EPOLLIN);
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  paused_until_ = paused ? Clock::now() + kAcceptRetry : Clock::time_point{};
}

// A batch at a time: under a flood the listening socket is never empty, and the connections gone (their places)
// must be seen between batches. It stays readable, so epoll_wait() returns at once for the next batch.
void Acceptor::accept_all() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd, peer);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM) continue;
    // Out of descriptors: the listening socket stays readable, so wait a little rather than spin on it; a place
    // shed meanwhile, or a connection gone, makes room.
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      make_room();
      pause_accepting(true);
    }
    return;  // EAGAIN: nothing more waiting
  }
}

void Acceptor::refuse(int fd, std::string_view reason) {
  notify(events_.refused, reason);  // first: whoever sees the connection closed sees it counted
  ::close(fd);
}

void Acceptor::admit(int fd, const sockaddr_storage& peer) {
  const int ceiling = options_.fd_ceiling;
  if (ceiling > 0 && fd >= ceiling) return refuse(fd, "descriptor_reserve");
  std::string key = limits_.ip_key(server::connections::address_of(reinterpret_cast<const sockaddr*>(&peer)));
  if (!key.empty() && !limits_.take_ip(key)) return refuse(fd, "too_many_connections_from_ip");
  if (!limits_.take() && !make_room()) {
    limits_.give();
    if (!key.empty()) limits_.give_ip(key);
    return refuse(fd, "too_many_connections");
  }
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0 || (ceiling > 0 && dup >= ceiling) || !watch(epoll_fd_, dup, EPOLLET)) {
    if (dup >= 0) ::close(dup);
    limits_.give();
    if (!key.empty()) limits_.give_ip(key);
    return refuse(fd, "descriptor_reserve");
  }
  const int nodelay = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);  // small frames, answered at once
  conns_.emplace(dup, std::move(key));
  notify(events_.connection, 1);
  handoff_(listen_fd_, fd);
}

void Acceptor::release(int dup, bool shed) {
  const auto it = conns_.find(dup);
  if (it == conns_.end()) return;
  if (shed) ::shutdown(dup, SHUT_RDWR);                 // gRPC reads the end of the stream, and closes its descriptor
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, dup, nullptr);  // gRPC's descriptor keeps the registration alive otherwise
  ::close(dup);
  limits_.give();
  if (!it->second.empty()) limits_.give_ip(it->second);
  conns_.erase(it);
  notify(events_.connection, -1);
}

std::uint32_t Acceptor::quiet_ms(int dup) const {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(dup, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return info.tcpi_last_data_recv;
}

// One scan finds the quietest few, and the connections after it take them one by one, so that a burst at the cap
// costs one scan, not one each. Their order holds meanwhile (each grows as quiet as the others until it hears from
// its client), and one heard from since, or gone, is passed over. A scan that finds none quiet enough is not made
// again for kMinQuiet: a flood at a cap of busy connections costs one scan per kMinQuiet.
bool Acceptor::make_room() {
  const auto min_quiet = static_cast<std::uint32_t>(kMinQuiet.count());
  for (bool scanned = false;; scanned = true) {
    while (!candidates_.empty()) {
      const int dup = candidates_.back();
      candidates_.pop_back();
      if (conns_.contains(dup) && quiet_ms(dup) >= min_quiet) {
        release(dup, true);
        return true;
      }
    }
    const auto now = Clock::now();
    if (scanned || now < rescan_after_) return false;
    std::vector<std::pair<std::uint32_t, int>> quiet;
    quiet.reserve(conns_.size());
    for (const auto& [dup, key] : conns_) {
      if (const std::uint32_t q = quiet_ms(dup); q >= min_quiet) quiet.emplace_back(q, dup);
    }
    const std::size_t keep = std::min(kCandidates, quiet.size());
    std::partial_sort(quiet.begin(), quiet.begin() + static_cast<std::ptrdiff_t>(keep), quiet.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = keep; i > 0; --i) candidates_.push_back(quiet[i - 1].second);  // quietest at the back
    if (keep == 0) rescan_after_ = now + kMinQuiet;
  }
}

void Acceptor::sweep() {
  const auto idle = static_cast<std::uint32_t>(options_.busy_idle_timeout.count());
  std::vector<int> shed;
  for (const auto& [dup, key] : conns_) {
    if (quiet_ms(dup) >= idle) shed.push_back(dup);
  }
  for (const int dup : shed) {
    if (!limits_.busy()) break;  // below the mark again
    release(dup, true);
  }
  next_sweep_ =
      Clock::now() + std::clamp<Clock::duration>(options_.busy_idle_timeout / 10, milliseconds(10), milliseconds(1000));
}

}  // namespace rk::server::grpc::detail
