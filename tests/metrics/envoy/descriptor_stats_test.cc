// envoyproxy/ratelimit's per-descriptor stats (metrics/envoy/descriptor_stats.h, stats_key.h), its own tests
// translated: each case is named after the upstream test it comes from (test/config/config_test.go,
// test/redis/fixed_cache_impl_test.go, test/limiter/base_limiter_test.go, src/stats/prom/prometheus_sink_test.go,
// integration-test/scripts/*.sh); its HTTP surface is tests/server/api/envoy_json_test.cc.
// docs/compatibility.md lists the deliberate differences.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "metrics/envoy/descriptor_stats.h"
#include "metrics/envoy/stats_key.h"
#include "metrics/names.h"
#include "rules/reloader.h"
#include "service/service.h"

namespace rk::metrics::envoy {
namespace {

using service::CheckDescriptor;
using service::CheckResponse;
using service::Code;
using Entries = std::vector<std::pair<std::string, std::string>>;

class EnvoyStats : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-envoystats-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Loads `rules` (one file) and a service whose decisions feed the per-descriptor stats.
  service::Service& service(const std::string& rules, DescriptorStatsOptions options = {}) {
    std::ofstream(dir_ / "rules.yaml") << rules;
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    for (const auto& e : reloader_->load_now()) ADD_FAILURE() << e.to_string();
    stats_ = std::make_shared<DescriptorStats>(registry_, options);
    service_ = std::make_unique<service::Service>(*reloader_, clock_, service::ServiceOptions{.observer = stats_});
    return *service_;
  }

  CheckResponse check(const std::string& domain, Entries entries, std::optional<std::uint64_t> hits = std::nullopt) {
    auto r = service_->check(
        {.domain = domain, .descriptors = {CheckDescriptor{.entries = std::move(entries), .hits_addend = hits}}});
    if (auto* e = std::get_if<service::RequestError>(&r)) ADD_FAILURE() << e->field << ": " << e->message;
    return std::get<CheckResponse>(std::move(r));
  }

  // upstream's stats key for a request, as the matched rule and its counter key give it.
  std::string stats_key(const std::string& domain, const Entries& entries) {
    const auto set = service_->rules();
    std::vector<rules::Entry> e;
    for (const auto& [k, v] : entries) e.push_back({k, v});
    const rules::Match m = set->match(domain, e);
    if (!m.rule) return "(no rule)";
    return stats_key_of(*set, *m.rule, m.counter_key);
  }

  // The value of `metric{domain,key1,key2}` in the exposition; -1 if there is no such series.
  long long value(std::string_view metric, std::string_view domain, std::string_view key1, std::string_view key2 = "") {
    const std::string line = std::string(metric) + "{domain=\"" + std::string(domain) + "\",key1=\"" +
                             std::string(key1) + "\",key2=\"" + std::string(key2) + "\"} ";
    const std::string text = registry_.expose();
    const auto at = text.find("\n" + line);
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + 1 + line.size()));
  }
  std::size_t series(std::string_view metric) {
    std::istringstream in(registry_.expose());
    std::size_t n = 0;
    for (std::string l; std::getline(in, l);) n += l.starts_with(std::string(metric) + "{");
    return n;
  }
  // The five counters of one series: total, over, near, within, shadow.
  std::array<long long, 5> five(std::string_view domain, std::string_view key1, std::string_view key2 = "") {
    namespace n = names;
    return {value(n::kEnvoyTotalHits.name, domain, key1, key2), value(n::kEnvoyOverLimit.name, domain, key1, key2),
            value(n::kEnvoyNearLimit.name, domain, key1, key2), value(n::kEnvoyWithinLimit.name, domain, key1, key2),
            value(n::kEnvoyShadowMode.name, domain, key1, key2)};
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  Registry registry_;
  std::shared_ptr<DescriptorStats> stats_;
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
};

using Five = std::array<long long, 5>;

// ---- test/config/config_test.go: the stats key of each request

