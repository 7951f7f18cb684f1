// The dashboard in-process: the tracker fed by a real Service on a manual clock, the JSON endpoints through the
// admin routes, every kind of bad input included, and the what-if's runner and budgets. The hot-key sketch and
// how keys are shown: hot_keys_test.cc, redact_test.cc.
#include <atomic>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server/api/routes.h"
#include "dashboard/dashboard.h"
#include "dashboard/routes.h"
#include "dashboard/tracker.h"
#include "dashboard/what_if.h"
#include "server/http/server.h"
#include "support/test_util.h"

namespace rk::dashboard {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- The tracker and the endpoints, against a real Service ----

const char* kRules = R"(
domain: edge
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: earrrl, half_life: 10s}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: banned
    rate_limit: {unit: second, requests_per_unit: 0}
)";

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-dashboard-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "edge.yaml") << kRules;
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    ASSERT_TRUE(reloader_->load_now().empty());
    service_ = std::make_unique<service::Service>(*reloader_, clock_, service::ServiceOptions{.observer = tracker_});
    hooks_.bad_request = [this](std::string_view, std::string_view) { ++bad_requests_; };
    admin_ = admin_listener();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // The admin listener's routes with the dashboard's added, as serve wires them.
  server::http::Handler admin_listener(server::api::AdminOptions options = {}, WhatIfLimits limits = {}) {
    options.routes.push_back(admin_routes(*service_, tracker_, hooks_, limits));
    return server::api::admin_routes(*service_, hooks_, std::move(options));
  }

  service::CheckResult check(const std::string& key, const std::string& value) {
    service::CheckRequest r{.domain = "edge"};
    r.descriptors.push_back({.entries = {{key, value}}});
    return service_->check(r);
  }

  // As the page's own script calls it: POSTs as application/json, unless `fields` says otherwise.
  server::http::Response call(std::string_view method, std::string_view path, std::string_view query = "",
                              std::string_view body = "", std::vector<server::http::Field> fields = {}) {
    if (fields.empty() && method == "POST") fields.push_back({"Content-Type", "application/json"});
    server::http::Request req;
    req.method = method;
    req.path = path;
    req.target = path;
    req.query = query;
    req.body = body;
    req.fields = fields;
    server::http::Response res;
    admin_(req, res);
    return res;
  }

  json hot(std::string_view query = "") {
    const auto res = call("GET", "/v1/admin/hot-keys", query);
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body);
  }

  static const json& rule(const json& doc, const std::string& path) {
    for (const json& r : doc["rules"]) {
      if (r["rule"] == path) return r;
    }
    ADD_FAILURE() << "no rule " << path << " in " << doc.dump();
    static const json none;
    return none;
  }

  void expect_bad(const server::http::Response& res, const std::string& field, const std::string& message_part) {
    ASSERT_EQ(res.status, 400) << res.body.substr(0, 300);
    const json e = json::parse(res.body)["error"];
    EXPECT_EQ(e.value("field", ""), field) << res.body;
    EXPECT_NE(e["message"].get<std::string>().find(message_part), std::string::npos) << res.body;
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(1000s);
  std::shared_ptr<Tracker> tracker_ = std::make_shared<Tracker>();
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
  server::api::Hooks hooks_;
  server::http::Handler admin_;
  std::atomic<int> bad_requests_{0};  // counted by the listener's thread and the what-if runner's
};

TEST_F(DashboardTest, RatesCountDecisionsByResultPerRule) {
  for (int i = 0; i < 5; ++i) check("user", "ann");    // 2 ok, 3 over
  for (int i = 0; i < 3; ++i) check("shadowed", "x");  // 1 ok, 2 shadowed
  check("free", "z");                                  // unlimited: not a rate
  const auto res = call("GET", "/v1/admin/rates");
  ASSERT_EQ(res.status, 200) << res.body;
  const json doc = json::parse(res.body);
  ASSERT_EQ(doc["rules"].size(), 4u) << doc.dump();  // the unlimited rule decides nothing
  EXPECT_EQ(rule(doc, "user")["ok"], 2);
  EXPECT_EQ(rule(doc, "user")["over_limit"], 3);
  EXPECT_EQ(rule(doc, "shadowed")["ok"], 1);
  EXPECT_EQ(rule(doc, "shadowed")["shadow_over_limit"], 2);
  EXPECT_EQ(rule(doc, "client")["ok"], 0);
  EXPECT_EQ(rule(doc, "client")["algorithm"], "earrrl");
}

