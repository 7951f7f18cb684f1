// A refusal no wait can lift (a blocked rule, hits above what the limit can ever admit) says one wait in every
// field of every front end: RateLimit's t, X-RateLimit-Reset, Retry-After and duration_until_reset all say never
// (2147483647 s), through the real routes of the HTTP API, forward-auth and envoyproxy/ratelimit's /json
// (src/service/response_headers.h; gRPC's in tests/server/grpc/rls_server_test.cc). Regression: t and X-RateLimit-Reset
// said the window's end (1 for a rule per second, 0 for hits above the limit), and a client reading them retried every
// second for ever.
#include "service/response_headers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "server/api/routes.h"

namespace rk::server::api {
namespace {

constexpr const char* kRules = R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 5, name: per_client}
  - key: remote_address
    value: 203.0.113.66
    rate_limit: {unit: second, requests_per_unit: 0, name: banned}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window, name: per_user}
forward_auth:
  descriptors:
    - entries: [{key: remote_address, from: client_ip}]
)";

constexpr const char* kNever = "2147483647";
constexpr const char* kBlockedAddress =
    R"({"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"203.0.113.66"}]}]})";

class NeverInEveryField : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::filesystem::temp_directory_path() / ("rk-never-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(file_) << kRules;
    reloader_ = std::make_unique<rules::Reloader>(file_.string(), rules::BuildOptions{.clock = clock_});
    for (const auto& e : reloader_->load_now()) ADD_FAILURE() << e.to_string();
    service_ = std::make_unique<service::Service>(*reloader_, clock_);
  }
  void TearDown() override { std::filesystem::remove_all(file_); }

  server::http::Response call(std::string_view method, std::string_view path, std::string_view body,
                              std::string_view peer = "127.0.0.1") {
    server::http::Request req{.method = method, .target = path, .path = path, .body = body, .remote_ip = peer};
    server::http::Response res;
    public_routes(*service_, Hooks{})(req, res);
    return res;
  }

  // A header field of the answer, from its headers or its preformatted field lines; "<absent>" if neither has it.
  static std::string field(const server::http::Response& r, const std::string& name) {
    for (const auto& [n, v] : r.headers) {
      if (n == name) return v;
    }
    const std::string prefix = name + ": ";
    for (std::size_t at = 0; at < r.field_lines.size();) {
      const std::size_t end = r.field_lines.find("\r\n", at);
      const std::string line = r.field_lines.substr(at, end - at);
      if (line.starts_with(prefix)) return line.substr(prefix.size());
      at = end == std::string::npos ? r.field_lines.size() : end + 2;
    }
    return "<absent>";
  }

  // Every field that states a wait says never.
  static void says_never(const server::http::Response& r, const std::string& policy) {
    EXPECT_EQ(r.status, 429) << r.body;
    const std::string rate_limit = field(r, "RateLimit");
    EXPECT_TRUE(rate_limit.starts_with("\"" + policy + "\";r=") && rate_limit.ends_with(std::string(";t=") + kNever))
        << rate_limit;
    EXPECT_EQ(field(r, "X-RateLimit-Reset"), kNever);
    EXPECT_EQ(field(r, "Retry-After"), kNever);
  }

  std::filesystem::path file_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'400'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
};

TEST_F(NeverInEveryField, ABlockedRuleThroughTheHttpApi) {
  const auto r = call("POST", "/v1/check", kBlockedAddress);
  says_never(r, "banned");
  const auto status = nlohmann::json::parse(r.body)["statuses"][0];
  EXPECT_EQ(status["duration_until_reset"], std::string(kNever) + "s") << r.body;
  EXPECT_EQ(status["retry_after_seconds"], -1.0);
}

TEST_F(NeverInEveryField, ABlockedRuleThroughForwardAuth) {
  const auto r = call("GET", "/v1/auth/edge", "", "203.0.113.66");
  says_never(r, "banned");
  EXPECT_NE(r.body.find("no wait lets this request through"), std::string::npos) << r.body;
  // The same rule's neighbour, for contrast: an ordinary address is let through, its t the second's end.
  const auto ok = call("GET", "/v1/auth/edge", "", "192.0.2.1");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(field(ok, "RateLimit"), "\"per_client\";r=4;t=1");
}

TEST_F(NeverInEveryField, HitsAboveTheLimitThroughTheHttpApi) {
  const auto r = call("POST", "/v1/check",
                      R"({"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}],)"
                      R"("hits_addend":4}]})");
  says_never(r, "per_user");
  const auto status = nlohmann::json::parse(r.body)["statuses"][0];
  EXPECT_EQ(status["duration_until_reset"], std::string(kNever) + "s") << r.body;
  EXPECT_EQ(status["retry_after_seconds"], -1.0);
}

TEST_F(NeverInEveryField, EnvoysJsonEndpointSaysTheSameDuration) {
  const auto r = call("POST", "/json", kBlockedAddress);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["statuses"][0]["durationUntilReset"], std::string(kNever) + "s") << r.body;
}

}  // namespace
}  // namespace rk::server::api
