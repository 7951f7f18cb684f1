// The HTTP server over TLS (ServerOptions::tls), against a blocking OpenSSL client, on certificates made fresh by
// tests/support/make_certs.sh: HTTPS served, client certificates required, rotated files taken by new connections
// while open ones go on, bad files refused by name, and handshakes that never finish bounded by the header timeout
// and shed when the server is full. Timeouts are bounded relative to the timeout set, as in server_test.cc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "server/http/server.h"
#include "support/certs.h"

namespace rk::server::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using rk::tests::Certs;

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A TLS client trusting `ca`, with a client certificate if given; verifies the server's name (127.0.0.1).
class TlsClient {
 public:
  TlsClient(std::uint16_t port, const std::string& ca, const std::string& cert = "", const std::string& key = "") {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (!cert.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, cert.c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM);
    }
    fd_ = connect_to(port);
    ssl_ = SSL_new(ctx_);
    SSL_set1_host(ssl_, "127.0.0.1");
    SSL_set_fd(ssl_, fd_);
    handshake_ok_ = fd_ >= 0 && SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  bool handshake_ok() const { return handshake_ok_; }

  // The serial of the certificate the server presented, in hex ("01").
  std::string serial() const {
    X509* peer = SSL_get1_peer_certificate(ssl_);
    if (!peer) return "";
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(peer), nullptr);
    char* hex = BN_bn2hex(bn);
    std::string s = hex;
    OPENSSL_free(hex);
    BN_free(bn);
    X509_free(peer);
    return s;
  }

  // One GET on this connection (kept alive): the status and body, or status 0 if the connection failed.
  std::pair<int, std::string> get(const std::string& path) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n";
    if (!handshake_ok_ || SSL_write(ssl_, req.data(), static_cast<int>(req.size())) <= 0) return {0, ""};
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return {0, ""};
    }
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    const auto at = head.find("Content-Length: ");
    const std::size_t n = at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
    while (buf_.size() < n) {
      if (!fill()) return {0, ""};
    }
    std::string body = buf_.substr(0, n);
    buf_.erase(0, n);
    return {std::stoi(head.substr(9, 3)), body};
  }

 private:
  bool fill() {
    char tmp[16384];
    const int n = SSL_read(ssl_, tmp, sizeof tmp);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool handshake_ok_ = false;
  std::string buf_;
};

struct HttpsServer : ::testing::Test {
  void start(ServerOptions o) {
    ServerEvents events{.on_bad_request = [this](std::string_view reason) {
      std::lock_guard lock(mu);
      ++reasons[std::string(reason)];
    }};
    server = std::make_unique<Server>(
        std::move(o), [](const Request& req, Response& res) { res.body = "hello " + std::string(req.path); }, events);
    server->start();
  }
  ServerOptions tls_options(bool client_ca = false) const {
    ServerOptions o;
    o.threads = 1;  // one worker: a handshake that blocked it would block every test below
    o.tls = TlsFiles{
        .cert = certs("server.crt"), .key = certs("server.key"), .client_ca = client_ca ? certs("ca.crt") : ""};
    return o;
  }
  int count(const std::string& reason) {
    std::lock_guard lock(mu);
    return reasons[reason];
  }
  template <class Pred>
  static bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
    const auto until = Clock::now() + limit;
    while (!pred()) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }
  std::uint16_t port() const { return server->port(); }

  Certs certs;
  std::mutex mu;
  std::map<std::string, int> reasons;  // under mu
  std::unique_ptr<Server> server;
};