// The server keeps the last minutes of every rule's counters, sampled on the clock it is given, so that a page
// opened after the traffic draws it at once: oldest first, each sample's age from the service's clock, and no more
// than kRateSamples of them (the oldest go).
TEST_F(DashboardTest, RatesKeepTheLastMinutesOfSamplesForAPageOpenedLater) {
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i <= s; ++i) check("user", "ann");  // 1, 2, 3 of 2 a minute
    check("shadowed", "x");
    tracker_->sample(clock_->now());
    clock_->advance(1s);
  }
  const auto res = call("GET", "/v1/admin/rates", "history=1");
  ASSERT_EQ(res.status, 200) << res.body;
  const json doc = json::parse(res.body);
  EXPECT_EQ(doc["history_seconds"], 120.0);
  const json& user = rule(doc, "user")["history"];
  ASSERT_EQ(user.size(), 3u) << doc.dump();
  EXPECT_EQ(user[0], (json{{"seconds_ago", 3.0}, {"ok", 1}, {"refused", 0}}));
  EXPECT_EQ(user[1], (json{{"seconds_ago", 2.0}, {"ok", 2}, {"refused", 1}}));  // 2 a minute: the third refused
  EXPECT_EQ(user[2], (json{{"seconds_ago", 1.0}, {"ok", 2}, {"refused", 4}}));
  const json& shadowed = rule(doc, "shadowed")["history"];
  EXPECT_EQ(shadowed[2]["refused"], 2);  // shadow-mode refusals are drawn as refused
  EXPECT_EQ(rule(doc, "client")["history"][2], (json{{"seconds_ago", 1.0}, {"ok", 0}, {"refused", 0}}));  // idle
  // Without history=1 (every poll but the page's first): the counters alone.
  EXPECT_FALSE(rule(json::parse(call("GET", "/v1/admin/rates").body), "user").contains("history"));

  // Bounded: after many more samples, the last kRateSamples, the newest last.
  for (std::size_t i = 0; i < kRateSamples + 30; ++i) {
    check("user", "late");
    tracker_->sample(clock_->now());
    clock_->advance(1s);
  }
  const json late = rule(json::parse(call("GET", "/v1/admin/rates", "history=1").body), "user");
  const json& samples = late["history"];
  ASSERT_EQ(samples.size(), kRateSamples);
  EXPECT_EQ(samples.back()["seconds_ago"], 1.0);
  EXPECT_EQ(samples.front()["seconds_ago"], static_cast<double>(kRateSamples));
  EXPECT_EQ(samples.back()["ok"].get<int>() + samples.back()["refused"].get<int>(),
            late["ok"].get<int>() + late["over_limit"].get<int>());
}

TEST_F(DashboardTest, BadRatesQueriesNameTheParameter) {
  expect_bad(call("GET", "/v1/admin/rates", "history=yes"), "history", "is not 1 or 0");
  expect_bad(call("GET", "/v1/admin/rates", "since=5"), "since", "unknown parameter");
  expect_bad(call("GET", "/v1/admin/rates", "history=%zz"), "", "percent-encoded");
  EXPECT_EQ(bad_requests_.load(), 3);
}

// A blocked rule names no algorithm of its own; every answer says "blocked" where others name theirs, so that the
// page shows what the server says (never "undefined").
TEST_F(DashboardTest, ABlockedRuleSaysBlockedAsItsAlgorithmEverywhere) {
  check("banned", "x");
  EXPECT_EQ(rule(json::parse(call("GET", "/v1/admin/rates").body), "banned")["algorithm"], "blocked");
  const json hot_banned = rule(hot("rule=banned"), "banned");
  EXPECT_EQ(hot_banned["algorithm"], "blocked");
  EXPECT_EQ(hot_banned["keys"][0]["limited"], true);
  EXPECT_TRUE(hot_banned["keys"][0]["retry_after_seconds"].is_null());  // never, as its Retry-After says
  const json rules = json::parse(call("GET", "/v1/rules").body);
  bool seen = false;
  for (const json& r : rules["domains"][0]["rules"]) {
    if (r["path"] != "banned") continue;
    seen = true;
    EXPECT_EQ(r["algorithm"], "blocked") << r.dump();
  }
  EXPECT_TRUE(seen) << rules.dump();
}