// TestDetailedMetric: detailed_metric on the matched rule puts every entry's request value in the key.
TEST_F(EnvoyStats, ConfigTestDetailedMetric) {
  service(R"(
domain: nested
descriptors:
  - key: key-1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: key-2
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plain-1
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: plain-2
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: key_1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 500}
  - key: key_1
    value: some-value-for-key-1
    rate_limit: {unit: minute, requests_per_unit: 500}
  - key: key_2
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5000}
    descriptors:
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
)");
  // "nested with no values but request only top-level key" (and "... with no detailed metric")
  EXPECT_EQ(stats_key("nested", {{"key-1", "value-1"}}), "nested.key-1_value-1");
  EXPECT_EQ(stats_key("nested", {{"plain-1", "value-1"}}), "nested.plain-1");
  // "nested with no values and request fully nested descriptors" (and "... with no detailed metric")
  EXPECT_EQ(stats_key("nested", {{"key-1", "value-1"}, {"key-2", "value-2"}}), "nested.key-1_value-1.key-2_value-2");
  EXPECT_EQ(stats_key("nested", {{"plain-1", "value-1"}, {"plain-2", "value-2"}}), "nested.plain-1.plain-2");
  // "test nested descriptors with simple request", "... only second descriptor request not nested", "... nested"
  EXPECT_EQ(stats_key("nested", {{"key_1", "value-for-key-1"}}), "nested.key_1_value-for-key-1");
  EXPECT_EQ(stats_key("nested", {{"key_2", "key-2-value"}}), "nested.key_2_key-2-value");
  EXPECT_EQ(stats_key("nested", {{"key_2", "key-2-value"}, {"key_3", "requested-key3-value"}}),
            "nested.key_2_key-2-value.key_3_requested-key3-value");
}

const char* kValueToMetric = R"(
domain: domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
      - key: detailed
        value_to_metric: true
        descriptors:
          - key: subject_id
            detailed_metric: true
            rate_limit: {unit: minute, requests_per_unit: 60}
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {unit: second, requests_per_unit: 1}
      - key: nothing
        rate_limit: {unit: second, requests_per_unit: 1}
)";

// TestValueToMetric_UsesRuntimeValuesInStats, _WithConfiguredValues, _WithWildcard, _WithEmptyValue,
// _DoesNotOverrideDetailedMetric, _MidLevelOnly, _NoFlag_Unchanged.
TEST_F(EnvoyStats, ConfigTestValueToMetric) {
  service(kValueToMetric);
  EXPECT_EQ(stats_key("domain", {{"route", "draw"}, {"http_method", "POST"}, {"subject_id", "123"}}),
            "domain.route_draw.http_method_POST.subject_id");
  EXPECT_EQ(stats_key("domain", {{"route", "api"}, {"http_method", "GET"}, {"subject_id", "user123"}}),
            "domain.route_api.http_method_GET.subject_id");
  EXPECT_EQ(stats_key("domain", {{"user", "alice"}, {"action", "readfile"}, {"resource", "documents"}}),
            "domain.user_alice.action_readfile.resource");
  EXPECT_EQ(stats_key("domain", {{"route", ""}, {"http_method", "PUT"}, {"subject_id", "123"}}),
            "domain.route.http_method_PUT.subject_id");
  EXPECT_EQ(stats_key("domain", {{"route", ""}, {"http_method", ""}, {"subject_id", "123"}}),
            "domain.route.http_method.subject_id");
  EXPECT_EQ(stats_key("domain", {{"route", "draw"}, {"detailed", "GET"}, {"subject_id", "123"}}),
            "domain.route_draw.detailed_GET.subject_id_123");
  EXPECT_EQ(stats_key("domain", {{"k1", "X"}, {"k2", "Y"}, {"k3", "Z"}}), "domain.k1.k2_Y.k3");
  EXPECT_EQ(stats_key("domain", {{"k1", "X"}, {"nothing", "Y"}}), "domain.k1.nothing");
}

