// Envoy's rate-limit gRPC API and the gRPC health service, with a real gRPC client over loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/grpc/rls_server.h"

namespace rk::server::grpc {
namespace {

namespace pb = envoy::service::ratelimit::v3;
namespace hv = ::grpc::health::v1;

const char* kRules = R"(
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3, name: per_user}
  - key: plan
    value: free
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2, algorithm: earrrl, half_life: 10m}
  - key: vip
    rate_limit: {unlimited: true}
  - key: quiet
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: banned
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: in_flight
    rate_limit: {algorithm: concurrency, max_in_flight: 2}
)";

class GrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-grpc-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "edge.yaml") << kRules;
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    ASSERT_TRUE(reloader_->load_now().empty());
    service_ = std::make_unique<service::Service>(*reloader_, clock_);
    server_ =
        std::make_unique<GrpcServer>(*service_, GrpcOptions{.response_headers = true},
                                     GrpcHooks{.answered = [this](std::string_view c) { codes_.emplace_back(c); }});
    server_->start();
    channel_ =
        ::grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), ::grpc::InsecureChannelCredentials());
    stub_ = pb::RateLimitService::NewStub(channel_);
  }
  void TearDown() override {
    server_->stop();
    std::filesystem::remove_all(dir_);
  }

  static pb::RateLimitRequest request(const std::string& domain,
                                      std::vector<std::vector<std::pair<std::string, std::string>>> descriptors) {
    pb::RateLimitRequest r;
    r.set_domain(domain);
    for (const auto& d : descriptors) {
      auto* desc = r.add_descriptors();
      for (const auto& [k, v] : d) {
        auto* e = desc->add_entries();
        e->set_key(k);
        e->set_value(v);
      }
    }
    return r;
  }

  ::grpc::Status call(const pb::RateLimitRequest& req, pb::RateLimitResponse& resp) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ShouldRateLimit(&ctx, req, &resp);
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
  std::vector<std::string> codes_;
};

TEST_F(GrpcTest, FixedWindowThenOverLimit) {
  for (int i = 0; i < 3; ++i) {
    pb::RateLimitResponse resp;
    ASSERT_TRUE(call(request("edge", {{{"user", "ann"}}}), resp).ok());
    EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OK);
    ASSERT_EQ(resp.statuses_size(), 1);
    const auto& st = resp.statuses(0);
    EXPECT_EQ(st.code(), pb::RateLimitResponse::OK);
    EXPECT_EQ(st.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(st.current_limit().unit(), pb::RateLimitResponse::RateLimit::MINUTE);
    EXPECT_EQ(st.current_limit().name(), "per_user");
    EXPECT_EQ(st.limit_remaining(), static_cast<std::uint32_t>(2 - i));
    EXPECT_EQ(st.duration_until_reset().seconds(), 40);  // 1.7e18 ns is 20 s into its minute
  }
  pb::RateLimitResponse resp;
  ASSERT_TRUE(call(request("edge", {{{"user", "ann"}}}), resp).ok());
  EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(0).code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 0u);
  // The rate-limit header fields, when asked for: the library's one formatter, the same lines as forward-auth's
  // and the nginx module's (tests/http_fields/rate_limit_headers_test.cc).
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& h : resp.response_headers_to_add()) fields.emplace_back(h.key(), h.value());
  const std::vector<std::pair<std::string, std::string>> expected = {{"RateLimit-Policy", "\"per_user\";q=3;w=60"},
                                                                     {"RateLimit", "\"per_user\";r=0;t=40"},
                                                                     {"X-RateLimit-Limit", "3"},
                                                                     {"X-RateLimit-Remaining", "0"},
                                                                     {"X-RateLimit-Reset", "40"},
                                                                     {"Retry-After", "40"}};
  EXPECT_EQ(fields, expected);
}