TEST_F(DashboardTest, DryRunsAreNotCounted) {
  service::CheckRequest r{.domain = "edge"};
  r.descriptors.push_back({.entries = {{"user", "ann"}}});
  service_->dry_run(r);
  const json doc = json::parse(call("GET", "/v1/admin/rates").body);
  EXPECT_EQ(rule(doc, "user")["ok"], 0);
  EXPECT_TRUE(hot()["rules"][0]["keys"].empty());
}

TEST_F(DashboardTest, HotKeysShowTheAbuserLockedOutWithEarrrlsEstimate) {
  for (int i = 0; i < 40; ++i) {
    check("client", "abuser");
    clock_->advance(100ms);  // 10/s against 1/s
  }
  check("client", "polite");
  const json doc = hot("n=5&domain=edge&rule=client");
  ASSERT_EQ(doc["rules"].size(), 1u);
  const json& keys = doc["rules"][0]["keys"];
  ASSERT_EQ(keys.size(), 2u) << doc.dump();
  EXPECT_EQ(keys[0]["key"], "abuser");
  EXPECT_EQ(keys[0]["limited"], true);
  EXPECT_EQ(keys[0]["last_refused"], true);
  EXPECT_GT(keys[0]["estimate"].get<double>(), 1.0);
  EXPECT_GT(keys[0]["retry_after_seconds"].get<double>(), 0.0);
  EXPECT_EQ(keys[1]["key"], "polite");
  EXPECT_EQ(keys[1]["limited"], false);
  EXPECT_GT(keys[1]["remaining"].get<double>(), 0.0);
}

TEST_F(DashboardTest, ReadingHotKeysChangesNoState) {
  for (int i = 0; i < 3; ++i) check("user", "bob");
  const json before = hot();
  for (int i = 0; i < 5; ++i) hot();
  EXPECT_EQ(hot()["rules"], before["rules"]);
  EXPECT_EQ(json::parse(call("GET", "/v1/admin/rates").body)["rules"],
            json::parse(call("GET", "/v1/admin/rates").body)["rules"]);
  // The key's own state: one more check is the third of two a minute, whatever was read meanwhile.
  EXPECT_EQ(std::get<service::CheckResponse>(check("user", "bob")).overall, service::Code::kOverLimit);
  EXPECT_EQ(rule(json::parse(call("GET", "/v1/admin/rates").body), "user")["over_limit"], 2);
}

TEST_F(DashboardTest, CountersAndHotKeysSurviveAReloadThatKeepsTheRule) {
  for (int i = 0; i < 3; ++i) check("user", "carol");
  std::ofstream(dir_ / "edge.yaml") << std::string(kRules) +
                                           "  - key: extra\n    rate_limit: {unit: second, requests_per_unit: 5}\n";
  ASSERT_TRUE(reloader_->load_now().empty());
  check("user", "carol");
  const json doc = json::parse(call("GET", "/v1/admin/rates").body);
  EXPECT_EQ(rule(doc, "user")["ok"], 2);
  EXPECT_EQ(rule(doc, "user")["over_limit"], 2);
  EXPECT_EQ(rule(doc, "extra")["ok"], 0);
  EXPECT_EQ(rule(hot("rule=user"), "user")["keys"][0]["key"], "carol");
}

TEST_F(DashboardTest, BadHotKeyQueriesNameTheParameter) {
  expect_bad(call("GET", "/v1/admin/hot-keys", "n=0"), "n", "from 1 to 64");
  expect_bad(call("GET", "/v1/admin/hot-keys", "n=65"), "n", "from 1 to 64");
  expect_bad(call("GET", "/v1/admin/hot-keys", "n=ten"), "n", "not a whole number");
  expect_bad(call("GET", "/v1/admin/hot-keys", "n=99999999999999999999999"), "n", "not a whole number");
  expect_bad(call("GET", "/v1/admin/hot-keys", "color=red"), "color", "unknown parameter");
  expect_bad(call("GET", "/v1/admin/hot-keys", "domain=%zz"), "", "percent-encoded");
  expect_bad(call("GET", "/v1/admin/hot-keys", std::string(5000, 'a')), "", "over 4096");
  EXPECT_EQ(bad_requests_.load(), 7);
  EXPECT_EQ(hot("domain=nope")["rules"].size(), 0u);
  EXPECT_EQ(hot("domain=edge&rule=user%2Fx")["rules"].size(), 0u);
  EXPECT_EQ(call("POST", "/v1/admin/hot-keys").status, 405);
  EXPECT_EQ(call("DELETE", "/v1/admin/rates").status, 405);
  EXPECT_EQ(call("GET", "/v1/admin/simulate").status, 405);
}

