// TLS to Redis, host names and the password file, against a real redis-server with a TLS port on certificates made
// by tests/support/make_redis_certs.sh: a verified connection by address, by name and with a client certificate; each
// refused handshake (another CA, another name, an expired certificate, no TLS) failing within the timeout, counted,
// with OpenSSL's reason; every bad TLS or password file refused naming its flag and file; a password file read again
// when it changes.
//
// One redis-server serves each test; the certificate it serves is changed with CONFIG SET tls-cert-file (Redis
// reloads it for new connections), so that the refused handshakes need no server of their own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <future>

#include "support/redis_process.h"
#include "store/redis/client.h"
#include "store/redis/remote.h"
#include "store/redis/shared_counters.h"
#include "store/redis/transport.h"

namespace rk::store::redis {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;
using redis_test::TestCerts;

std::chrono::milliseconds within(std::chrono::milliseconds timeout) { return 3 * timeout + 1000ms; }

Result run(Client& c, std::vector<std::string> args) {
  std::promise<Result> p;
  auto f = p.get_future();
  c.exec(std::move(args), "", [&p](Result r) { p.set_value(std::move(r)); });
  return f.get();
}

std::string error_of(const Result& r) { return std::holds_alternative<Error>(r) ? std::get<Error>(r).message : ""; }

// Where a command must succeed, its timeouts are far beyond what a loaded machine under TSan takes.
constexpr auto kPatient = 3000ms;

ClientOptions patient(const std::string& url) {
  auto o = ClientOptions::parse_url(url);
  o.command_timeout = o.connect_timeout = kPatient;
  o.backoff_min = 10ms;
  o.backoff_max = 20ms;
  return o;
}

ClientOptions tls_options(const std::string& host, int port, std::chrono::milliseconds timeout = kPatient) {
  auto o = ClientOptions::parse_url("rediss://" + host + ":" + std::to_string(port));
  o.tls_files.ca_file = TestCerts::get().file("ca.crt");
  o.command_timeout = o.connect_timeout = timeout;
  o.backoff_min = 10ms;
  o.backoff_max = 50ms;
  return o;
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// A redis-server with a plain port (for the test's own commands) and a TLS one.
struct TlsRedis {
  explicit TlsRedis(std::string_view clients = "optional", std::vector<std::string> extra = {})
      : tls_port(redis_test::free_port()),
        redis(with(TestCerts::get().redis_flags(tls_port, "server.crt", clients), std::move(extra))) {}
  static std::vector<std::string> with(std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  void serve(std::string_view cert) {
    Client plain(patient(redis.url()));
    ASSERT_TRUE(
        std::holds_alternative<Reply>(run(plain, {"CONFIG", "SET", "tls-cert-file", TestCerts::get().file(cert)})));
  }
  int tls_port;
  RedisProcess redis;
};

TEST(RedisTlsUrl, SchemesHostNamesAndDescribe) {
  auto o = ClientOptions::parse_url("rediss://u:p@redis.example.com:6380/2");
  EXPECT_TRUE(o.tls);
  EXPECT_EQ(o.mode, ClientOptions::Mode::kSingle);
  EXPECT_EQ(o.endpoints[0].host, "redis.example.com");
  EXPECT_EQ(describe(o), "rediss://redis.example.com:6380");
  o = ClientOptions::parse_url("rediss+cluster://a.example:7000,b.example:7001");
  EXPECT_EQ(o.mode, ClientOptions::Mode::kCluster);
  EXPECT_EQ(describe(o), "rediss+cluster://a.example:7000,b.example:7001");
  o = ClientOptions::parse_url("rediss+sentinel://s1.example,s2.example:5000/mymaster");
  EXPECT_EQ(describe(o), "rediss+sentinel://s1.example:26379,s2.example:5000/mymaster");
  EXPECT_FALSE(ClientOptions::parse_url("redis+cluster://localhost:7000").tls);
  for (const char* bad : {"redis://bad_host!:6379", "rediss://-x.example", "redis://a..b", "rediss+x://h"}) {
    EXPECT_THROW(ClientOptions::parse_url(bad), std::invalid_argument) << bad;
  }
}

TEST(RedisTls, VerifiedByAddressByNameAndWithAClientCertificate) {
  TlsRedis r("yes");  // Redis requires a client certificate
  for (const std::string& host : {std::string("127.0.0.1"), std::string("localhost"), hostname()}) {
    auto o = tls_options(host, r.tls_port);
    o.tls_files.cert_file = TestCerts::get().file("client.crt");
    o.tls_files.key_file = TestCerts::get().file("client.key");
    Client c(o);
    const Result set = run(c, {"SET", "k", host});
    EXPECT_TRUE(std::holds_alternative<Reply>(set)) << host << ": " << error_of(set);
    EXPECT_EQ(c.stats().tls_failures, 0u);
  }
  Client anonymous(tls_options("127.0.0.1", r.tls_port));  // no certificate: Redis ends the handshake
  EXPECT_FALSE(std::holds_alternative<Reply>(run(anonymous, {"PING"})));
}

TEST(RedisTls, EachRefusedHandshakeFailsWithinTheTimeoutCountedWithItsReason) {
  TlsRedis r;
  struct Case {
    const char* what;
    const char* cert;  // Redis serves
    const char* ca;    // we trust
    const char* name;  // --redis-tls-server-name, or empty
    const char* reason;
  };
  const Case cases[] = {
      {"another CA", "server.crt", "other-ca.crt", "", "self-signed certificate in certificate chain"},
      {"another name", "wrong-name.crt", "ca.crt", "", "IP address mismatch"},
      {"a name asked for", "server.crt", "ca.crt", "wrong.example", "hostname mismatch"},
      {"expired", "expired.crt", "ca.crt", "", "certificate has expired"},
  };
  const auto timeout = 1000ms;  // a handshake under TSan on a loaded machine ends well within it, refused
  for (const Case& k : cases) {
    r.serve(k.cert);
    auto o = tls_options("127.0.0.1", r.tls_port, timeout);
    o.tls_files.ca_file = TestCerts::get().file(k.ca);
    o.tls_files.server_name = k.name;
    Client c(o);
    const auto start = std::chrono::steady_clock::now();
    const Result first = run(c, {"PING"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, within(timeout)) << k.what;
    ASSERT_TRUE(std::holds_alternative<Error>(first)) << k.what;
    EXPECT_EQ(std::get<Error>(first).kind, Error::Kind::kConnection) << k.what;
    EXPECT_NE(error_of(first).find(k.reason), std::string::npos) << k.what << ": " << error_of(first);
    EXPECT_EQ(c.stats().tls_failures, 1u) << k.what;
    // While the node backs off, a command is refused at once with the same reason.
    EXPECT_NE(error_of(run(c, {"PING"})).find(k.reason), std::string::npos) << k.what;
  }
  r.serve("server.crt");
  // The plain port: Redis takes the ClientHello for an unfinished command and waits; connect_timeout ends it.
  auto o = tls_options("127.0.0.1", r.redis.port(), timeout);
  o.connect_timeout = timeout;
  Client not_tls(o);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(std::holds_alternative<Reply>(run(not_tls, {"PING"})));
  EXPECT_LT(std::chrono::steady_clock::now() - start, within(timeout));
}

TEST(RedisHostNames, ANameIsResolvedAndOneThatIsNotFailsInTime) {
  RedisProcess redis;
  Client named(patient("redis://localhost:" + std::to_string(redis.port())));
  EXPECT_TRUE(std::holds_alternative<Reply>(run(named, {"PING"})));
  auto o = ClientOptions::parse_url("redis://no-such-host.invalid:6379");
  o.command_timeout = 300ms;
  Client unknown(o);
  const auto start = std::chrono::steady_clock::now();
  const Result r = run(unknown, {"PING"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, within(o.connect_timeout));
  EXPECT_FALSE(std::holds_alternative<Reply>(r));
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

// Each bad file or combination stops the client's construction with its flag and file named, never the password.
TEST(RedisTlsFiles, EveryBadFileOrCombinationNamesItsFlagAndFile) {
  const TestCerts& certs = TestCerts::get();
  const std::string garbage = certs.file("garbage.pem"), empty = certs.file("empty-password");
  write_file(garbage, "not a certificate\n");
  write_file(empty, "\n");
  struct Case {
    std::string url;
    TlsOptions tls;
    std::string password_file;
    std::string expected;
  };
  const Case cases[] = {
      {"redis://127.0.0.1", {.ca_file = certs.file("ca.crt")}, "", "--redis-tls-ca: given with a plain redis URL"},
      {"rediss://127.0.0.1",
       {.cert_file = certs.file("client.crt")},
       "",
       "--redis-tls-cert: '" + certs.file("client.crt") + "' needs"},
      {"rediss://127.0.0.1",
       {.key_file = certs.file("client.key")},
       "",
       "--redis-tls-key: '" + certs.file("client.key") + "' needs"},
      {"rediss://127.0.0.1", {.ca_file = "/nonexistent/ca.crt"}, "", "--redis-tls-ca: '/nonexistent/ca.crt' cannot"},
      {"rediss://127.0.0.1", {.ca_file = garbage}, "", "--redis-tls-ca: '" + garbage + "' cannot be used"},
      {"rediss://127.0.0.1",
       {.cert_file = certs.file("client.crt"), .key_file = certs.file("server.key")},
       "",
       "--redis-tls-key: '" + certs.file("server.key") + "' cannot be used"},
      {"redis://127.0.0.1", {}, empty, "--redis-password-file: '" + empty + "' is empty"},
      {"redis://127.0.0.1", {}, "/nonexistent/pw", "--redis-password-file: '/nonexistent/pw' cannot be read"},
  };
  for (const Case& k : cases) {
    auto o = ClientOptions::parse_url(k.url);
    o.tls_files = k.tls;
    o.password_file = k.password_file;
    try {
      Client c(o);
      ADD_FAILURE() << k.expected << ": accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(k.expected), std::string::npos) << e.what();
    }
  }
}

TEST(RedisPasswordFile, WinsOverTheUrlsAndIsReadAgainWhenItChanges) {
  RedisProcess redis({"--requirepass", "first-secret"});
  const std::string path = TestCerts::get().file("password");
  write_file(path, "first-secret\n");
  auto o = patient("redis://:url-secret@127.0.0.1:" + std::to_string(redis.port()));
  o.password_file = path;
  Client c(o);
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"CONFIG", "SET", "requirepass", "second-secret"})));
  write_file(path, "second-secret-now\n");  // another size, so that a change within the mtime's tick is seen too
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"CONFIG", "SET", "requirepass", "second-secret-now"})));
  run(c, {"CLIENT", "KILL", "TYPE", "normal"});  // every connection, ours included, must AUTH again
  std::string last;
  for (int i = 0; i < 200 && !std::holds_alternative<Reply>(run(c, {"PING"})); ++i) {
    last = error_of(run(c, {"PING"}));
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(std::holds_alternative<Reply>(run(c, {"PING"}))) << last;
  EXPECT_EQ(last.find("secret"), std::string::npos) << last;  // no password in an error
  // An ACL user named in the URL, its password from the file.
  ASSERT_TRUE(std::holds_alternative<Reply>(run(c, {"ACL", "SETUSER", "rk", "on", ">user-secret", "~*", "+@all"})));
  write_file(path, "user-secret");
  auto user = patient("redis://rk:@127.0.0.1:" + std::to_string(redis.port()));  // "user:" + file
  user.password_file = path;
  Client as_user(user);
  const Result who = run(as_user, {"ACL", "WHOAMI"});
  ASSERT_TRUE(std::holds_alternative<Reply>(who)) << error_of(who);
  EXPECT_EQ(std::get<Reply>(who).str, "rk");
}