// A refusal no wait can lift says one wait everywhere: duration_until_reset, which Envoy turns into its own
// X-RateLimit-Reset, and the header fields, all never (2147483647 s); not the second's end for a blocked rule, nor
// the window's for hits above the limit, after which the client would be refused again, for ever.
TEST_F(GrpcTest, ANeverRefusalSaysNeverInDurationAndHeaders) {
  auto blocked = request("edge", {{{"banned", "x"}}});
  auto oversize = request("edge", {{{"user", "dee"}}});
  oversize.set_hits_addend(4);  // per_user admits 3 a minute
  for (const auto& [req, policy] : {std::pair{blocked, "banned"}, std::pair{oversize, "per_user"}}) {
    pb::RateLimitResponse resp;
    ASSERT_TRUE(call(req, resp).ok());
    EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OVER_LIMIT) << policy;
    EXPECT_EQ(resp.statuses(0).duration_until_reset().seconds(), 2147483647) << policy;
    EXPECT_EQ(resp.statuses(0).duration_until_reset().nanos(), 0) << policy;
    std::map<std::string, std::string> fields;
    for (const auto& h : resp.response_headers_to_add()) fields[h.key()] = h.value();
    EXPECT_TRUE(fields["RateLimit"].ends_with(";t=2147483647")) << policy << ": " << fields["RateLimit"];
    EXPECT_EQ(fields["X-RateLimit-Reset"], "2147483647") << policy;
    EXPECT_EQ(fields["Retry-After"], "2147483647") << policy;
  }
}

TEST_F(GrpcTest, EnvoySemanticsPerDescriptor) {
  pb::RateLimitResponse resp;
  auto req =
      request("edge", {{{"plan", "free"}, {"user", "bo"}}, {{"vip", "x"}}, {{"nothing", "y"}}, {{"quiet", "q"}}});
  ASSERT_TRUE(call(req, resp).ok());
  ASSERT_EQ(resp.statuses_size(), 4);
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 2u);  // nested, earrrl
  EXPECT_EQ(resp.statuses(1).limit_remaining(), 4294967295u);           // unlimited
  EXPECT_FALSE(resp.statuses(1).has_current_limit());
  EXPECT_FALSE(resp.statuses(2).has_current_limit());  // unmatched: OK, no limit
  EXPECT_EQ(resp.statuses(2).code(), pb::RateLimitResponse::OK);
  ASSERT_TRUE(call(req, resp = {}).ok());
  EXPECT_EQ(resp.statuses(3).code(), pb::RateLimitResponse::OK);  // shadow: over, but OK
  EXPECT_EQ(resp.statuses(3).limit_remaining(), 0u);
  // Unknown domain: OK.
  ASSERT_TRUE(call(request("elsewhere", {{{"user", "ann"}}}), resp = {}).ok());
  EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OK);
}

TEST_F(GrpcTest, HitsAddendOnRequestAndDescriptor) {
  auto req = request("edge", {{{"user", "cy"}}});
  req.set_hits_addend(2);
  pb::RateLimitResponse resp;
  ASSERT_TRUE(call(req, resp).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 1u);
  req.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);  // the descriptor's own, even 0, wins
  ASSERT_TRUE(call(req, resp = {}).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 1u);
  req.mutable_descriptors(0)->mutable_hits_addend()->set_value(5);
  ASSERT_TRUE(call(req, resp = {}).ok());
  EXPECT_EQ(resp.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
}

TEST_F(GrpcTest, EachKindOfBadRequestIsInvalidArgumentAndChangesNothing) {
  pb::RateLimitResponse resp;
  ASSERT_TRUE(call(request("edge", {{{"user", "dee"}}}), resp).ok());
  auto huge_hits = request("edge", {{{"user", "dee"}}});
  huge_hits.mutable_descriptors(0)->mutable_hits_addend()->set_value(1'000'000'000'000ull);
  auto bad_unit = request("edge", {{{"user", "dee"}}});
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(5);
  const std::pair<pb::RateLimitRequest, std::string> cases[] = {
      {request("", {{{"user", "dee"}}}), "domain: must not be empty"},
      {request("edge", {}), "descriptors: must not be empty"},
      {request("edge", {{}}), "descriptors[0].entries: must not be empty"},
      {request("edge", {{{"user", std::string(5000, 'x')}}}),
       "descriptors[0].entries[0].value: is 5000 bytes, over the limit of 1024"},
      {request("edge", {{{std::string(300, 'k'), "v"}}}),
       "descriptors[0].entries[0].key: is 300 bytes, over the limit of 256"},
      {huge_hits, "descriptors[0].hits_addend: 1000000000000 is over the limit of 1000000000"},
      {bad_unit, "descriptors[0].limit.unit: must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR"},
  };
  for (const auto& [req, message] : cases) {
    const ::grpc::Status s = call(req, resp = {});
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT) << message;
    EXPECT_EQ(s.error_message(), message);
  }
  ASSERT_TRUE(call(request("edge", {{{"user", "dee"}}}), resp = {}).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 1u);  // only the two good calls counted
  EXPECT_EQ(std::count(codes_.begin(), codes_.end(), "INVALID_ARGUMENT"), 7);
}