TEST_F(DashboardTest, ThePageIsServedWithItsTypesAndAContentSecurityPolicy) {
  struct Want {
    const char* path;
    const char* type;
    const char* contains;
  };
  for (const Want& w : {Want{"/ui", "text/html", "<script src=\"/ui/app.js\""}, Want{"/ui/", "text/html", "<html"},
                        Want{"/ui/app.js", "text/javascript", "hot-keys"}, Want{"/ui/app.css", "text/css", "{"}}) {
    const auto res = call("GET", w.path);
    EXPECT_EQ(res.status, 200) << w.path;
    EXPECT_TRUE(res.content_type.starts_with(w.type)) << w.path << ": " << res.content_type;
    EXPECT_NE(res.body.find(w.contains), std::string::npos) << w.path;
    bool csp = false;
    for (const auto& [name, value] : res.headers)
      csp |= name == "Content-Security-Policy" && value.find("default-src 'none'") != std::string::npos;
    EXPECT_TRUE(csp) << w.path;
  }
  // Nothing from elsewhere: no http(s) URL in what the page loads (but SVG's namespace name, which loads nothing).
  for (const char* p : {"/ui", "/ui/app.js", "/ui/app.css"}) {
    std::string body = call("GET", p).body;
    for (auto at = body.find("http://www.w3.org/2000/svg"); at != std::string::npos;
         at = body.find("http://www.w3.org/2000/svg"))
      body.erase(at, 26);
    EXPECT_EQ(body.find("http://"), std::string::npos) << p;
    EXPECT_EQ(body.find("https://"), std::string::npos) << p;
  }
  EXPECT_EQ(call("GET", "/ui/other.js").status, 404);
  EXPECT_EQ(call("POST", "/ui").status, 405);
}

// ---- What-if ----

const char* kWhatIf = R"({"duration": "20s", "sample_every": "1s",
  "limiter": {"algorithm": "earrrl", "limit": 1, "half_life": "2s"},
  "clients": [{"name": "fast", "pattern": "periodic", "rate": 4}, {"name": "slow", "pattern": "periodic", "period": "2s"}]})";

TEST_F(DashboardTest, WhatIfRunsTheSimulatorAndAnswersSeriesToPlot) {
  const auto res = call("POST", "/v1/admin/simulate", "", kWhatIf);
  ASSERT_EQ(res.status, 200) << res.body;
  const json doc = json::parse(res.body);
  EXPECT_EQ(doc["limiter"]["algorithm"], "earrrl");
  EXPECT_EQ(doc["sample_times"].size(), 21u);
  ASSERT_EQ(doc["clients"].size(), 2u);
  const json& fast = doc["clients"][0];
  EXPECT_EQ(fast["attempts"], 80);
  EXPECT_LT(fast["allowed"].get<int>(), 80);
  EXPECT_GT(fast["first_refused_seconds"].get<double>(), 0.0);
  EXPECT_EQ(fast["estimate"].size(), 21u);
  EXPECT_EQ(doc["clients"][1]["attempts"], 10);
  EXPECT_EQ(doc["clients"][1]["allowed"], 10);  // half the limit: never refused
  EXPECT_TRUE(doc["clients"][1]["first_refused_seconds"].is_null());
  std::uint64_t allowed = 0, refused = 0;
  for (const json& v : fast["allowed_per_bucket"]) allowed += v.get<std::uint64_t>();
  for (const json& v : fast["refused_per_bucket"]) refused += v.get<std::uint64_t>();
  EXPECT_EQ(allowed, fast["allowed"].get<std::uint64_t>());
  EXPECT_EQ(allowed + refused, 80u);
  // The same as `ratekeeper simulate` would decide: deterministic, so the same answer twice.
  EXPECT_EQ(call("POST", "/v1/admin/simulate", "", kWhatIf).body, res.body);
}