TEST_F(HttpsServer, ServesHttpsAndCountsPlaintextAsAFailedHandshake) {
  start(tls_options());
  TlsClient client(port(), certs("ca.crt"));
  ASSERT_TRUE(client.handshake_ok());
  EXPECT_EQ(client.serial(), "01");
  EXPECT_EQ(client.get("/a"), (std::pair<int, std::string>{200, "hello /a"}));
  EXPECT_EQ(client.get("/b"), (std::pair<int, std::string>{200, "hello /b"}));  // kept alive

  for (int i = 0; i < 3; ++i) ::close(connect_to(port()));  // TCP probes: closed before a ClientHello, not counted
  const int fd = connect_to(port());  // plain HTTP to the TLS port: no answer, the connection closed
  const std::string plain = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_EQ(::send(fd, plain.data(), plain.size(), MSG_NOSIGNAL), static_cast<ssize_t>(plain.size()));
  char c;
  EXPECT_LE(::recv(fd, &c, 1, 0), 0);
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return count("tls_handshake") == 1; }));
  std::this_thread::sleep_for(100ms);  // were the probes counted, late, they would show now
  EXPECT_EQ(count("tls_handshake"), 1);
}

TEST_F(HttpsServer, ClientCertificatesAreRequiredAndVerified) {
  start(tls_options(true));
  TlsClient good(port(), certs("ca.crt"), certs("client.crt"), certs("client.key"));
  ASSERT_TRUE(good.handshake_ok());
  EXPECT_EQ(good.get("/x").first, 200);
  // TLS 1.3 clients finish their half before the server has checked theirs: the refusal shows on the first read.
  TlsClient none(port(), certs("ca.crt"));
  EXPECT_EQ(none.get("/x").first, 0);
  TlsClient foreign(port(), certs("ca.crt"), certs("other.crt"), certs("other.key"));
  EXPECT_EQ(foreign.get("/x").first, 0);
  EXPECT_TRUE(eventually([&] { return count("tls_handshake") == 2; }));
}

TEST_F(HttpsServer, ARotatedCertificateIsTakenByNewConnectionsWhileOpenOnesGoOn) {
  start(tls_options());
  TlsClient before(port(), certs("ca.crt"));
  ASSERT_EQ(before.get("/1").first, 200);
  ASSERT_EQ(before.serial(), "01");

  certs.rotate_server(2);
  server->reload_tls();
  TlsClient after(port(), certs("ca.crt"));
  EXPECT_EQ(after.serial(), "02");
  EXPECT_EQ(after.get("/2").first, 200);
  EXPECT_EQ(before.get("/3"), (std::pair<int, std::string>{200, "hello /3"}));  // in flight: untouched
}

TEST_F(HttpsServer, AReloadOfFilesThatDoNotMatchKeepsTheOnesInUse) {
  start(tls_options());
  std::filesystem::copy_file(certs("client.key"), certs("server.key"),
                             std::filesystem::copy_options::overwrite_existing);
  try {
    server->reload_tls();
    ADD_FAILURE() << "a key of another certificate was taken";
  } catch (const TlsFileError& e) {
    EXPECT_EQ(e.which, TlsFileError::Which::kKey);
    EXPECT_NE(std::string(e.what()).find("does not match the certificate in " + certs("server.crt")), std::string::npos)
        << e.what();
  }
  TlsClient client(port(), certs("ca.crt"));
  EXPECT_EQ(client.serial(), "01");
  EXPECT_EQ(client.get("/still").first, 200);
}

// Two listeners on the same files (the public and admin ones of `serve`): read once, installed in both, they serve
// the same certificate after a rotation; a read that fails changes neither.
TEST_F(HttpsServer, TwoListenersTakeOneReadOfRotatedFilesOrNeitherChanges) {
  start(tls_options());
  Server admin(tls_options(), [](const Request&, Response& res) { res.body = "admin"; });
  admin.start();
  certs.rotate_server(2);
  auto fresh = server->prepare_tls();
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(TlsClient(port(), certs("ca.crt")).serial(), "01");  // prepared, not yet in use
  server->install_tls(fresh);
  admin.install_tls(fresh);
  EXPECT_EQ(TlsClient(port(), certs("ca.crt")).serial(), "02");
  EXPECT_EQ(TlsClient(admin.port(), certs("ca.crt")).serial(), "02");

  std::filesystem::copy_file(certs("client.key"), certs("server.key"),
                             std::filesystem::copy_options::overwrite_existing);  // a key of another certificate
  EXPECT_THROW(server->prepare_tls(), TlsFileError);
  EXPECT_EQ(TlsClient(port(), certs("ca.crt")).serial(), "02");
  EXPECT_EQ(TlsClient(admin.port(), certs("ca.crt")).serial(), "02");
  admin.stop();

  Server plain(ServerOptions{}, [](const Request&, Response&) {});  // without TLS: nothing to read or install
  EXPECT_EQ(plain.prepare_tls(), nullptr);
  plain.install_tls(fresh);
}