// Envoy's API has no release call: a descriptor matching a concurrency limit is refused, naming it, and the
// request's other descriptors are not charged.
TEST_F(GrpcTest, AConcurrencyLimitIsInvalidArgumentNamingIt) {
  pb::RateLimitResponse resp;
  const ::grpc::Status s = call(request("edge", {{{"user", "dee"}}, {{"in_flight", "x"}}}), resp);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "descriptors[1]: matches 'in_flight', a concurrency limit: acquire and release its "
            "leases at /v1/acquire and /v1/release (a check has no release)");
  ASSERT_TRUE(call(request("edge", {{{"user", "dee"}}}), resp = {}).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 2u);  // the refused request charged nothing
}

hv::HealthCheckRequest health_request(const std::string& service) {
  hv::HealthCheckRequest r;
  r.set_service(service);
  return r;
}

TEST_F(GrpcTest, HealthCheckAnswersKnownServicesAndNotFoundOtherwise) {
  auto health = hv::Health::NewStub(channel_);
  auto check = [&](const std::string& service, hv::HealthCheckResponse& resp) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return health->Check(&ctx, health_request(service), &resp);
  };
  hv::HealthCheckResponse resp;
  ASSERT_TRUE(check("", resp).ok());
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);
  ASSERT_TRUE(check("envoy.service.ratelimit.v3.RateLimitService", resp = {}).ok());
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);
  EXPECT_EQ(check("no.such.Service", resp = {}).error_code(), ::grpc::StatusCode::NOT_FOUND);
  server_->set_serving(false);
  ASSERT_TRUE(check("", resp = {}).ok());
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::NOT_SERVING);
  pb::RateLimitResponse rls;
  EXPECT_TRUE(call(request("edge", {{{"user", "ann"}}}), rls).ok());  // health only reports; calls still answered
}

// Watch: the current status at once, then each change; SERVICE_UNKNOWN (stream kept open) for an unknown name;
// stop() tells watchers NOT_SERVING and ends their streams instead of waiting out Shutdown's grace period.
TEST_F(GrpcTest, HealthWatchStreamsEachChangeAndEndsOnStop) {
  auto health = hv::Health::NewStub(channel_);
  ::grpc::ClientContext ctx, unknown_ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  unknown_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto watch = health->Watch(&ctx, health_request(""));
  auto unknown = health->Watch(&unknown_ctx, health_request("no.such.Service"));
  hv::HealthCheckResponse resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);
  ASSERT_TRUE(unknown->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVICE_UNKNOWN);
  server_->set_serving(false);
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::NOT_SERVING);
  server_->set_serving(false);  // no change: nothing sent
  server_->set_serving(true);
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);

  const auto before = std::chrono::steady_clock::now();
  server_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(3));  // Shutdown's grace is 5 s
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&resp));
  EXPECT_EQ(watch->Finish().error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(unknown->Read(&resp));  // SERVICE_UNKNOWN does not change, so only the end
  EXPECT_EQ(unknown->Finish().error_code(), ::grpc::StatusCode::UNAVAILABLE);
}

// A watcher that goes away is forgotten: later changes and stop() touch nothing of it (ASan checks the rest).
TEST_F(GrpcTest, HealthWatchCancelledByTheClientIsForgotten) {
  auto health = hv::Health::NewStub(channel_);
  for (int i = 0; i < 20; ++i) {
    ::grpc::ClientContext ctx;
    auto watch = health->Watch(&ctx, health_request(""));
    hv::HealthCheckResponse resp;
    ASSERT_TRUE(watch->Read(&resp));
    ctx.TryCancel();
    server_->set_serving(i % 2 == 1);
    EXPECT_EQ(watch->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  }
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto watch = health->Watch(&ctx, health_request(""));
  hv::HealthCheckResponse resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);  // the last set_serving(true)
  server_->stop();
}

