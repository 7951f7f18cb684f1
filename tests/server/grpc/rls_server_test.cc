// Envoy's rate-limit gRPC API and the gRPC health service, with a real gRPC client over loopback.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/grpc/rls_server.h"

namespace rk::grpcapi {
namespace {

namespace pb = envoy::service::ratelimit::v3;
namespace hv = grpc::health::v1;

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
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials());
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

  grpc::Status call(const pb::RateLimitRequest& req, pb::RateLimitResponse& resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ShouldRateLimit(&ctx, req, &resp);
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
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
  // and the nginx module's (tests/headers/rate_limit_headers_test.cc).
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& h : resp.response_headers_to_add()) fields.emplace_back(h.key(), h.value());
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"RateLimit-Policy", "\"per_user\";q=3;w=60"}, {"RateLimit", "\"per_user\";r=0;t=40"},
      {"X-RateLimit-Limit", "3"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "40"}, {"Retry-After", "40"}};
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
  EXPECT_EQ(resp.statuses(1).limit_remaining(), 4294967295u);          // unlimited
  EXPECT_FALSE(resp.statuses(1).has_current_limit());
  EXPECT_FALSE(resp.statuses(2).has_current_limit());                  // unmatched: OK, no limit
  EXPECT_EQ(resp.statuses(2).code(), pb::RateLimitResponse::OK);
  ASSERT_TRUE(call(req, resp = {}).ok());
  EXPECT_EQ(resp.statuses(3).code(), pb::RateLimitResponse::OK);       // shadow: over, but OK
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
    const grpc::Status s = call(req, resp = {});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << message;
    EXPECT_EQ(s.error_message(), message);
  }
  ASSERT_TRUE(call(request("edge", {{{"user", "dee"}}}), resp = {}).ok());
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 1u);  // only the two good calls counted
  EXPECT_EQ(std::count(codes_.begin(), codes_.end(), "INVALID_ARGUMENT"), 7);
}

hv::HealthCheckRequest health_request(const std::string& service) {
  hv::HealthCheckRequest r;
  r.set_service(service);
  return r;
}

TEST_F(GrpcTest, HealthCheckAnswersKnownServicesAndNotFoundOtherwise) {
  auto health = hv::Health::NewStub(channel_);
  auto check = [&](const std::string& service, hv::HealthCheckResponse& resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return health->Check(&ctx, health_request(service), &resp);
  };
  hv::HealthCheckResponse resp;
  ASSERT_TRUE(check("", resp).ok());
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);
  ASSERT_TRUE(check("envoy.service.ratelimit.v3.RateLimitService", resp = {}).ok());
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);
  EXPECT_EQ(check("no.such.Service", resp = {}).error_code(), grpc::StatusCode::NOT_FOUND);
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
  grpc::ClientContext ctx, unknown_ctx;
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
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(unknown->Read(&resp));  // SERVICE_UNKNOWN does not change, so only the end
  EXPECT_EQ(unknown->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A watcher that goes away is forgotten: later changes and stop() touch nothing of it (ASan checks the rest).
TEST_F(GrpcTest, HealthWatchCancelledByTheClientIsForgotten) {
  auto health = hv::Health::NewStub(channel_);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    auto watch = health->Watch(&ctx, health_request(""));
    hv::HealthCheckResponse resp;
    ASSERT_TRUE(watch->Read(&resp));
    ctx.TryCancel();
    server_->set_serving(i % 2 == 1);
    EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto watch = health->Watch(&ctx, health_request(""));
  hv::HealthCheckResponse resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), hv::HealthCheckResponse::SERVING);  // the last set_serving(true)
  server_->stop();
}

// Issue 19: health Watch streams kept their requests (up to 1 MiB each) with no bound on how many were open, so
// 200 streams took 200 MiB. These run against a server of their own with small bounds.
class GrpcBoundsTest : public GrpcTest {
 protected:
  void start_bounded(GrpcOptions options) {
    bounded_ = std::make_unique<GrpcServer>(*service_, options);
    bounded_->start();
  }
  // A channel with a connection of its own (channels otherwise share connections to the same address).
  std::shared_ptr<grpc::Channel> connect() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxSendMessageSize(-1);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(bounded_->port()),
                                     grpc::InsecureChannelCredentials(), args);
  }
  void TearDown() override {
    if (bounded_) bounded_->stop();
    GrpcTest::TearDown();
  }
  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<hv::HealthCheckResponse>> reader;
  };
  static std::unique_ptr<Watch> watch(hv::Health::Stub& stub, const std::string& service,
                                      std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
    auto w = std::make_unique<Watch>();
    w->ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    w->reader = stub.Watch(&w->ctx, health_request(service));
    return w;
  }
  static bool rate_limit_answers(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = pb::RateLimitService::NewStub(channel);
    grpc::ClientContext ctx;
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
    const grpc::Status s = extra->reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(s.error_message(), "too many health Watch streams (3); use Check, or try again later");
  }
  EXPECT_TRUE(rate_limit_answers(channel));  // on the same connection, meanwhile
  open.front()->ctx.TryCancel();             // a place frees up once the server has seen it go
  EXPECT_EQ(open.front()->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
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
  EXPECT_EQ(w->reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
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
  grpc::ClientContext ctx;
  pb::RateLimitResponse rls;
  EXPECT_EQ(stub->ShouldRateLimit(&ctx, big, &rls).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
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
  EXPECT_EQ(fifth->reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(rate_limit_answers(connect()));
  open.back()->ctx.TryCancel();
  EXPECT_EQ(open.back()->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(rate_limit_answers(channel));  // a place on the first connection again
  bounded_->stop();
}

TEST_F(GrpcTest, BoundsBelowOneAreAClearError) {
  try {
    GrpcServer s(*service_, GrpcOptions{.max_watch_streams = 0});
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "GrpcOptions::max_watch_streams is 0; it must be at least 1");
  }
}

}  // namespace
}  // namespace rk::grpcapi