TEST_F(DashboardTest, WhatIfBadInputIsAnsweredWithTheFieldAndChangesNothing) {
  check("user", "dave");
  const std::string rates_before = json::parse(call("GET", "/v1/admin/rates").body)["rules"].dump();
  const std::string lim = R"("limiter": {"algorithm": "gcra", "limit": 5})";
  const std::string one = R"("clients": [{"name": "a", "pattern": "periodic", "rate": 2}])";
  auto body = [&](std::string a, std::string b, std::string c) { return "{" + a + ", " + b + ", " + c + "}"; };
  const std::string dur = R"("duration": "10s")";
  struct Case {
    std::string body, field, message;
  };
  const std::vector<Case> cases = {
      {"{\"duration\": ", "", "not valid JSON"},
      {"[1, 2]", "", "must be a JSON object"},
      {"\"\xff\"", "", "not valid JSON"},
      {std::string(100, '[') + std::string(100, ']'), "", "nested more than 8 deep"},
      {body(dur, R"("limiter": {"algorithm": "magic", "limit": 5})", one), "limiter.algorithm",
       "unknown algorithm 'magic'"},
      {body(dur, R"("limiter": {"algorithm": "earrrl", "limit": 5})", one), "limiter.half_life", "half_life"},
      {body(dur, R"("limiter": {"algorithm": "gcra", "limit": -5})", one), "limiter.limit", "greater than 0"},
      {body(dur, R"("limiter": {"algorithm": "gcra", "limit": "lots"})", one), "limiter.limit", "not a number"},
      {body(dur, R"("limiter": {"algorithm": "gcra"})", one), "limiter.limit", "needs a limit"},
      {"{" + lim + ", " + one + "}", "duration", "needs a duration"},
      {body(R"("duration": "forever")", lim, one), "duration", "not a duration"},
      {body(R"("duration": "1000y")", lim, one), "duration", ""},
      {body(dur, lim, R"("clients": [])"), "clients", "non-empty list"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "speed": 2}])"), "clients[0].speed",
       "unknown key 'speed'"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "zigzag", "rate": 2}])"), "clients[0].pattern",
       "unknown pattern"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "rate": -3}])"), "clients[0].rate",
       "must be above 0"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic"}])"), "clients[0].rate", "needs rate"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "rate": 30000}])"), "clients[0]",
       "over the limit of 200000"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "rate": 1, "count": 21}])"),
       "clients[0].count", "'21' is not a whole number from 1 to 20"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "rate": 1, "count": 15},
                                     {"name": "b", "pattern": "periodic", "rate": 1, "count": 15}])"),
       "clients[1].count", "15 more clients make 30 in all, over the limit of 20"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "rate": 1100, "count": 20}])"), "clients[0]",
       "about 220000 attempts by this client, over the limit of 200000"},
      {body(dur, lim, R"("clients": [{"name": ")" + std::string(257, 'n') + R"(", "pattern": "periodic", "rate": 1}])"),
       "clients[0].name", "257 bytes is too long for a key (at most 256)"},
      {body(dur, lim, R"("clients": [{"name": "a", "key": ")" + std::string(300, 'k') + R"(", "pattern": "periodic",
                                      "rate": 1}])"),
       "clients[0].key", "300 bytes is too long for a key (at most 256)"},
      {body(dur, lim, R"("clients": [{"name": ")" + std::string(300, 'n') + R"(", "key": "k", "pattern": "periodic",
                                      "rate": 1}])"),
       "clients[0].name", "300 bytes is too long for a name (at most 256)"},
      {body(R"("duration": "8d")", lim, one), "duration", "691200s is over the limit of 604800s"},
      {body(dur, lim,
            R"("clients": [{"name": "a", "pattern": "periodic", "rate": 1, "filler": ")" + std::string(17000, 'x') +
                "\"}]"),
       "", "the body is 17"},
      {body(R"("duration": "10s", "sample_every": "100us")", lim, one), "sample_every", "over the limit of 20000"},
      {body(dur, lim, R"("clients": [{"name": "a", "pattern": "periodic", "rate": 1, "cost": -1}])"), "clients[0].cost",
       "not a whole number"},
      {body(dur, R"("color": "red")", one), "color", "unknown key 'color'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    expect_bad(call("POST", "/v1/admin/simulate", "", c.body), c.field, c.message);
  }
  EXPECT_EQ(bad_requests_.load(), static_cast<int>(cases.size()));
  EXPECT_EQ(json::parse(call("GET", "/v1/admin/rates").body)["rules"].dump(), rates_before);
}