// TestShareThreshold ("share_threshold with metrics", "Nested wildcards") and TestWildcardStatsBehavior: a
// share_threshold wildcard keeps its pattern in the key, over value_to_metric and detailed_metric.
TEST_F(EnvoyStats, ConfigTestShareThresholdAndWildcardStats) {
  service(R"(
domain: test-domain
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: wild
    value: foo*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: vtm
    value: foo*bar*
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 20}
)");
  EXPECT_EQ(stats_key("test-domain", {{"route", "api/v1"}, {"method", "GET"}}), "test-domain.route_api/*.method");
  EXPECT_EQ(stats_key("test-domain", {{"service", "svc/user"}, {"endpoint", "get"}}),
            "test-domain.service_svc/*.endpoint_get");
  EXPECT_EQ(stats_key("test-domain", {{"path", "path/foo"}, {"file", "file/doc1"}, {"type", "pdf"}}),
            "test-domain.path_path/*.file_file/*.type");
  EXPECT_EQ(stats_key("test-domain", {{"wild", "foo1"}}), "test-domain.wild_foo*");
  EXPECT_EQ(stats_key("test-domain", {{"vtm", "foo123bar456"}}), "test-domain.vtm_foo123bar456");
}

// ---- the Prometheus names and labels

// src/stats/prom/prometheus_sink_test.go, TestFlushCounterWithDifferentLabels: two parts are {domain, key1}, three
// or more {domain, key1, key2}, the rest dropped.
TEST(EnvoyStatsLabels, PrometheusSinkTestFlushCounterWithDifferentLabels) {
  const auto l = [](std::string_view k) {
    const Labels x = prometheus_labels(k);
    return x.domain + "|" + x.key1 + "|" + x.key2;
  };
  EXPECT_EQ(l("domain1.key1_val1"), "domain1|key1_val1|");
  EXPECT_EQ(l("domain1.key1_val1.key2_val2"), "domain1|key1_val1|key2_val2");
  EXPECT_EQ(l("domain1.key3_val3.key4_val4.key5_val5"), "domain1|key3_val3|key4_val4");
}

// src/utils/utilities.go's SanitizeStatName, as upstream's stats keys go through it.
TEST(EnvoyStatsLabels, SanitizeStatName) {
  EXPECT_EQ(sanitize_stat_name("edge.remote_address_10.0.0.1"), "edge.remote_address_10_0_0_1");
  EXPECT_EQ(sanitize_stat_name("d.k_2001:db8::1|x"), "d.k_2001_db8__1_x");
  EXPECT_EQ(sanitize_stat_name("d.k_1234.5.6.7"), "d.k_1234_5_6_7");      // the match starts at 234
  EXPECT_EQ(sanitize_stat_name("d.k_1.2.3.4567.8"), "d.k_1_2_3_4567.8");  // the last group takes three digits
  EXPECT_EQ(sanitize_stat_name("d.v1.2.3"), "d.v1.2.3");                  // three groups are no address
}

// ---- counting: test/redis/fixed_cache_impl_test.go and test/limiter/base_limiter_test.go

// TestNearLimit, through the real service: a fixed window of 15 an hour, near-limit ratio 0.8 (threshold 12).
TEST_F(EnvoyStats, FixedCacheTestNearLimit) {
  service(R"(
domain: domain
descriptors:
  - {key: key4, value: value4, rate_limit: {unit: hour, requests_per_unit: 15}}
  - {key: key5, value: value5, rate_limit: {unit: second, requests_per_unit: 20}}
  - {key: key6, value: value6, rate_limit: {unit: second, requests_per_unit: 8}}
  - {key: key7, value: value7, rate_limit: {unit: second, requests_per_unit: 20}}
  - {key: key8, value: value8, rate_limit: {unit: second, requests_per_unit: 20}}
  - {key: key9, value: value9, rate_limit: {unit: second, requests_per_unit: 20}}
  - {key: key10, value: value10, rate_limit: {unit: second, requests_per_unit: 10}}
)");
  // Each case: the count before, the hits, and the five counters' increase {total, over, near, within, shadow}.
  const auto step = [&](const std::string& k, std::uint64_t before, std::uint64_t hits) {
    const std::string key = "key" + k, value = "value" + k;
    if (before) check("domain", {{key, value}}, before);
    const Five was = five("domain", key + "_" + value);
    const Code code = check("domain", {{key, value}}, hits).overall;
    const Five now = five("domain", key + "_" + value);
    Five d{};
    for (int i = 0; i < 5; ++i) d[i] = now[i] - was[i];
    return std::pair{code, d};
  };
  // Under the near-limit ratio; at it (13 of 15: one near); over the limit, where near_limit no longer grows.
  EXPECT_EQ(step("4", 10, 1), std::pair(Code::kOk, Five{1, 0, 0, 1, 0}));
  EXPECT_EQ(step("4", 1, 1), std::pair(Code::kOk, Five{1, 0, 1, 1, 0}));
  EXPECT_EQ(step("4", 2, 1), std::pair(Code::kOverLimit, Five{1, 1, 0, 0, 0}));
  // hits_addend over 1: all under the near limit; some over it; all over it.
  EXPECT_EQ(step("5", 2, 3), std::pair(Code::kOk, Five{3, 0, 0, 3, 0}));
  EXPECT_EQ(step("6", 5, 2), std::pair(Code::kOk, Five{2, 0, 1, 2, 0}));
  EXPECT_EQ(step("7", 16, 3), std::pair(Code::kOk, Five{3, 0, 3, 3, 0}));
  // "Some of it over limit" (19 + 3 of 20) and "some of it in all three places" (15 + 7 of 20): upstream counts
  // {over 2, near 1} and {over 2, near 4}; ratekeeper counts a refused request's hits as over, all of them
  // (docs/compatibility.md).
  EXPECT_EQ(step("8", 19, 3), std::pair(Code::kOverLimit, Five{3, 3, 0, 0, 0}));
  EXPECT_EQ(step("9", 15, 7), std::pair(Code::kOverLimit, Five{7, 7, 0, 0, 0}));
  // "all of it over limit"
  EXPECT_EQ(step("10", 27, 3), std::pair(Code::kOverLimit, Five{3, 3, 0, 0, 0}));
}