// `sharing: batched` domains have their own client (shared_counters.h): it must go through the same TLS files and
// password file as the decisions' client, which it once did not (a batched domain behind rediss:// with a private CA
// or --redis-password-file could not reach Redis).
TEST(RedisTls, BatchedDomainsCountersGoThroughTheSameTlsAndPasswordFile) {
  TlsRedis r("optional", {"--requirepass", "batched-secret"});
  const std::string path = TestCerts::get().file("batched-password");
  write_file(path, "batched-secret\n");
  RedisRemoteOptions o{.url = "rediss://localhost:" + std::to_string(r.tls_port),
                       .tls = {.ca_file = TestCerts::get().file("ca.crt")},
                       .password_file = path,
                       .timeout = kPatient,
                       .connect_timeout = kPatient};
  const ClientOptions c = client_options(o);
  EXPECT_EQ(c.tls_files.ca_file, o.tls.ca_file);
  EXPECT_EQ(c.password_file, path);
  auto counters = make_redis_shared_counters(o);
  std::promise<std::vector<store::remote::CounterReply>> p;
  counters->sync({{.key = "rk:tls:k", .add = 7, .ttl = std::chrono::seconds(60)}},
                 [&p](std::vector<store::remote::CounterReply> replies) { p.set_value(std::move(replies)); });
  const auto replies = p.get_future().get();
  counters->close();
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_TRUE(replies[0].ok) << replies[0].error;
  ASSERT_EQ(replies[0].counts.size(), 1u);
  EXPECT_EQ(replies[0].counts[0].first, counters->server_id());
  EXPECT_EQ(replies[0].counts[0].second, 7u);
}

}  // namespace
}  // namespace rk::store::redis
