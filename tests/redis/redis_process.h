// tests/redis/redis_process.h: a real redis-server (Debian's) as a child process on a free loopback port, for the
// tests. kill() and start() again on the same port; stop(SIGSTOP) pauses it.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace rk::redis_test {

using namespace std::chrono_literals;

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
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
      std::vector<std::string> args = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--loglevel", "warning"};
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

}  // namespace rk::redis_test

