// tests/support/redis_process.h: a real redis-server (Debian's) as a child process on a free loopback port, for the
// tests. kill() and start() again on the same port; stop(SIGSTOP) pauses it. TestCerts: certificates for TLS.
// TricklingServer: the slow peer a hostile or broken Sentinel or Redis node can be.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace rk::redis_test {

using namespace std::chrono_literals;

// A port free on 127.0.0.1 now, drawn at random from under the kernel's ephemeral range (ip_local_port_range): a
// port the kernel handed out by bind(0) can be handed out again as another process's outgoing source port before
// redis-server binds it ("Address already in use"); one under that range never is. Its Cluster bus port (port +
// 10000) is free and under that range too, or a Cluster node fails to start when an outgoing connection holds it.
inline int free_port() {
  constexpr int kBus = 10000;
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  std::random_device seed;
  std::mt19937 rng(seed());
  std::uniform_int_distribution<int> pick(10000, std::min(low, 65536) - kBus - 1);
  const auto bindable = [](int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return bound;
  };
  for (;;) {
    const int port = pick(rng);
    if (bindable(port) && bindable(port + kBus)) return port;
  }
}

// redis-cli's answer to `args` (one command, words split by the shell) against the server on `port`, trimmed.
inline std::string redis_cli(int port, const std::string& args) {
  FILE* f = ::popen(("/usr/bin/redis-cli -p " + std::to_string(port) + " " + args).c_str(), "r");
  std::string out;
  char buf[4096];
  while (f && std::fgets(buf, sizeof buf, f)) out += buf;
  if (f) ::pclose(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// How many times the server on `port` ran `command` ("fcall", "evalsha", "eval") since its last CONFIG RESETSTAT,
// from INFO commandstats; 0 if never.
inline long command_calls(int port, const std::string& command) {
  const std::string out = redis_cli(port, "INFO commandstats");
  const std::string field = "cmdstat_" + command + ":calls=";
  const auto at = out.find(field);
  return at == std::string::npos ? 0 : std::stol(out.substr(at + field.size()));
}

inline bool answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (ok) {
    const char ping[] = "PING\r\n";
    char buf[64];
    ok = ::send(fd, ping, sizeof ping - 1, MSG_NOSIGNAL) == sizeof ping - 1;
    const auto n = ok ? ::recv(fd, buf, sizeof buf, 0) : -1;
    const std::string_view got(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    ok = got.starts_with("+PONG") || got.starts_with("-NOAUTH");
  }
  ::close(fd);
  return ok;
}

// A redis-server child process; kill() and start() again on the same port.
class RedisProcess {
 public:
  explicit RedisProcess(std::vector<std::string> extra = {}) : port_(free_port()), extra_(std::move(extra)) { start(); }
  ~RedisProcess() { kill(); }
  void start() {
    const std::string port = std::to_string(port_);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that aborts leaves no server behind
      std::vector<std::string> args = {"redis-server", "--port", port,         "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no",     "--loglevel", "warning"};
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/usr/bin/redis-server", argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 1000 && !answers(port_); ++i) std::this_thread::sleep_for(10ms);  // a real process starting
    ASSERT_TRUE(answers(port_)) << "redis-server did not start on port " << port_;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
};

// The certificates of tests/support/make_redis_certs.sh (ca.crt, server.crt, ...), made once per test binary in a
// temporary directory removed at exit.
class TestCerts {
 public:
  static const TestCerts& get() {
    static const TestCerts certs;
    return certs;
  }
  std::string file(std::string_view name) const { return dir_ + "/" + std::string(name); }
  // redis-server's flags for a TLS port serving `cert` (server.crt, expired.crt, ...), clients' certificates
  // checked against ca.crt when they send one (`clients`: "optional" or "yes").
  std::vector<std::string> redis_flags(int tls_port, std::string_view cert = "server.crt",
                                       std::string_view clients = "optional") const {
    return {"--tls-port",         std::to_string(tls_port), "--tls-cert-file",    file(cert),
            "--tls-key-file",     file("server.key"),       "--tls-ca-cert-file", file("ca.crt"),
            "--tls-auth-clients", std::string(clients)};
  }

 private:
  TestCerts() {
    char dir[] = "/tmp/rk-certs-XXXXXX";
    if (::mkdtemp(dir) == nullptr) ADD_FAILURE() << "no temporary directory";
    dir_ = dir;
    if (std::system((std::string(RK_MAKE_REDIS_CERTS) + " " + dir_).c_str()) != 0) {
      ADD_FAILURE() << RK_MAKE_REDIS_CERTS << " failed";
    }
  }
  ~TestCerts() { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

// A loopback TCP server that accepts every connection and, once it has been sent anything, answers `head` after
// `head_after`, then a reply that never ends (an array whose bulk string is a megabyte long) one byte every
// `every`, or with `every` zero, nothing more. With a `greeting`, that is answered at once to the first bytes a peer
// sends, and `head_after` counts from the next. What it is sent is read and dropped.
class TricklingServer {
 public:
  struct Options {
    std::chrono::milliseconds every{20};
    std::string head;
    std::chrono::milliseconds head_after{0};
    std::string greeting;
  };
  explicit TricklingServer(Options o) : o_(std::move(o)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
      ADD_FAILURE() << "the trickling server cannot listen";
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~TricklingServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  struct Peer {
    int fd;
    std::chrono::steady_clock::time_point asked{};  // when it first sent something; zero: not yet
    bool greeted = false;
    bool head_sent = false;
    std::size_t at = 0;  // bytes of the trickle sent
  };

  void run() {
    const std::string trickle = "*2\r\n$1000000\r\n" + std::string(1000000, 'a');
    std::vector<Peer> peers;
    const auto period = o_.every.count() > 0 ? o_.every : std::chrono::milliseconds(10);
    auto last = std::chrono::steady_clock::now();
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const Peer& p : peers) fds.push_back({p.fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), static_cast<int>(period.count()));
      const auto now = std::chrono::steady_clock::now();
      if (fds[0].revents & POLLIN) {
        if (const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK); fd >= 0) {
          peers.push_back({fd});
          ++accepted_;
        }
      }
      for (std::size_t i = fds.size() - 1; i >= 1; --i) {  // backwards: a peer that hung up is erased
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char drop[4096];
        if (::recv(fds[i].fd, drop, sizeof drop, 0) <= 0) {
          ::close(fds[i].fd);
          peers.erase(peers.begin() + static_cast<std::ptrdiff_t>(i - 1));
        } else if (Peer& p = peers[i - 1]; !o_.greeting.empty() && !p.greeted) {
          ::send(p.fd, o_.greeting.data(), o_.greeting.size(), MSG_NOSIGNAL);
          p.greeted = true;
        } else if (p.asked == std::chrono::steady_clock::time_point{}) {
          p.asked = now;
        }
      }
      const bool tick = now - last >= period;
      if (tick) last = now;
      for (Peer& p : peers) {
        if (p.asked == std::chrono::steady_clock::time_point{} || now - p.asked < o_.head_after) continue;
        if (!p.head_sent) {
          if (!o_.head.empty()) ::send(p.fd, o_.head.data(), o_.head.size(), MSG_NOSIGNAL);
          p.head_sent = true;
        } else if (tick && o_.every.count() > 0 && p.at < trickle.size()) {
          ::send(p.fd, trickle.data() + p.at++, 1, MSG_NOSIGNAL);
        }
      }
    }
    for (const Peer& p : peers) ::close(p.fd);
  }

  Options o_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace rk::redis_test