TEST(HttpsFiles, EachBadFileIsNamedWithWhatIsWrong) {
  Certs certs;
  auto problem = [](const TlsFiles& files) -> std::pair<TlsFileError::Which, std::string> {
    try {
      check_tls_files(files);
    } catch (const TlsFileError& e) {
      return {e.which, e.what()};
    }
    return {TlsFileError::Which::kCert, "accepted"};
  };
  const std::string crt = certs("server.crt"), key = certs("server.key");
  EXPECT_EQ(
      problem({.cert = certs("missing.crt"), .key = key}),
      std::make_pair(TlsFileError::Which::kCert, certs("missing.crt") + ": cannot read: No such file or directory"));
  auto [which, what] = problem({.cert = key, .key = key});  // a key where the certificate should be
  EXPECT_EQ(which, TlsFileError::Which::kCert);
  EXPECT_TRUE(what.starts_with(key + ": not a PEM certificate chain")) << what;
  std::tie(which, what) = problem({.cert = crt, .key = certs("client.key")});
  EXPECT_EQ(which, TlsFileError::Which::kKey);
  EXPECT_EQ(what, certs("client.key") + ": does not match the certificate in " + crt);
  std::tie(which, what) = problem({.cert = crt, .key = key, .client_ca = key});
  EXPECT_EQ(which, TlsFileError::Which::kClientCa);
  EXPECT_TRUE(what.starts_with(key + ": ")) << what;
  EXPECT_EQ(problem({.cert = crt, .key = key, .client_ca = certs("ca.crt")}).second, "accepted");
}

// The attack: connections that open and never finish their handshake (nothing sent, or half a ClientHello). They
// hold a place only until the header timeout, are counted as failed handshakes, never hold up the one worker, and
// when every place is taken a real client's connection sheds one of them rather than being refused.
TEST_F(HttpsServer, HandshakesThatNeverFinishAreShedAndTimedOut) {
  ServerOptions o = tls_options();
  o.max_connections = 4;
  o.header_timeout = 300ms;
  start(std::move(o));
  std::vector<int> stalled;
  const auto began = Clock::now();
  for (int i = 0; i < 8; ++i) {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    if (i % 2) (void)::send(fd, "\x16\x03\x01\x02\x00\x01", 6, MSG_NOSIGNAL);  // a ClientHello's first bytes
    stalled.push_back(fd);
  }
  TlsClient client(port(), certs("ca.crt"));  // sheds one of them; the worker is free to serve it
  ASSERT_TRUE(client.handshake_ok());
  EXPECT_EQ(client.get("/served").first, 200);
  // Those left are closed at the header timeout (not before), each counted.
  for (int fd : stalled) {
    char c;
    EXPECT_LE(::recv(fd, &c, 1, 0), 0);
    ::close(fd);
  }
  EXPECT_GE(Clock::now() - began, 300ms);
  // Eight came for four places, and the client took one: at least three timed out (more if the machine was so slow
  // that some timed out before the next came, leaving nothing to shed); shedding is not counted, nobody refused.
  EXPECT_TRUE(eventually([&] { return count("tls_handshake") >= 3; }));
  EXPECT_EQ(count("too_many_connections"), 0);
}

}  // namespace
}  // namespace rk::server::http