// An attack: health Watch streams kept their requests (up to 1 MiB each) with no bound on how many were open, so
// 200 streams took 200 MiB. These run against a server of their own with small bounds.
class GrpcBoundsTest : public GrpcTest {
 protected:
  void start_bounded(GrpcOptions options) {
    bounded_ = std::make_unique<GrpcServer>(*service_, options);
    bounded_->start();
  }
  // A channel with a connection of its own (channels otherwise share connections to the same address).
  std::shared_ptr<::grpc::Channel> connect() {
    ::grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxSendMessageSize(-1);
    return ::grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(bounded_->port()),
                                       ::grpc::InsecureChannelCredentials(), args);
  }
  void TearDown() override {
    if (bounded_) bounded_->stop();
    GrpcTest::TearDown();
  }
  struct Watch {
    ::grpc::ClientContext ctx;
    std::unique_ptr<::grpc::ClientReader<hv::HealthCheckResponse>> reader;
  };
  static std::unique_ptr<Watch> watch(hv::Health::Stub& stub, const std::string& service,
                                      std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
    auto w = std::make_unique<Watch>();
    w->ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    w->reader = stub.Watch(&w->ctx, health_request(service));
    return w;
  }
  static bool rate_limit_answers(const std::shared_ptr<::grpc::Channel>& channel) {
    auto stub = pb::RateLimitService::NewStub(channel);
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::RateLimitResponse resp;
    return stub->ShouldRateLimit(&ctx, request("edge", {{{"vip", "v"}}}), &resp).ok() &&
           resp.overall_code() == pb::RateLimitResponse::OK;
  }
  std::unique_ptr<GrpcServer> bounded_;
};