// NEAR_LIMIT_RATIO (--near-limit-ratio): at 0.5 of 10, the 6th hit is the first near the limit.
TEST_F(EnvoyStats, NearLimitRatioSetting) {
  service("domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 10}}\n",
          {.near_limit_ratio = 0.5});
  for (int i = 0; i < 5; ++i) check("d", {{"k", "v"}});
  EXPECT_EQ(five("d", "k"), (Five{5, 0, 0, 5, 0}));
  check("d", {{"k", "v"}});
  EXPECT_EQ(five("d", "k"), (Five{6, 0, 1, 6, 0}));
}

// base_limiter_test.go, TestGetResponseStatusBelowLimit and ...BelowLimitShadowMode: 6 of 10 after one hit.
TEST(EnvoyStatsCount, BaseLimiterTestGetResponseStatusBelowLimit) {
  service::DescriptorStatus st;
  st.hits = 1;
  st.requests_per_unit = 10;
  st.limit_remaining = 4;
  const Hits h = count_hits(st, 0.8);
  EXPECT_EQ(h.total, 1u);
  EXPECT_EQ(h.within, 1u);
  EXPECT_EQ(h.near, 0u);
  EXPECT_EQ(h.over, 0u);
  EXPECT_EQ(h.shadow, 0u);
}

// TestOverLimitWithLocalCacheShadowRule's service path and base_limiter_test.go's ...OverLimitShadowMode: a
// shadow_mode rule over its limit answers OK and counts over_limit and shadow_mode; --shadow-mode (upstream's
// global SHADOW_MODE) counts over_limit only.
TEST_F(EnvoyStats, BaseLimiterTestGetResponseStatusOverLimitShadowMode) {
  service(R"(
domain: domain
descriptors:
  - {key: key4, value: value4, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 2}}
)");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(check("domain", {{"key4", "value4"}}).overall, Code::kOk);
  EXPECT_EQ(five("domain", "key4_value4"), (Five{4, 2, 1, 2, 2}));
}

// The two options' series, through the real service: value-included-in-stats-key-when-unspecified.sh (a key-only
// rule of 2 a minute with detailed_metric: the third request is refused, and over_limit is 1 in the series of the
// request's value).
TEST_F(EnvoyStats, ValueIncludedInStatsKeyWhenUnspecifiedScript) {
  service(R"(
domain: rl
descriptors:
  - key: unspec
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
)");
  EXPECT_EQ(check("rl", {{"unspec", "unspecified_value"}}).overall, Code::kOk);
  EXPECT_EQ(check("rl", {{"unspec", "unspecified_value"}}).overall, Code::kOk);
  EXPECT_EQ(check("rl", {{"unspec", "unspecified_value"}}).overall, Code::kOverLimit);
  EXPECT_EQ(value(names::kEnvoyOverLimit.name, "rl", "unspec_unspecified_value"), 1);
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "rl", "unspec"), 0) << "the rule's own series, unused";
}

