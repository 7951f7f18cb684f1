// The HTTP server against a plain blocking POSIX-socket client, so the test shares no code with the server.
// The tests that wait for a timeout set it to a few hundred milliseconds and wait on a real socket; they bound the
// wait by the timeout they set (at least it, at most kLate times it), never by a tight wall time, so that a busy
// machine or TSan does not fail them. The other tests keep the default timeouts, far out of their way.
#include "server/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace rk::server::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Reply {
  int status = 0;  // 0: the connection closed (or timed out) before a whole response came
  std::string head;
  std::string body;
  // The value of a header field, by lower-case name; "" if absent.
  std::string header(const std::string& name) const {
    const std::string h = lower(head);
    const auto at = h.find("\r\n" + name + ":");
    if (at == std::string::npos) return "";
    const auto start = head.find_first_not_of(' ', at + name.size() + 3);
    return head.substr(start, head.find("\r\n", start) - start);
  }
  bool has(const std::string& name) const { return lower(head).find("\r\n" + name + ":") != std::string::npos; }
};

class Client {
 public:
  // `from`: the loopback address to connect from (all of 127.0.0.0/8 is the loopback interface's).
  // `receive_buffer`: SO_RCVBUF, if not 0 (the kernel's least if small): what the client takes in without reading.
  explicit Client(std::uint16_t port, const char* from = "127.0.0.1", int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (receive_buffer > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in source{};
    source.sin_family = AF_INET;
    ::inet_pton(AF_INET, from, &source.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // False if the server closed the connection first.
  bool send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // One response: its head, then Content-Length bytes of body (none for HEAD, 1xx, 204, 304).
  Reply read(bool head_only = false) {
    Reply r;
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return {};
    }
    r.head = buf_.substr(0, end + 2);
    buf_.erase(0, end + 4);
    r.status = r.head.starts_with("HTTP/1.") && r.head.size() > 12 ? std::stoi(r.head.substr(9, 3)) : -1;
    const std::string length = r.header("content-length");
    const bool bodiless = head_only || r.status < 200 || r.status == 204 || r.status == 304;
    const std::size_t n = bodiless || length.empty() ? 0 : std::stoul(length);
    while (buf_.size() < n) {
      if (!fill()) return {};
    }
    r.body = buf_.substr(0, n);
    buf_.erase(0, n);
    return r;
  }
  Reply get(const std::string& target) {
    send("GET " + target + " HTTP/1.1\r\nHost: t\r\n\r\n");
    return read();
  }

  // True if the server closed (end of stream, or a reset) before sending anything more.
  bool closed() {
    if (!buf_.empty()) return false;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  // True if the server closed cleanly: end of stream, not a reset.
  bool clean_eof() {
    char c;
    return buf_.empty() && ::recv(fd_, &c, 1, 0) == 0;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

 private:
  bool fill() {
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

template <class Pred>
bool eventually(Pred pred) {
  const auto until = Clock::now() + 5s;
  while (!pred()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// The handler's header fields for HandlerHeadersAreCheckedByteByByte: /header?N answers kHeaderCases[N]. The
// first is sendable (every tchar symbol in its name; a tab and obs-text in its value); the rest are not.
const std::pair<std::string, std::string> kHeaderCases[] = {
    {"X-Ok!#$%&'*+-.^_`|~09az", "tab\there \x80\xff"},
    {"X Bad", "v"},
    {"X:Bad", "v"},
    {"", "v"},
    {"X-\x80", "v"},
    {"X-Bad\r", "v"},
    {"X-Bad", std::string("a\0b", 3)},
    {"X-Bad", "a\rb"},
    {"X-Bad", "a\nb"},
};

// For FieldLinesAreSentAsTheyAreAndChecked: /field-lines?N answers kFieldLineCases[N] as Response::field_lines.
const std::string kFieldLineCases[] = {
    "",  // made with begin_field() and end_field()
    "X-Bad 1\r\n",
    "X-Bad:1\r\n",
    "X-Bad: 1",
    "X-Bad: 1\n",
    std::string("X-Bad: a\0b\r\n", 13),
    "X-Bad: a\nb\r\n",
    "content-length: 5\r\n",
    "X-Ok: 1\r\nConnection: close\r\n",
};

struct HttpServer : ::testing::Test {
  void start(ServerOptions o = {}) {
    ServerEvents events{
        .on_bad_request =
            [this](std::string_view reason) {
              std::lock_guard lock(mu);
              ++reasons[std::string(reason)];
            },
        .on_connection = [this](int delta) { connections += delta; },
        .on_handler_error =
            [this](std::string_view what) {
              std::lock_guard lock(mu);
              handler_errors.emplace_back(what);
            },
    };
    server = std::make_unique<Server>(
        o, [this](const Request& req, Response& res) { handle(req, res); }, events);
    server->start();
  }

  void handle(const Request& req, Response& res) {
    if (req.path.starts_with("/defer")) return defer(req);
    if (req.path == "/throw") throw std::runtime_error("secret detail");
    if (req.path == "/throw-int") throw 42;
    if (req.path == "/inject") res.headers.emplace_back("X-Bad", "a\r\nSet-Cookie: x=1");
    if (req.path == "/status") res.status = std::stoi(std::string(req.query));
    if (req.path == "/header") {
      const auto& [name, value] = kHeaderCases[std::stoul(std::string(req.query))];
      res.headers.emplace_back(name, value);
      return;
    }
    if (req.path == "/field-lines") {
      const std::size_t i = std::stoul(std::string(req.query));
      res.headers.emplace_back("X-Before", "0");
      res.field_lines = kFieldLineCases[i];
      if (i == 0) {
        res.begin_field("X-One").append("1");
        res.end_field();
        res.begin_field("X-Two").append("two words");
        res.end_field();
      }
      return;
    }
    if (req.path == "/content-type") res.content_type = std::string("text/plain\0", 11);
    if (req.path == "/close") res.headers.emplace_back("Connection", "close");
    if (req.path == "/stop") server->stop();  // from a handler: must not deadlock
    if (req.path == "/thread") {              // which of the server's threads serves this connection
      res.body = std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
      return;
    }
    if (req.path == "/slow") {
      std::unique_lock lock(mu);
      entered = true;
      cv.notify_all();
      cv.wait_for(lock, 5s, [&] { return release; });
    }
    res.headers.emplace_back("X-Echo", std::string(req.header("x-test")));
    res.body = std::string(req.method) + " " + std::string(req.path) + " q=" + std::string(req.query) +
               " ip=" + std::string(req.remote_ip) + " n=" + std::to_string(req.headers("X-MULTI").size()) +
               " body=" + std::string(req.body);
  }

  // /defer parks its Reply for the test to send; /defer-thread answers from another thread at once; -drop drops
  // it unsent; -twice calls defer() twice; -throw throws after deferring, parking the stale Reply.
  void defer(const Request& req) {
    rk::server::http::Reply reply = req.defer();
    const std::string body = "deferred " + std::string(req.query);
    if (req.path == "/defer-drop") return;
    if (req.path == "/defer-twice") (void)req.defer();
    if (req.path == "/defer-thread") {
      std::thread([reply = std::move(reply), body]() mutable { reply.send({.body = body}); }).detach();
      return;
    }
    std::lock_guard lock(mu);
    parked.push_back(std::move(reply));
    cv.notify_all();
    if (req.path == "/defer-throw") throw std::runtime_error("after deferring");
  }
  rk::server::http::Reply take_parked() {
    std::unique_lock lock(mu);
    cv.wait_for(lock, 5s, [&] { return !parked.empty(); });
    if (parked.empty()) return {};
    rk::server::http::Reply r = std::move(parked.front());
    parked.erase(parked.begin());
    return r;
  }

  int count(const std::string& reason) {
    std::lock_guard lock(mu);
    return reasons[reason];
  }
  int bad_requests() {
    std::lock_guard lock(mu);
    int n = 0;
    for (const auto& [reason, k] : reasons) n += k;
    return n;
  }
  std::uint16_t port() const { return server->port(); }

  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;  // under mu
  bool release = false;  // under mu
  std::map<std::string, int> reasons;
  std::vector<std::string> handler_errors;
  std::vector<rk::server::http::Reply> parked;  // under mu
  std::atomic<int> connections{0};
  std::unique_ptr<Server> server;  // last: stopped before the members its handler uses go
};

// Small limits, default timeouts.
ServerOptions small_limits() {
  return ServerOptions{.max_body_bytes = 100, .max_header_bytes = 1024, .drain_timeout = 2s};
}

// For the tests of the timeouts themselves.
ServerOptions short_timeouts() {
  ServerOptions o = small_limits();
  o.header_timeout = 200ms;
  o.idle_timeout = 300ms;
  return o;
}

// A timeout is seen to fire at the time it was set to at the earliest (each test starts its clock before the
// server starts the timeout's), and before kLate times it: late by the sweep (a tenth of the timeout) and by a
// busy machine, generously, but not left to hang (the client gives up reading after 5 s).
constexpr int kLate = 15;

TEST_F(HttpServer, RoundTripWithHeadersAndBody) {
  start();
  Client c(port());
  ASSERT_TRUE(c.connected());
  c.send(
      "POST /a/b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nx-TEST: yes\r\nX-Multi: 1\r\nX-Multi: 2\r\n"
      "Content-Length: 5\r\n\r\nhello");
  const Reply r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("x-echo"), "yes");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
  EXPECT_FALSE(r.has("connection"));  // HTTP/1.1: kept alive without saying so
  EXPECT_EQ(r.body, "POST /a/b q=x=1&y=2 ip=127.0.0.1 n=2 body=hello");
  EXPECT_TRUE(r.head.starts_with("HTTP/1.1 200 OK\r\n"));
}

TEST_F(HttpServer, KeepAliveServesManyRequestsOnOneConnection) {
  start();
  Client c(port());
  for (int i = 0; i < 5; ++i) {
    const Reply r = c.get("/k" + std::to_string(i));
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body.substr(0, 7), "GET /k" + std::to_string(i));
  }
  EXPECT_EQ(connections.load(), 1);
}

TEST_F(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  start();
  Client c(port());
  c.send("GET /one HTTP/1.1\r\nHost: h\r\n\r\nPOST /two HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(c.read().body.substr(0, 8), "GET /one");
  EXPECT_EQ(c.read().body, "POST /two q= ip=127.0.0.1 n=0 body=abc");
  // Many more than fit in one read or one write, in one go.
  std::string burst;
  for (int i = 0; i < 2000; ++i) burst += "GET /p" + std::to_string(i) + " HTTP/1.1\r\n\r\n";
  c.send(burst);
  for (int i = 0; i < 2000; ++i) {
    const Reply r = c.read();
    ASSERT_EQ(r.body.substr(0, r.body.find(' ', 4)), "GET /p" + std::to_string(i));
  }
}

TEST_F(HttpServer, Http10ClosesUnlessAskedToKeepAlive) {
  start();
  Client c(port());
  c.send("GET /x HTTP/1.0\r\n\r\n");
  const Reply r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.closed());

  Client k(port());
  k.send("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  const Reply first = k.read();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.header("connection"), "keep-alive");
  k.send("GET /y HTTP/1.0\r\n\r\n");  // this one does not ask: answered, then closed
  EXPECT_EQ(k.read().body.substr(0, 6), "GET /y");
  EXPECT_TRUE(k.closed());
}

TEST_F(HttpServer, HeadGetsTheHeadOnlyAnd204NoBody) {
  start();
  Client c(port());
  c.send("HEAD /h HTTP/1.1\r\n\r\n");
  const Reply head = c.read(/*head_only=*/true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), std::to_string(std::string("HEAD /h q= ip=127.0.0.1 n=0 body=").size()));
  const Reply none = c.get("/status?204");  // had there been a body after the HEAD, this would read it
  EXPECT_EQ(none.status, 204);
  EXPECT_FALSE(none.has("content-length"));
  EXPECT_EQ(c.get("/after").status, 200);  // and none after the 204 either
}

TEST_F(HttpServer, ChunkedBodiesAndExpectContinue) {
  start(small_limits());
  Client c(port());
  c.send(
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n");
  EXPECT_EQ(c.read().body, "POST /c q= ip=127.0.0.1 n=0 body=abcde");
  c.send("POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_EQ(c.read().status, 100);
  c.send("ok");
  EXPECT_EQ(c.read().body, "POST /e q= ip=127.0.0.1 n=0 body=ok");
  // A chunked body over the limit is refused like any other.
  Client big(port());
  big.send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n" + std::string(101, 'x') + "\r\n0\r\n\r\n");
  EXPECT_EQ(big.read().status, 413);
  EXPECT_EQ(count("body_too_large"), 1);
}

TEST_F(HttpServer, EmptyLinesBeforeARequestAreIgnored) {
  start();
  Client c(port());
  c.send("POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx\r\n");  // a stray CRLF after the body
  EXPECT_EQ(c.read().status, 200);
  EXPECT_EQ(c.get("/b").status, 200);
  EXPECT_EQ(bad_requests(), 0);
}

// Sends raw bytes on a new connection; expects one error answer with the documented JSON, then a close.
void expect_refused(std::uint16_t port, const std::string& raw, int status, const std::string& reason) {
  Client c(port);
  c.send(raw);
  const Reply r = c.read();
  EXPECT_EQ(r.status, status) << raw.substr(0, 80);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_TRUE(r.body.starts_with("{\"error\":{\"code\":" + std::to_string(status) + ",\"reason\":\"" + reason +
                                 "\",\"message\":\""))
      << r.body;
  EXPECT_TRUE(r.body.ends_with("\"}}")) << r.body;
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpServer, MalformedRequestsGet400AndAClose) {
  start(small_limits());
  const std::vector<std::string> bad = {
      "BLAH\r\n\r\n",
      "GET / HTTP/9.9\r\n\r\n",
      "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",  // smuggling
      "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nxyz",
      "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15),  // TLS to a plain port
  };
  for (const auto& raw : bad) expect_refused(port(), raw, 400, "malformed");
  EXPECT_EQ(count("malformed"), static_cast<int>(bad.size()));
  // A good request after a bad one, on the same connection, is not read.
  Client c(port());
  c.send("BLAH\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(c.read().status, 400);
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpServer, OversizedBodyAndHeadGet413And431) {
  start(small_limits());
  expect_refused(port(), "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "body_too_large");
  expect_refused(port(), "GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'y') + "\r\n\r\n", 431, "header_too_large");
  expect_refused(port(), "GET /" + std::string(2000, 'y') + " HTTP/1.1\r\n\r\n", 431, "header_too_large");
  // The limit is on the request line and the fields together, whether they come in one piece or two.
  const std::string line = "GET /" + std::string(600, 'y') + " HTTP/1.1\r\n",
                    fields = "X: " + std::string(600, 'y') + "\r\n\r\n";
  expect_refused(port(), line + fields, 431, "header_too_large");
  {
    Client c(port());
    c.send(line);
    std::this_thread::sleep_for(20ms);
    c.send(fields);
    EXPECT_EQ(c.read().status, 431);
  }
  EXPECT_EQ(count("body_too_large"), 1);
  EXPECT_EQ(count("header_too_large"), 4);
  // A body at the limit is fine.
  Client c(port());
  c.send("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'b'));
  EXPECT_EQ(c.read().status, 200);
}

TEST_F(HttpServer, AfterRefusingABodyTheServerLingersSoTheClientIsNotReset) {
  start(small_limits());
  Client c(port());
  c.send("POST / HTTP/1.1\r\nContent-Length: 10000\r\n\r\n" + std::string(5000, 'z'));
  EXPECT_EQ(c.read().status, 413);
  // The client, not having read the answer yet, sends more of its body: discarded, not answered with a reset.
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(c.send(std::string(5000, 'z')));
  c.shutdown_write();
  EXPECT_TRUE(c.clean_eof());
}

TEST_F(HttpServer, TheClientReadsTheRefusalOfABodyItIsStillSending) {
  start(small_limits());
  Client c(port());
  // More than the server discards (1 MiB) and than the socket buffers hold: the client is still sending when the
  // server gives up on it.
  const std::string body(4 << 20, 'z');
  std::thread sender(
      [&] { c.send("POST / HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body); });
  const Reply r = c.read();
  sender.join();
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("\"reason\":\"body_too_large\""), std::string::npos) << r.body;
  EXPECT_EQ(count("body_too_large"), 1);
  EXPECT_EQ(count("timeout"), 0);
}

// A client that sends its whole upload before it reads (as many do) has answers waiting that it has not taken in
// yet: its receive window is shut, and the refusal is still in the server's send queue when the server has
// discarded 1 MiB. Closing then would reset the connection and throw the answers away; the server goes on
// discarding until the client has them (here, until it has sent all, and reads).
TEST_F(HttpServer, ARefusalIsNotLostBehindAnswersTheClientHasNotReadYet) {
  start(small_limits());
  Client c(port(), "127.0.0.1", /*receive_buffer=*/1);
  constexpr int kAnswers = 100;  // some 11 KiB of answers: more than the client's least receive buffer
  std::string upload;
  for (int i = 0; i < kAnswers; ++i) upload += "GET /p" + std::to_string(i) + " HTTP/1.1\r\n\r\n";
  const std::string body(4 << 20, 'z');
  upload += "POST / HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_TRUE(c.send(upload));  // all of it, while the answers wait
  for (int i = 0; i < kAnswers; ++i) {
    const Reply r = c.read();
    ASSERT_EQ(r.status, 200) << i;
    ASSERT_TRUE(r.body.starts_with("GET /p" + std::to_string(i) + " ")) << r.body;
  }
  EXPECT_EQ(c.read().status, 413);
  EXPECT_TRUE(c.clean_eof());
}

TEST_F(HttpServer, SlowlorisIsCutOffAfterTheHeaderTimeout) {
  const ServerOptions o = short_timeouts();
  start(o);
  const auto timeout = o.header_timeout;
  {
    Client c(port());
    const auto t0 = Clock::now();
    c.send("GET / HTTP/1.1\r\nHost: slowloris\r\n");  // never finishes its head
    const Reply r = c.read();
    const auto waited = Clock::now() - t0;
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(c.closed());
    EXPECT_GE(waited, timeout);
    EXPECT_LT(waited, kLate * timeout);
  }
  {
    Client c(port());  // trickling does not extend it: the 408 comes while the client still trickles
    std::atomic<bool> answered{false};
    const auto t0 = Clock::now();
    c.send("GET / HTTP/1.1\r\n");
    std::thread trickler([&] {
      while (!answered && c.send("X: y\r\n") && Clock::now() - t0 < 2 * kLate * timeout) {
        std::this_thread::sleep_for(timeout / 10);
      }
    });
    const Reply r = c.read();
    const auto waited = Clock::now() - t0;
    answered = true;
    trickler.join();
    EXPECT_EQ(r.status, 408);
    EXPECT_GE(waited, timeout);
    EXPECT_LT(waited, kLate * timeout);
  }
  {
    Client c(port());  // a body that never comes
    c.send("POST / HTTP/1.1\r\nContent-Length: 50\r\n\r\nabc");
    EXPECT_EQ(c.read().status, 408);
  }
  {
    Client c(port());  // a connection that sends nothing at all
    EXPECT_TRUE(c.closed());
  }
  {
    Client c(port());  // the second request of a kept-alive connection has the same limit
    EXPECT_EQ(c.get("/").status, 200);
    c.send("GET / HTTP/1.1\r\n");
    EXPECT_EQ(c.read().status, 408);
  }
  EXPECT_EQ(count("timeout"), 5);
}

TEST_F(HttpServer, IdleKeepAliveIsClosedWithoutCountingIt) {
  const ServerOptions o = short_timeouts();
  start(o);
  Client c(port());
  const auto t0 = Clock::now();  // before the request: the server's idle clock starts after its answer
  EXPECT_EQ(c.get("/").status, 200);
  EXPECT_TRUE(c.closed());
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, o.idle_timeout);
  EXPECT_LT(waited, kLate * o.idle_timeout);
  EXPECT_EQ(bad_requests(), 0);
  EXPECT_TRUE(eventually([&] { return connections.load() == 0; }));
}

TEST_F(HttpServer, HandlerFailuresGet500AndTheConnectionStaysUsable) {
  start();
  Client c(port());
  for (const std::string path : {"/throw", "/throw-int", "/inject", "/status?99", "/status?600"}) {
    const Reply r = c.get(path);
    EXPECT_EQ(r.status, 500) << path;
    EXPECT_EQ(r.body.find("secret"), std::string::npos);  // the exception's text is for the log only
    EXPECT_FALSE(r.has("set-cookie"));
    EXPECT_TRUE(r.body.starts_with(R"({"error":{"code":500,"reason":"handler_error","message":")")) << r.body;
  }
  EXPECT_EQ(c.get("/fine").status, 200);
  std::lock_guard lock(mu);
  ASSERT_EQ(handler_errors.size(), 5u);
  EXPECT_EQ(handler_errors[0], "the handler threw: secret detail");
  EXPECT_EQ(handler_errors[3], "the handler answered status 99");
  EXPECT_TRUE(reasons.empty());  // the server's fault, not the client's
}

TEST_F(HttpServer, HandlerHeadersAreCheckedByteByByte) {
  start();
  Client c(port());
  const Reply ok = c.get("/header?0");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("x-ok!#$%&'*+-.^_`|~09az"), kHeaderCases[0].second);
  for (std::size_t i = 1; i < std::size(kHeaderCases); ++i) {
    EXPECT_EQ(c.get("/header?" + std::to_string(i)).status, 500) << i;
  }
  EXPECT_EQ(c.get("/content-type").status, 500);
  std::lock_guard lock(mu);
  ASSERT_EQ(handler_errors.size(), std::size(kHeaderCases));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NE(handler_errors[i].find("is not a token"), std::string::npos) << i;
  for (std::size_t i = 5; i < 8; ++i) {
    EXPECT_NE(handler_errors[i].find("has CR, LF or NUL in its value"), std::string::npos) << i;
  }
  EXPECT_EQ(handler_errors[8], "the handler's Content-Type has CR, LF or NUL in it");
}

TEST_F(HttpServer, FieldLinesAreSentAsTheyAreAndChecked) {
  start();
  Client c(port());
  const Reply ok = c.get("/field-lines?0");
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.head.find("\r\nX-Before: 0\r\nX-One: 1\r\nX-Two: two words\r\nContent-Length: 0\r\n"), std::string::npos)
      << ok.head;
  for (std::size_t i = 1; i < std::size(kFieldLineCases); ++i) {
    const Reply bad = c.get("/field-lines?" + std::to_string(i));
    EXPECT_EQ(bad.status, 500) << i;
    EXPECT_FALSE(bad.has("x-before")) << i;  // the 500 is the server's own: nothing of the handler's answer
  }
  EXPECT_EQ(c.get("/field-lines?0").status, 200);  // the connection goes on, and the lines are the new answer's
  std::lock_guard lock(mu);
  ASSERT_EQ(handler_errors.size(), std::size(kFieldLineCases) - 1);
  EXPECT_NE(handler_errors[6].find("field lines set content-length"), std::string::npos);
  EXPECT_NE(handler_errors[7].find("field lines set Connection"), std::string::npos);
}

TEST_F(HttpServer, AHandlerCanAskToClose) {
  start();
  Client c(port());
  const Reply r = c.get("/close");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.closed());
}

// Both places taken by connections in the middle of a request, so none is idle to give way.
TEST_F(HttpServer, ConnectionsPastTheLimitGet503) {
  start(ServerOptions{.threads = 2, .max_connections = 2});
  auto a = std::make_unique<Client>(port());
  Client b(port());
  ASSERT_TRUE(a->send("GET /defer HTTP/1.1\r\nHost: t\r\n\r\n"));
  rk::server::http::Reply for_a = take_parked();
  ASSERT_TRUE(b.send("GET /defer HTTP/1.1\r\nHost: t\r\n\r\n"));
  rk::server::http::Reply for_b = take_parked();
  ASSERT_TRUE(for_a && for_b);
  {
    Client c(port());
    const Reply r = c.read();
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_NE(r.body.find("\"reason\":\"too_many_connections\""), std::string::npos);
    EXPECT_TRUE(c.closed());
  }
  EXPECT_EQ(count("too_many_connections"), 1);
  for_a.send({});
  EXPECT_EQ(a->read().status, 200);
  a.reset();  // a place frees up
  ASSERT_TRUE(eventually([&] { return connections.load() == 1; }));
  Client d(port());
  EXPECT_EQ(d.get("/").status, 200);
  EXPECT_EQ(connections.load(), 2);  // the rejected one was never counted
}

// An attack: one client held every place with idle kept-alive connections, and the next client got 503.
TEST_F(HttpServer, OneAddressGetsNoMoreThanItsShareOfConnections) {
  start(ServerOptions{
      .threads = 2, .max_connections = 100, .max_connections_per_ip = 3, .per_ip_exempt = {"127.0.0.3", "10.0.0.0/8"}});
  std::vector<std::unique_ptr<Client>> hog;
  for (int i = 0; i < 3; ++i) {
    hog.push_back(std::make_unique<Client>(port(), "127.0.0.1"));
    ASSERT_EQ(hog.back()->get("/").status, 200);  // and then idle, kept alive
  }
  for (int i = 0; i < 2; ++i) {
    Client extra(port(), "127.0.0.1");
    const Reply r = extra.read();
    EXPECT_EQ(r.status, 503);
    EXPECT_NE(r.body.find("\"reason\":\"too_many_connections_from_ip\""), std::string::npos) << r.body;
    EXPECT_TRUE(extra.closed());
  }
  EXPECT_EQ(count("too_many_connections_from_ip"), 2);
  Client other(port(), "127.0.0.2");
  EXPECT_EQ(other.get("/").status, 200);
  EXPECT_NE(other.get("/").body.find("ip=127.0.0.2"), std::string::npos);
  std::vector<std::unique_ptr<Client>> proxy;  // exempt: bounded by max_connections only
  for (int i = 0; i < 5; ++i) {
    proxy.push_back(std::make_unique<Client>(port(), "127.0.0.3"));
    ASSERT_EQ(proxy.back()->get("/").status, 200) << i;
  }
  hog.front().reset();  // its place is the address's again once it is gone
  ASSERT_TRUE(eventually([&] { return connections.load() == 2 + 1 + 5; }));
  Client again(port(), "127.0.0.1");
  EXPECT_EQ(again.get("/").status, 200);
  for (auto& c : hog) {
    if (c) {
      EXPECT_EQ(c->get("/").status, 200);  // the ones admitted were never disturbed
    }
  }
}

// Every place taken by idle connections (one that has sent nothing yet, and kept-alive ones): a new client sheds
// the one idle longest and is served at once; busy_idle_timeout is out of the way here.
TEST_F(HttpServer, IdleConnectionsGiveWayToANewClientWhenEveryPlaceIsTaken) {
  start(ServerOptions{
      .threads = 1, .max_connections = 4, .max_connections_per_ip = 0, .busy_idle_timeout = std::chrono::minutes(1)});
  Client silent(port());  // connected, sends nothing: idle the longest
  ASSERT_TRUE(eventually([&] { return connections.load() == 1; }));
  Client a(port(), "127.0.0.2"), b(port(), "127.0.0.3"), c(port(), "127.0.0.4");
  for (Client* k : {&a, &b, &c}) ASSERT_EQ(k->get("/").status, 200);
  Client first(port(), "127.0.0.5");
  EXPECT_EQ(first.get("/").status, 200);
  EXPECT_TRUE(silent.closed());
  Client second(port(), "127.0.0.6");
  EXPECT_EQ(second.get("/").status, 200);
  EXPECT_TRUE(a.closed());  // next longest idle
  EXPECT_EQ(b.get("/").status, 200);
  EXPECT_EQ(c.get("/").status, 200);
  EXPECT_EQ(bad_requests(), 0);  // giving way is not counted against anyone
  EXPECT_EQ(connections.load(), 4);
}

// Below 3/4 of max_connections an idle connection keeps its idle_timeout; from there on busy_idle_timeout. One
// thread, so that one sweep sees every connection (each thread's sweep looks at the mark for itself).
TEST_F(HttpServer, UnderPressureIdleConnectionsAreClosedSooner) {
  ServerOptions o = short_timeouts();
  o.threads = 1;
  o.max_connections = 8;
  o.max_connections_per_ip = 0;
  o.idle_timeout = std::chrono::minutes(1);
  o.header_timeout = std::chrono::minutes(1);
  o.busy_idle_timeout = 300ms;
  start(o);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 5; ++i) {
    idle.push_back(std::make_unique<Client>(port()));
    ASSERT_EQ(idle.back()->get("/").status, 200);
  }
  std::this_thread::sleep_for(3 * o.busy_idle_timeout);
  ASSERT_EQ(connections.load(), 5);  // 5 of 8: not yet under pressure, none closed
  Client sixth(port());
  ASSERT_EQ(sixth.get("/").status, 200);          // 6 of 8: the five, idle past busy_idle_timeout, give way
  for (auto& c : idle) EXPECT_TRUE(c->closed());  // within the client's 5 s, far below idle_timeout
  EXPECT_TRUE(eventually([&] { return connections.load() <= 1; }));
  Client later(port());
  EXPECT_EQ(later.get("/").status, 200);
  EXPECT_EQ(bad_requests(), 0);
}

TEST_F(HttpServer, StopLetsTheRequestInFlightFinish) {
  start();
  Client idle(port()), busy(port());
  ASSERT_EQ(idle.get("/").status, 200);
  busy.send("GET /slow HTTP/1.1\r\n\r\n");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return entered; }));  // the request is in flight
  }
  std::thread stopper([&] { server->stop(); });
  // New connections are refused at once, though a thread is still busy in the handler.
  EXPECT_TRUE(eventually([&] { return !Client(port()).connected(); }));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  const Reply r = busy.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");  // nothing more is served on it
  EXPECT_TRUE(busy.closed());
  EXPECT_TRUE(idle.closed());  // the idle one was closed
  busy.close();
  stopper.join();
  server->stop();  // idempotent
  EXPECT_FALSE(Client(port()).connected());
  EXPECT_EQ(connections.load(), 0);
}

TEST_F(HttpServer, StopFromSeveralThreadsAndFromAHandler) {
  start();
  Client c(port());
  EXPECT_EQ(c.get("/stop").header("connection"), "close");  // the drain began under the handler's feet
  c.close();
  std::thread a([&] { server->stop(); }), b([&] { server->stop(); });
  a.join();
  b.join();
  EXPECT_FALSE(Client(port()).connected());
}

TEST_F(HttpServer, ManyClientsAtOnce) {
  start(ServerOptions{.threads = 2});
  constexpr int kClients = 8, kRequests = 500;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      Client c(port());
      for (int i = 0; i < kRequests; ++i) {
        const std::string path = "/c" + std::to_string(t) + "/" + std::to_string(i);
        const std::string body(static_cast<std::size_t>(i % 50), 'b');
        c.send("POST " + path + " HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
        const Reply r = c.read();
        if (r.status == 200 && r.body == "POST " + path + " q= ip=127.0.0.1 n=0 body=" + body) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), kClients * kRequests);
  EXPECT_EQ(bad_requests(), 0);
}

// A burst of connections (wrk opens its 64 at once) went all to whichever thread was running, since Asio
// accepts again at once while the backlog is not empty, and the other thread sat idle. Each connection now goes to
// the thread serving the fewest, whichever accepted it; two threads accepting at the same instant may both keep
// theirs, so the two counts may differ by two.
TEST_F(HttpServer, ABurstOfConnectionsIsSpreadOverTheThreads) {
  start(ServerOptions{.threads = 2});
  constexpr int kClients = 16;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Client>(port()));  // all connected before any is served
    ASSERT_TRUE(clients.back()->connected());
  }
  std::map<std::string, int> per_thread;
  for (auto& c : clients) {
    const Reply r = c->get("/thread");
    ASSERT_EQ(r.status, 200);
    ++per_thread[r.body];
  }
  ASSERT_EQ(per_thread.size(), 2u);
  EXPECT_LE(std::abs(per_thread.begin()->second - per_thread.rbegin()->second), 2);
  for (auto& c : clients) EXPECT_EQ(c->get("/thread").status, 200);  // and each goes on being served
  EXPECT_TRUE(eventually([&] { return connections.load() == kClients; }));
  EXPECT_EQ(bad_requests(), 0);
}

TEST_F(HttpServer, ADeferredAnswerComesFromAnotherThreadAndKeepsPipelinedOrder) {
  start();
  Client c(port());
  ASSERT_TRUE(c.send("GET /defer?a HTTP/1.1\r\nHost: t\r\n\r\nGET /after HTTP/1.1\r\nHost: t\r\n\r\n"));
  rk::server::http::Reply reply = take_parked();
  ASSERT_TRUE(reply);
  std::thread([&] { reply.send({.status = 429, .headers = {{"Retry-After", "3"}}, .body = "later"}); }).join();
  const auto first = c.read();
  EXPECT_EQ(first.status, 429);
  EXPECT_EQ(first.header("retry-after"), "3");
  EXPECT_EQ(first.body, "later");
  const auto second = c.read();
  EXPECT_EQ(second.status, 200);
  EXPECT_TRUE(second.body.starts_with("GET /after")) << second.body;
  reply.send({.body = "again"});  // a second send does nothing
  EXPECT_EQ(c.get("/x").status, 200);
}

TEST_F(HttpServer, ManyDeferredAnswersFromOtherThreads) {
  start({.threads = 2});
  std::vector<std::thread> clients;
  std::atomic<int> right{0};
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      Client c(port());
      for (int i = 0; i < 50; ++i) {
        const std::string q = std::to_string(t) + "-" + std::to_string(i);
        const auto r = c.get("/defer-thread?" + q);
        right += r.status == 200 && r.body == "deferred " + q;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(right.load(), 300);
}

TEST_F(HttpServer, ADroppedOrDoubleDeferralIs500AndTheConnectionGoesOn) {
  start();
  Client c(port());
  EXPECT_EQ(c.get("/defer-drop").status, 500);
  EXPECT_EQ(c.get("/defer-twice").status, 500);
  EXPECT_EQ(c.get("/defer-throw").status, 500);
  take_parked().send({.body = "stale"});  // the handler threw after deferring: its Reply is stale
  EXPECT_TRUE(c.get("/x").body.starts_with("GET /x"));
  std::lock_guard lock(mu);
  ASSERT_EQ(handler_errors.size(), 3u);
  EXPECT_NE(handler_errors[0].find("dropped"), std::string::npos) << handler_errors[0];
  EXPECT_NE(handler_errors[1].find("twice"), std::string::npos) << handler_errors[1];
  EXPECT_NE(handler_errors[2].find("after deferring"), std::string::npos) << handler_errors[2];
}

TEST_F(HttpServer, AReplySentAfterTheServerStoppedIsDiscarded) {
  start({.drain_timeout = 200ms});
  Client c(port());
  ASSERT_TRUE(c.send("GET /defer HTTP/1.1\r\nHost: t\r\n\r\n"));
  rk::server::http::Reply reply = take_parked();
  server->stop();  // the drain times out on the waiting connection
  server.reset();
  reply.send({.body = "too late"});  // must touch nothing of the server
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpServer, StopWaitsForADeferredAnswerAndClosesAfterIt) {
  start();
  Client c(port());
  ASSERT_TRUE(c.send("GET /defer?x HTTP/1.1\r\nHost: t\r\n\r\n"));
  rk::server::http::Reply reply = take_parked();
  std::thread stopper([&] { server->stop(); });
  ASSERT_TRUE(eventually([&] { return !Client(port()).connected(); }));  // no longer accepting
  reply.send({.body = "in time"});
  const auto r = c.read();
  stopper.join();
  EXPECT_EQ(r.body, "in time");
  EXPECT_EQ(lower(r.header("connection")), "close");
}

TEST(HttpServerStart, CannotListenIsAClearError) {
  Server a(ServerOptions{}, [](const Request&, Response&) {});
  a.start();
  const auto message = [](ServerOptions o) -> std::string {
    try {
      Server s(o, [](const Request&, Response&) {});
      s.start();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message({.port = a.port()}),
            "cannot listen on 127.0.0.1:" + std::to_string(a.port()) + ": Address already in use");
  EXPECT_EQ(message({.address = "not-an-ip"}), "cannot listen on not-an-ip:0: 'not-an-ip' is not an IP address");
  EXPECT_EQ(message({.address = "192.0.2.1"}), "cannot listen on 192.0.2.1:0: Cannot assign requested address");
}

TEST(HttpServerStart, ABadPerIpExemptionIsAClearError) {
  for (const std::string bad : {"localhost", "10.0.0.0/33", "::1/129", "10.0.0.1/x", ""}) {
    try {
      Server s({.per_ip_exempt = {"127.0.0.1", bad}}, [](const Request&, Response&) {});
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "ServerOptions::per_ip_exempt: '" + bad + "' is not an IP address or CIDR range (like 10.0.0.0/8)");
    }
  }
}

TEST(HttpServerStart, StopWithoutStartAndPortFromConstruction) {
  Server s(ServerOptions{}, [](const Request&, Response&) {});
  EXPECT_NE(s.port(), 0);
  s.stop();
  s.start();  // after stop: does nothing
  EXPECT_FALSE(Client(s.port()).connected());
}

TEST(HttpRequest, HeaderLookupIsCaseInsensitive) {
  const Field fields[] = {{"Host", "h"}, {"X-A", "1"}, {"x-a", "2"}};
  Request req;
  req.fields = fields;
  EXPECT_EQ(req.header("HOST"), "h");
  EXPECT_EQ(req.header("x-a"), "1");
  EXPECT_EQ(req.headers("X-a"), (std::vector<std::string_view>{"1", "2"}));
  EXPECT_EQ(req.header("absent"), "");
}

}  // namespace
}  // namespace rk::server::http