TEST_F(GrpcBoundsTest, WatchStreamsPastTheCapAreRefusedWhileCallsGoOn) {
  start_bounded({.max_watch_streams = 3});
  const auto channel = connect();
  auto health = hv::Health::NewStub(channel);
  const std::string big(60 * 1024, 'n');  // under the message limit, and not kept
  std::vector<std::unique_ptr<Watch>> open;
  hv::HealthCheckResponse resp;
  for (int i = 0; i < 3; ++i) {
    open.push_back(watch(*health, i == 0 ? "" : big));
    ASSERT_TRUE(open.back()->reader->Read(&resp)) << i;
    EXPECT_EQ(resp.status(), i == 0 ? hv::HealthCheckResponse::SERVING : hv::HealthCheckResponse::SERVICE_UNKNOWN);
  }
  for (int i = 0; i < 2; ++i) {
    auto extra = watch(*health, big);
    EXPECT_FALSE(extra->reader->Read(&resp));
    const ::grpc::Status s = extra->reader->Finish();
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(s.error_message(), "too many health Watch streams (3); use Check, or try again later");
  }
  EXPECT_TRUE(rate_limit_answers(channel));  // on the same connection, meanwhile
  open.front()->ctx.TryCancel();             // a place frees up once the server has seen it go
  EXPECT_EQ(open.front()->reader->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  bool admitted = false;
  for (int attempt = 0; attempt < 100 && !admitted; ++attempt) {
    auto again = watch(*health, "");
    admitted = again->reader->Read(&resp);
    if (admitted) open.front() = std::move(again);
  }
  EXPECT_TRUE(admitted);
  bounded_->set_serving(false);  // the ones open still hear of changes
  ASSERT_TRUE(open.front()->reader->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::NOT_SERVING);
  bounded_->stop();
}

TEST_F(GrpcBoundsTest, AMessageOverTheLimitIsRefusedBeforeItIsHeld) {
  start_bounded({.max_message_bytes = 64 * 1024});
  const auto channel = connect();
  auto health = hv::Health::NewStub(channel);
  auto w = watch(*health, std::string(512 * 1024, 'n'));
  hv::HealthCheckResponse resp;
  EXPECT_FALSE(w->reader->Read(&resp));
  EXPECT_EQ(w->reader->Finish().error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  auto stub = pb::RateLimitService::NewStub(channel);
  auto big = request("edge", {});
  for (int i = 0; i < 64; ++i) {  // the most descriptors a request may have, each of 16 entries at the limits
    auto* d = big.add_descriptors();
    for (int j = 0; j < 16; ++j) {
      auto* e = d->add_entries();
      e->set_key(std::string(256, 'k'));
      e->set_value(std::string(1024, 'v'));
    }
  }
  ::grpc::ClientContext ctx;
  pb::RateLimitResponse rls;
  EXPECT_EQ(stub->ShouldRateLimit(&ctx, big, &rls).error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(rate_limit_answers(channel));
}

// SETTINGS_MAX_CONCURRENT_STREAMS: a client waits for a place on its connection; other connections are not held up.
TEST_F(GrpcBoundsTest, StreamsPerConnectionAreCapped) {
  start_bounded({.max_streams_per_connection = 4});
  const auto channel = connect();
  auto health = hv::Health::NewStub(channel);
  std::vector<std::unique_ptr<Watch>> open;
  hv::HealthCheckResponse resp;
  for (int i = 0; i < 4; ++i) {
    open.push_back(watch(*health, ""));
    ASSERT_TRUE(open.back()->reader->Read(&resp)) << i;
  }
  auto fifth = watch(*health, "", std::chrono::milliseconds(1000));
  EXPECT_FALSE(fifth->reader->Read(&resp));  // never started on the server
  EXPECT_EQ(fifth->reader->Finish().error_code(), ::grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(rate_limit_answers(connect()));
  open.back()->ctx.TryCancel();
  EXPECT_EQ(open.back()->reader->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(rate_limit_answers(channel));  // a place on the first connection again
  bounded_->stop();
}

// The listener's own accept() (server/grpc/acceptor.h): connections capped in total and per address, quiet ones shed
// when the listener is full or busy, idle ones closed by gRPC; each with raw connections that send HTTP/2's preface
// and an empty SETTINGS frame, then nothing.
class GrpcConnectionsTest : public GrpcBoundsTest {
 protected:
  void start_counted(GrpcOptions options) {
    bounded_ = std::make_unique<GrpcServer>(*service_, options,
                                            GrpcHooks{.connection = [this](int delta) { held_ += delta; },
                                                      .refused =
                                                          [this](std::string_view reason) {
                                                            std::lock_guard lock(mu_);
                                                            refused_.emplace_back(reason);
                                                          }});
    bounded_->start();
  }
  // An idle HTTP/2 connection from `source` (a loopback address), once the server has answered it with its own
  // SETTINGS (-1 if it closed it instead).
  int idle(const char* source = "127.0.0.1") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &a.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    a.sin_port = htons(static_cast<std::uint16_t>(bounded_->port()));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    EXPECT_EQ(::send(fd, kPreface, sizeof kPreface - 1, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof kPreface - 1));
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    char buf[256];
    if (::poll(&p, 1, 10000) == 1 && ::recv(fd, buf, sizeof buf, 0) > 0) return fd;
    ::close(fd);
    return -1;
  }
  // Whether the server closes fd within `within` (what it sends meanwhile is read and dropped).
  static bool closed_within(int fd, std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
      using std::chrono::milliseconds;
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) return false;
      char buf[256];
      if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) return true;  // the end, or a reset
    }
  }
  void wait_held(int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (held_.load() != n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(held_.load(), n);
  }
  std::vector<std::string> refused() {
    std::lock_guard lock(mu_);
    return refused_;
  }
  std::atomic<int> held_{0};
  std::mutex mu_;
  std::vector<std::string> refused_;
};

TEST_F(GrpcConnectionsTest, OneAddressGetsNoMoreThanItsShare) {
  start_counted({.max_connections_per_ip = 2, .per_ip_exempt = {"127.0.0.9"}});
  const int a = idle("127.0.0.3"), b = idle("127.0.0.3");
  EXPECT_GE(a, 0);
  EXPECT_GE(b, 0);
  EXPECT_EQ(idle("127.0.0.3"), -1);  // closed at once
  EXPECT_EQ(refused(), std::vector<std::string>{"too_many_connections_from_ip"});
  const int c = idle("127.0.0.4");
  const int exempt1 = idle("127.0.0.9"), exempt2 = idle("127.0.0.9"), exempt3 = idle("127.0.0.9");
  for (const int fd : {c, exempt1, exempt2, exempt3}) EXPECT_GE(fd, 0);
  wait_held(6);
  ::close(a);  // its place is given back once gRPC has closed the connection
  wait_held(5);
  const int again = idle("127.0.0.3");
  EXPECT_GE(again, 0);
  for (const int fd : {b, c, exempt1, exempt2, exempt3, again}) ::close(fd);
  wait_held(0);
}

TEST_F(GrpcConnectionsTest, AtTheCapTheQuietestGivesWayToANewClient) {
  start_counted({.max_connections = 2, .max_connections_per_ip = 0});
  const int first = idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // more than the kernel's clock tick apart
  const int second = idle();
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  // Both quiet for kMinQuiet (100 ms) or more: the first connection has been quiet longest.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  {
    auto client = connect();
    EXPECT_TRUE(rate_limit_answers(client));
    EXPECT_TRUE(closed_within(first, std::chrono::seconds(5)));
    EXPECT_FALSE(closed_within(second, std::chrono::milliseconds(50)));
    EXPECT_TRUE(refused().empty());
  }
  wait_held(1);  // the client's connection gone with it
  // Connections in use (each heard from just now) do not give way: a new one is closed instead.
  const int third = idle();
  ASSERT_GE(third, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  static constexpr char kPing[] = "\0\0\10\6\0\0\0\0\0pingpong";
  for (const int fd : {second, third}) {
    EXPECT_EQ(::send(fd, kPing, sizeof kPing - 1, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof kPing - 1));
  }
  EXPECT_EQ(idle(), -1);
  EXPECT_EQ(refused(), std::vector<std::string>{"too_many_connections"});
  for (const int fd : {first, second, third}) ::close(fd);
}

TEST_F(GrpcConnectionsTest, FromThreeQuartersOfTheCapQuietConnectionsAreShed) {
  start_counted({.max_connections = 4, .max_connections_per_ip = 0, .busy_idle_timeout_ms = 200});
  const int a = idle(), b = idle();
  EXPECT_FALSE(closed_within(a, std::chrono::milliseconds(400)));  // 2 of 4: not busy, quiet connections stay
  const int c = idle();  // 3 of 4: those quiet for 200 ms are shed until the listener is below 3/4 again
  wait_held(2);
  int closed = 0;
  for (const int fd : {a, b}) closed += closed_within(fd, std::chrono::milliseconds(100)) ? 1 : 0;
  EXPECT_EQ(closed, 1);
  for (const int fd : {a, b, c}) ::close(fd);
}

TEST_F(GrpcConnectionsTest, AConnectionWithNoCallIsClosedAfterTheIdleTimeout) {
  start_counted({.idle_timeout_ms = 300});
  const auto start = std::chrono::steady_clock::now();
  const int fd = idle();
  EXPECT_TRUE(closed_within(fd, std::chrono::seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  wait_held(0);  // and its place given back
  ::close(fd);
}

TEST_F(GrpcConnectionsTest, PastTheDescriptorCeilingAConnectionIsClosedAtOnce) {
  start_counted({.fd_ceiling = 3});  // every descriptor a connection could get is past it
  EXPECT_EQ(idle(), -1);
  EXPECT_EQ(refused(), std::vector<std::string>{"descriptor_reserve"});
  EXPECT_EQ(held_.load(), 0);
}

TEST_F(GrpcTest, BoundsBelowOneAreAClearError) {
  try {
    GrpcServer s(*service_, GrpcOptions{.max_watch_streams = 0});
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "GrpcOptions::max_watch_streams is 0; it must be at least 1");
  }
  try {
    GrpcServer s(*service_, GrpcOptions{.per_ip_exempt = {"10.0.0.0/33"}});
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "GrpcOptions::per_ip_exempt: '10.0.0.0/33' is not an IP address or CIDR range (like "
                 "10.0.0.0/8)");
  }
}

}  // namespace
}  // namespace rk::server::grpc