// Unlimited and replaced limits count nothing (upstream drops them before its cache); a rule's own series exists,
// at zero, from the rules' load.
TEST_F(EnvoyStats, UnlimitedAndReplacedCountNothing) {
  service(R"(
domain: d
descriptors:
  - {key: free, rate_limit: {unlimited: true}}
  - {key: a, rate_limit: {unit: minute, requests_per_unit: 5, name: a}}
  - {key: b, rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: a}]}}
)");
  check("d", {{"free", "x"}});
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "free"), -1);
  auto r = service_->check({.domain = "d", .descriptors = {{.entries = {{"a", "1"}}}, {.entries = {{"b", "1"}}}}});
  ASSERT_TRUE(std::holds_alternative<CheckResponse>(r));
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "a"), 0);
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "b"), 1);
}

// The attack: a client sending a new value every time to a detailed_metric rule (or a value_to_metric one) makes
// at most max_value_series series; every hit is still counted, past the cap in the rule's own series.
TEST_F(EnvoyStats, ClientValuesCannotCreateUnboundedSeries) {
  service(R"(
domain: d
descriptors:
  - key: ip
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: route
    value_to_metric: true
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 1000000}
)",
          {.max_value_series = 50});
  for (int i = 0; i < 5000; ++i) {
    check("d", {{"ip", "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256)}});
    check("d", {{"route", "/r" + std::to_string(i)}, {"user", "u"}});
  }
  // Own series of the two rules, plus 50 value series each.
  EXPECT_EQ(series(names::kEnvoyTotalHits.name), 2u + 2u * 50u);
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "ip_10_0_0_0"), 1);
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "ip"), 5000 - 50);
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "route", "user"), 5000 - 50);
  // A reload does not start the cap over.
  std::ofstream(dir_ / "rules.yaml", std::ios::app) << "\n";
  clock_->advance(std::chrono::seconds(1));
  reloader_->load_now();
  for (int i = 0; i < 100; ++i) check("d", {{"ip", "192.0.2." + std::to_string(i)}});
  EXPECT_EQ(series(names::kEnvoyTotalHits.name), 2u + 2u * 50u);
}

// Each stats key has its own counters (what statsd sends under upstream's whole name, keys_since()); the Prometheus
// series of the keys that share their first three parts is their sum, counted once.
TEST_F(EnvoyStats, EachStatsKeyCountsApartAndPrometheusSumsThoseSharingTheirLabels) {
  service(R"(
domain: d
descriptors:
  - key: host
    value: api.example.com
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: host
    value: api.example.org
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            detailed_metric: true
            rate_limit: {unit: minute, requests_per_unit: 100}
)");
  check("d", {{"host", "api.example.com"}});
  check("d", {{"host", "api.example.com"}});
  check("d", {{"host", "api.example.org"}});
  check("d", {{"a", "1"}, {"b", "2"}, {"c", "x"}});
  check("d", {{"a", "1"}, {"b", "2"}, {"c", "y"}});
  std::map<std::string, std::uint64_t> totals;
  for (const KeyCounters* k : stats_->keys_since(0)) totals[k->key] = k->total.value();
  EXPECT_EQ(totals, (std::map<std::string, std::uint64_t>{{"d.host_api.example.com", 2},
                                                          {"d.host_api.example.org", 1},
                                                          {"d.a.b.c", 0},  // the rule's own key
                                                          {"d.a_1.b_2.c_x", 1},
                                                          {"d.a_1.b_2.c_y", 1}}));
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "host_api", "example"), 3);
  EXPECT_EQ(value(names::kEnvoyTotalHits.name, "d", "a_1", "b_2"), 2);
  // From an index on: what a flusher has not seen yet.
  const std::size_t seen = stats_->keys_since(0).size();
  EXPECT_TRUE(stats_->keys_since(seen).empty());
  check("d", {{"a", "1"}, {"b", "2"}, {"c", "z"}});
  ASSERT_EQ(stats_->keys_since(seen).size(), 1u);
  EXPECT_EQ(stats_->keys_since(seen)[0]->key, "d.a_1.b_2.c_z");
}

}  // namespace
}  // namespace rk::metrics::envoy
