// envoyproxy/ratelimit's HTTP surface (server/api/envoy_json.h), its own tests translated: each case is named after
// the upstream test it comes from (test/server/server_impl_test.go and health_test.go): POST /json and
// GET /healthcheck through the public routes. docs/compatibility.md lists the deliberate differences.
#include "server/api/envoy_json.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "server/api/routes.h"

namespace rk::server::api {
namespace {

class EnvoyHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::filesystem::temp_directory_path() / ("rk-envoyhttp-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(file_) << "domain: foo\ndescriptors:\n"
                            "  - {key: k, rate_limit: {unit: minute, requests_per_unit: 1, name: one}}\n";
    reloader_ = std::make_unique<rules::Reloader>(file_.string(), rules::BuildOptions{.clock = clock_});
    for (const auto& e : reloader_->load_now()) ADD_FAILURE() << e.to_string();
    service_ = std::make_unique<service::Service>(*reloader_, clock_);
  }
  void TearDown() override { std::filesystem::remove_all(file_); }

  server::http::Response call(std::string_view method, std::string_view path, std::string_view body) {
    server::http::Request req{.method = method, .target = path, .path = path, .body = body, .remote_ip = "127.0.0.1"};
    server::http::Response res;
    public_routes(*service_, hooks_)(req, res);
    return res;
  }

  std::filesystem::path file_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
  Hooks hooks_;
};

// TestJsonHandler: a body that is no request, and a request the service refuses, are 400 "Bad Request\n"; OK is
// 200 and OVER_LIMIT 429, with the answer in proto3 JSON.
TEST_F(EnvoyHttp, ServerImplTestJsonHandler) {
  for (std::string_view bad : {"", "}", R"({"domain": "foo"})", R"({"domain": "foo", "descriptors": [{}]})"}) {
    const server::http::Response r = call("POST", "/json", bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
    EXPECT_EQ(r.body, "Bad Request\n");
  }
  const std::string unknown_domain = R"({"domain": "bar", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]})";
  server::http::Response r = call("POST", "/json", unknown_domain);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"overallCode":"OK","statuses":[{"code":"OK"}]})");

  const std::string request = R"({"domain": "foo", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]})";
  r = call("POST", "/json", request);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":1,)"
                    R"("unit":"MINUTE","name":"one"},"durationUntilReset":"40s"}]})");
  r = call("GET", "/json", request);  // upstream's handler takes any method
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body, R"({"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":)"
                    R"({"requestsPerUnit":1,"unit":"MINUTE","name":"one"},"durationUntilReset":"40s"}]})");
}

// TestJsonHandler, "Unknown response code": 500 with the empty answer.
TEST(EnvoyJson, ServerImplTestJsonHandlerUnknownCode) {
  server::http::Response r;
  envoy_json_answer(service::CheckResponse{.overall = service::Code::kUnknown}, r);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "{}");
  service::CheckResponse unlimited;
  unlimited.statuses.push_back({.limit_remaining = 4294967295u, .unlimited = true});
  EXPECT_EQ(envoy_response_json(unlimited),
            R"({"overallCode":"OK","statuses":[{"code":"OK","limitRemaining":4294967295}]})");
}

// TestHealthCheck (the sigterm component) and TestHealthyWithAtLeastOneConfigLoaded: 200 "OK" while the service
// takes traffic, 500 with no body while it does not (no rules yet, or draining).
TEST_F(EnvoyHttp, HealthTestHealthCheck) {
  bool ready = true;
  hooks_.ready = [&] { return ready; };
  server::http::Response r = call("GET", "/healthcheck", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "OK");
  ready = false;
  r = call("GET", "/healthcheck", "");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.content_type, "");
  ready = true;
  EXPECT_EQ(call("GET", "/healthcheck", "").status, 200);
}

}  // namespace
}  // namespace rk::server::api