// The attack of issue 19: a page on another site, or a DNS name rebound to 127.0.0.1, drove the admin listener
// through the visitor's browser: a text/plain POST (no CORS preflight) reset limits, and hot keys were readable.
TEST_F(DashboardTest, AdminRefusesForeignHostForeignOriginAndNonJsonPosts) {
  ASSERT_TRUE(std::holds_alternative<service::CheckResponse>(check("user", "mallory")));
  ASSERT_TRUE(std::holds_alternative<service::CheckResponse>(check("user", "mallory")));
  const std::string reset = R"({"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"mallory"}]}]})";
  auto refused = [&](const server::http::Response& res, int status, std::string_view field) {
    EXPECT_EQ(res.status, status) << res.body;
    EXPECT_EQ(json::parse(res.body)["error"]["field"], field) << res.body;
  };
  refused(call("POST", "/v1/admin/reset", "", reset, {{"Content-Type", "text/plain"}}), 415, "Content-Type");
  refused(call("POST", "/v1/admin/reset", "", reset, {{"Content-Type", "application/x-www-form-urlencoded"}}), 415,
          "Content-Type");
  refused(call("POST", "/v1/admin/reset", "", reset, {{"Host", "127.0.0.1:9090"}}), 415, "Content-Type");  // none
  refused(call("POST", "/v1/admin/reset", "", reset,
               {{"Host", "127.0.0.1:9090"}, {"Origin", "https://evil.example"}, {"Content-Type", "application/json"}}),
          403, "Origin");
  refused(call("POST", "/v1/admin/reset", "", reset,
               {{"Host", "127.0.0.1:9090"}, {"Origin", "null"}, {"Content-Type", "application/json"}}),
          403, "Origin");
  refused(call("POST", "/v1/admin/reset", "", reset,
               {{"Host", "rebind.evil.example:9090"}, {"Content-Type", "application/json"}}),
          403, "Host");
  refused(call("GET", "/v1/admin/hot-keys", "", "", {{"Host", "rebind.evil.example:9090"}}), 403, "Host");
  refused(call("GET", "/metrics", "", "", {{"Host", "localhost.evil.example"}}), 403, "Host");
  // None of it reset anything: mallory's two are still counted.
  const auto peek = [&] {
    service::CheckRequest r{.domain = "edge"};
    r.descriptors.push_back({.entries = {{"user", "mallory"}}});
    return std::get<service::CheckResponse>(service_->dry_run(r)).statuses[0].limit_remaining;
  };
  EXPECT_EQ(peek(), 0u);
  // Its own names pass: IP literals, localhost names, the same origin, and JSON as the page sends it.
  for (std::string_view host :
       {"127.0.0.1:9090", "[::1]:9090", "10.1.2.3", "localhost:9090", "LOCALHOST.", "admin.localhost:8000"}) {
    EXPECT_EQ(call("GET", "/v1/admin/rates", "", "", {{"Host", host}}).status, 200) << host;
  }
  const auto ok = call("POST", "/v1/admin/reset", "", reset,
                       {{"Host", "127.0.0.1:9090"},
                        {"Origin", "http://127.0.0.1:9090"},
                        {"Content-Type", "Application/JSON; charset=utf-8"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(peek(), 1u);  // fresh: a look at cost 1 leaves 1 of 2
}

TEST_F(DashboardTest, ConfiguredAdminHostsAreAnswered) {
  const auto admin = admin_listener({.hosts = {"Ratekeeper.Internal"}});
  auto status = [&](std::vector<server::http::Field> fields) {
    server::http::Request req;
    req.method = "GET";
    req.path = req.target = "/v1/admin/rates";
    req.fields = fields;
    server::http::Response res;
    admin(req, res);
    return res.status;
  };
  EXPECT_EQ(status({{"Host", "ratekeeper.internal:9090"}}), 200);
  EXPECT_EQ(status({{"Host", "127.0.0.1:9090"}, {"Origin", "https://ratekeeper.internal"}}), 200);  // behind a proxy
  EXPECT_EQ(status({{"Host", "other.internal:9090"}}), 403);
  EXPECT_EQ(status({{"Host", "ratekeeper.internal"}, {"Origin", "https://ratekeeper.internal.evil.example"}}), 403);
}

// Hot keys once showed API keys and Authorization values as they were sent.
TEST_F(DashboardTest, HotKeysNeverShowCredentials) {
  std::ofstream(dir_ / "auth.yaml") << R"(
domain: auth
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: caller
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 5}
forward_auth:
  descriptors:
    - entries: [{key: caller, from: header, header: Authorization}]
)";
  ASSERT_TRUE(reloader_->load_now().empty());
  for (const auto& [key, value] :
       {std::pair{"api_key", "sk_live_SECRET"}, std::pair{"caller", "Bearer eyJhbGciOi.secret"},
        std::pair{"remote_address", "203.0.113.7"}}) {
    service::CheckRequest r{.domain = "auth"};
    r.descriptors.push_back({.entries = {{key, value}}});
    ASSERT_TRUE(std::holds_alternative<service::CheckResponse>(service_->check(r)));
  }
  const auto res = call("GET", "/v1/admin/hot-keys", "domain=auth");
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(res.body.find("sk_live"), std::string::npos) << res.body;
  EXPECT_EQ(res.body.find("eyJhbGciOi"), std::string::npos) << res.body;
  const json rules = json::parse(res.body)["rules"];
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0]["keys"][0]["key"], "sha256:95697d8551e8");
  EXPECT_EQ(rules[1]["keys"][0]["key"], "sha256:c1d532a2b008");  // its descriptor key is innocent; its header is not
  EXPECT_EQ(rules[2]["keys"][0]["key"], "203.0.113.7");
  // The state is still read under the real key: one charged of five, so a request of cost 1 would leave 3 (a key
  // never seen would leave 4).
  EXPECT_EQ(rules[0]["keys"][0]["remaining"], 3);
}

