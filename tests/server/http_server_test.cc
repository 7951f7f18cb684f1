// The HTTP server with a plain blocking POSIX-socket client, so the test shares no code with the server.
#include "server/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

namespace rk::http {
namespace {

using namespace std::chrono_literals;

class Client {
 public:
  explicit Client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(std::string_view s) { ASSERT_EQ(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

  // Reads one response (head + Content-Length body); "" if the connection closed first.
  std::string response() {
    for (;;) {
      const auto head_end = buf_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::size_t length = 0;
        const auto cl = buf_.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) length = std::stoul(buf_.substr(cl + 16));
        if (buf_.size() >= head_end + 4 + length) {
          std::string r = buf_.substr(0, head_end + 4 + length);
          buf_.erase(0, r.size());
          return r;
        }
      }
      char tmp[65536];
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return "";
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }
  bool closed() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_;
  bool connected_ = false;
  std::string buf_;
};

int status_of(const std::string& r) { return r.size() > 12 ? std::stoi(r.substr(9, 3)) : 0; }
std::string body_of(const std::string& r) { return r.substr(r.find("\r\n\r\n") + 4); }

struct Fixture : ::testing::Test {
  void start(ServerOptions o = {}) {
    server = std::make_unique<Server>(
        o,
        [this](const Request& req, Response& res) {
          if (req.path == "/throw") throw std::runtime_error("boom");
          if (req.path == "/slow") {
            entered = true;
            while (!release.load()) std::this_thread::yield();
          }
          res.headers.emplace_back("X-Echo-Header", std::string(req.header("x-test")));
          res.body = std::string(req.method) + " " + std::string(req.path) + " q=" + std::string(req.query) +
                     " ip=" + std::string(req.remote_ip) + " n=" + std::to_string(req.headers("x-multi").size()) +
                     " body=" + std::string(req.body);
        },
        ServerEvents{.on_bad_request =
                         [this](std::string_view reason) {
                           std::lock_guard lock(mu);
                           ++reasons[std::string(reason)];
                         }});
    server->start();
  }
  int count(const std::string& reason) {
    std::lock_guard lock(mu);
    return reasons[reason];
  }
  std::unique_ptr<Server> server;
  std::atomic<bool> release{false};
  std::atomic<bool> entered{false};
  std::mutex mu;
  std::map<std::string, int> reasons;
};

TEST_F(Fixture, RoundTripKeepAliveAndPipelining) {
  start();
  Client c(server->port());
  ASSERT_TRUE(c.connected());
  c.send("POST /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Test: yes\r\nX-Multi: 1\r\nX-Multi: 2\r\nContent-Length: 5\r\n\r\nhello");
  std::string r = c.response();
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(r.find("X-Echo-Header: yes"), std::string::npos);
  EXPECT_EQ(body_of(r), "POST /a/b q=x=1 ip=127.0.0.1 n=2 body=hello");
  // The same connection, two requests in one write: two answers, in order.
  c.send("GET /one HTTP/1.1\r\nHost: h\r\n\r\nGET /two HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_NE(c.response().find("GET /one"), std::string::npos);
  EXPECT_NE(c.response().find("GET /two"), std::string::npos);
  // HEAD: headers only.
  c.send("HEAD /h HTTP/1.1\r\nHost: h\r\n\r\nGET /after HTTP/1.1\r\nHost: h\r\n\r\n");
  r = c.response();
  EXPECT_EQ(status_of(r), 200);
  c.send("");
}

TEST_F(Fixture, Http10ClosesUnlessAskedToKeepAlive) {
  start();
  Client c(server->port());
  c.send("GET /x HTTP/1.0\r\n\r\n");
  EXPECT_EQ(status_of(c.response()), 200);
  EXPECT_TRUE(c.closed());
  Client k(server->port());
  k.send("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(status_of(k.response()), 200);
  k.send("GET /y HTTP/1.0\r\n\r\n");
  EXPECT_NE(k.response().find("GET /y"), std::string::npos);
}

TEST_F(Fixture, EachKindOfBadInput) {
  start(ServerOptions{.max_body_bytes = 100, .max_header_bytes = 1024, .header_timeout = 200ms, .idle_timeout = 300ms});
  {
    Client c(server->port());
    c.send("BLAH\r\n\r\n");
    const std::string r = c.response();
    EXPECT_EQ(status_of(r), 400);
    EXPECT_NE(body_of(r).find("\"reason\":\"malformed\""), std::string::npos);
    EXPECT_TRUE(c.closed());
  }
  {
    Client c(server->port());
    c.send("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
    EXPECT_EQ(status_of(c.response()), 413);
  }
  {
    Client c(server->port());
    c.send("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'y') + "\r\n\r\n");
    EXPECT_EQ(status_of(c.response()), 431);
  }
  {
    Client c(server->port());
    c.send("GET / HTTP/1.1\r\nHost: slowloris");  // never finishes its head
    EXPECT_EQ(c.response(), "");                  // closed after the header timeout
  }
  {
    Client c(server->port());
    c.send("GET / HTTP/1.1\r\n\r\n");
    EXPECT_EQ(status_of(c.response()), 200);
    EXPECT_EQ(c.response(), "");  // idle past the idle timeout: closed
  }
  {
    Client c(server->port());
    c.send("GET /throw HTTP/1.1\r\n\r\n");
    const std::string r = c.response();
    EXPECT_EQ(status_of(r), 500);
    EXPECT_NE(body_of(r).find("boom"), std::string::npos);
    c.send("GET /fine HTTP/1.1\r\n\r\n");  // still usable
    EXPECT_EQ(status_of(c.response()), 200);
  }
  EXPECT_EQ(count("malformed"), 1);
  EXPECT_EQ(count("body_too_large"), 1);
  EXPECT_EQ(count("header_too_large"), 1);
  EXPECT_EQ(count("timeout"), 1);  // the idle keep-alive is not an error
  EXPECT_EQ(count("handler_error"), 1);
}

TEST_F(Fixture, TooManyConnections) {
  start(ServerOptions{.threads = 1, .max_connections = 2});
  Client a(server->port()), b(server->port());
  a.send("GET / HTTP/1.1\r\n\r\n");
  b.send("GET / HTTP/1.1\r\n\r\n");
  ASSERT_EQ(status_of(a.response()), 200);
  ASSERT_EQ(status_of(b.response()), 200);
  Client c(server->port());
  EXPECT_EQ(status_of(c.response()), 503);
  EXPECT_EQ(count("too_many_connections"), 1);
}

TEST_F(Fixture, StopLetsTheRequestInFlightFinish) {
  start();
  Client busy(server->port()), idle(server->port());
  idle.send("GET / HTTP/1.1\r\n\r\n");
  ASSERT_EQ(status_of(idle.response()), 200);
  busy.send("GET /slow HTTP/1.1\r\n\r\n");
  while (!entered.load()) std::this_thread::yield();  // the request is in flight
  std::thread stopper([&] { server->stop(); });
  // The busy connection gets its answer when its handler returns; the idle one is closed. (The two may share a
  // thread, which the slow handler holds: so release it before looking at the idle one.)
  release = true;
  const std::string r = busy.response();
  EXPECT_TRUE(idle.closed());
  stopper.join();
  EXPECT_EQ(status_of(r), 200);
  EXPECT_TRUE(busy.closed());  // after its answer, nothing more is served
  server->stop();  // idempotent
}

TEST_F(Fixture, ManyClientsAtOnce) {
  start();
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      Client c(server->port());
      for (int i = 0; i < 300; ++i) {
        const std::string path = "/c" + std::to_string(t) + "/" + std::to_string(i);
        c.send("GET " + path + " HTTP/1.1\r\n\r\n");
        if (body_of(c.response()).rfind("GET " + path + " ", 0) == 0) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 8 * 300);
}

TEST(ServerStart, CannotListenIsAClearError) {
  Server a(ServerOptions{}, [](const Request&, Response&) {});
  a.start();
  try {
    Server bad(ServerOptions{.address = "not-an-ip"}, [](const Request&, Response&) {});
    bad.start();
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot listen on not-an-ip:0: 'not-an-ip' is not an IP address");
  }
}

}  // namespace
}  // namespace rk::http