// ---- What-if under attack: every size bounded before anything is made, the run off the admin listener's thread ----

// The attack of "hostile round two": `count: 100000` of a 4,089-byte name expanded 100,000 clients before their
// number was checked: 400 after 7.5 s, the process at 1.6 GB and holding it. Now the bounds are arithmetic on the
// request, before anything is expanded or run.
TEST_F(DashboardTest, AHundredThousandLongNamesAreRefusedBeforeAnyIsMade) {
  const std::string body = R"({"duration": "60s", "limiter": {"algorithm": "gcra", "limit": 5},
    "clients": [{"name": ")" +
                           std::string(4089, 'n') + R"(", "pattern": "periodic", "rate": 1, "count": 100000}]})";
  const WhatIfLimits limits;  // the admin listener's
  test::reset_peak_rss();
  const std::int64_t before = test::rss_bytes();
  const auto start = Clock::now();
  const auto res = call("POST", "/v1/admin/simulate", "", body);
  EXPECT_LT(Clock::now() - start, limits.max_time / 4);  // answered from arithmetic, not by running into a budget
  EXPECT_LT(test::peak_rss_bytes() - before, 32 << 20);
  EXPECT_LT(test::rss_bytes() - before, 8 << 20);  // and nothing held afterwards
  expect_bad(res, "clients[0].name", "4089 bytes is too long for a key (at most 256)");
  expect_bad(call("POST", "/v1/admin/simulate", "", R"({"duration": "60s", "limiter": {"algorithm": "gcra", "limit": 5},
               "clients": [{"name": "n", "pattern": "periodic", "rate": 1, "count": 100000}]})"),
             "clients[0].count", "not a whole number from 1 to 20");
}

// A what-if that runs long within every bound: one client fills a sliding log of 100,000 entries, and another on
// the same key asks for the whole limit each time, so that each refusal walks the log to say when it would fit:
// about 5e9 steps, far past any budget.
const std::string kLongWhatIf = R"({"duration": "100s",
  "limiter": {"algorithm": "sliding_log", "limit": 100000, "window": "1000s"},
  "clients": [{"name": "filler", "key": "k", "pattern": "periodic", "rate": 1000},
              {"name": "whale", "key": "k", "pattern": "periodic", "rate": 1000, "cost": 100000}]})";

// HTTP/1.1 over loopback, one request a connection, as a prober or a browser would send it.
class Conn {
 public:
  explicit Conn(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    timeval tv{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~Conn() { ::close(fd_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void send(std::string_view method, std::string_view path, std::string_view body = "") {
    std::string req = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                      "Connection: close\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
    EXPECT_EQ(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  }
  bool answered() {  // something to read already
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }
  std::string read() {  // the whole answer: the server closes after it
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }

 private:
  int fd_;
};

int status_of(const std::string& answer) { return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : -1; }
std::string body_of(const std::string& answer) { return answer.substr(answer.find("\r\n\r\n") + 4); }

// The admin listener has one thread (cli/serve/listeners.cc). A what-if ran on it, so that while one ran the
// listener answered nothing else: not /healthz, not /metrics.
TEST_F(DashboardTest, AdminListenerAnswersProbesWhileAWhatIfRuns) {
  hooks_.metrics = [] { return std::string("ratekeeper_up 1\n"); };
  server::http::Server server({.threads = 1}, admin_listener());
  server.start();
  const WhatIfLimits limits;
  Conn what_if(server.port());
  const auto start = Clock::now();
  what_if.send("POST", "/v1/admin/simulate", kLongWhatIf);
  std::this_thread::sleep_for(50ms);  // lets the listener take the what-if up before the probes come
  for (const char* path : {"/healthz", "/metrics"}) {
    Conn probe(server.port());
    probe.send("GET", path);
    EXPECT_EQ(status_of(probe.read()), 200) << path;
  }
  // A second what-if meanwhile is told to come back, rather than queued behind the first without end.
  Conn second(server.port());
  second.send("POST", "/v1/admin/simulate", kLongWhatIf);
  const std::string busy = second.read();
  EXPECT_EQ(status_of(busy), 503) << busy;
  EXPECT_NE(busy.find("\r\nRetry-After: 2\r\n"), std::string::npos) << busy;
  EXPECT_FALSE(what_if.answered()) << "the what-if ended before the probes were answered: not a test of them";
  // The first is stopped at its budget, and says so.
  const std::string answer = what_if.read();
  EXPECT_EQ(status_of(answer), 400) << answer;
  EXPECT_NE(body_of(answer).find("the what-if's budget of 2000 ms"), std::string::npos) << answer;
  EXPECT_GE(Clock::now() - start, limits.max_time);
}

// The budget is the listener's to set; a run past it is stopped within a step, and the answer names it.
TEST_F(DashboardTest, AWhatIfPastItsBudgetIsStoppedAndSaysSo) {
  const WhatIfLimits limits{.max_time = 250ms};
  server::http::Server server({.threads = 1}, admin_listener({}, limits));
  server.start();
  Conn what_if(server.port());
  const auto start = Clock::now();
  what_if.send("POST", "/v1/admin/simulate", kLongWhatIf);
  const std::string answer = what_if.read();
  const auto took = Clock::now() - start;
  EXPECT_GE(took, limits.max_time);
  EXPECT_LT(took, 4 * limits.max_time);
  EXPECT_EQ(status_of(answer), 400) << answer;
  const json error = json::parse(body_of(answer))["error"];
  EXPECT_EQ(error["message"], "stopped at the what-if's budget of 250 ms of running: shorten it or lower the rates");
  // The worker is free again: the next what-if runs.
  Conn next(server.port());
  next.send("POST", "/v1/admin/simulate", kWhatIf);
  EXPECT_EQ(status_of(next.read()), 200);
}

// Stopped within a step of its budget (one decision of a sliding log may walk its whole log), saying so.
TEST(WhatIf, APastItsBudgetIsStoppedWithinAStepOfIt) {
  const WhatIfLimits limits{.max_time = 250ms};
  const auto start = Clock::now();
  const auto r = run_what_if(kLongWhatIf, limits);
  const auto took = Clock::now() - start;
  EXPECT_GE(took, limits.max_time);
  EXPECT_LT(took, 4 * limits.max_time);
  ASSERT_TRUE(std::holds_alternative<WhatIfError>(r));
  EXPECT_EQ(std::get<WhatIfError>(r).message,
            "stopped at the what-if's budget of 250 ms of running: shorten it or lower the rates");
  EXPECT_EQ(std::get<WhatIfError>(r).status, 400);
}

// A runner going away (the server stopping) stops its run at the next step rather than waiting out the budget, and
// answers it: no reply is left unsent.
TEST(WhatIf, ARunnerGoingAwayStopsItsRunAndAnswersIt) {
  const WhatIfLimits limits{.max_time = 60s};
  std::optional<WhatIfResult> answer;
  const auto start = Clock::now();
  {
    WhatIfRunner runner(limits);
    ASSERT_TRUE(runner.submit(kLongWhatIf, [&](WhatIfResult r) { answer = std::move(r); }));
    EXPECT_FALSE(runner.submit(kWhatIf, [](WhatIfResult) { ADD_FAILURE() << "a second what-if ran"; }));
    EXPECT_EQ(runner.retry_after(), 60s);
  }
  EXPECT_LT(Clock::now() - start, limits.max_time / 4);
  ASSERT_TRUE(answer && std::holds_alternative<WhatIfError>(*answer));
  EXPECT_EQ(std::get<WhatIfError>(*answer).status, 503);
  EXPECT_NE(std::get<WhatIfError>(*answer).message.find("the admin listener is stopping"), std::string::npos);
}

}  // namespace
}  // namespace rk::dashboard
