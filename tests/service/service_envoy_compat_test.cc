// envoyproxy/ratelimit's own tests, translated: each case is named after the upstream test or script it comes from
// (test/config/config_test.go, test/redis/fixed_cache_impl_test.go, integration-test/scripts/*.sh), and asserts
// the answers upstream gives. docs/compatibility.md lists the deliberate differences.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/registry.h"
#include "service/service.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;

// upstream's examples/ratelimit/config/example.yaml, the part its token-quota scripts use.
const char* kQuotaRules = R"(
domain: rl
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
)";

class EnvoyCompat : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-compat-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  std::vector<rules::ConfigError> load(bool merge = false) {
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_},
                                                  rules::ReloadEvents{}, rules::LoadOptions{.merge_domains = merge});
    return reloader_->load_now();
  }
  Service& service(bool merge = false) {
    const auto errors = load(merge);
    for (const auto& e : errors) ADD_FAILURE() << e.to_string();
    service_ = std::make_unique<Service>(*reloader_, clock_);
    return *service_;
  }

  // One descriptor of entries, with its own hits_addend when given (Envoy's per-descriptor addend).
  static CheckDescriptor desc(std::vector<std::pair<std::string, std::string>> entries,
                              std::optional<std::uint64_t> hits = std::nullopt) {
    return {.entries = std::move(entries), .hits_addend = hits};
  }
  CheckResponse check(std::string domain, std::vector<CheckDescriptor> descriptors) {
    auto r = service_->check({.domain = std::move(domain), .descriptors = std::move(descriptors)});
    if (auto* e = std::get_if<RequestError>(&r)) ADD_FAILURE() << e->field << ": " << e->message;
    return std::get<CheckResponse>(std::move(r));
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<Service> service_;
};

// integration-test/scripts/token-quota.sh: Envoy checks service_2 (2 a minute) with hits_addend 0 on the request
// and debits 1 when the stream is done. The debit that goes past the limit is counted, so the 4th check is refused.
TEST_F(EnvoyCompat, TokenQuotaScript) {
  write("rl.yaml", kQuotaRules);
  service();
  const auto request = [&] {
    const CheckResponse r = check("rl", {desc({{"service", "service_2"}}, 0)});
    if (r.overall == Code::kOk) check("rl", {desc({{"service", "service_2"}}, 1)});  // apply_on_stream_done
    return r;
  };
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(request().overall, Code::kOk) << "request " << n;
  const CheckResponse fourth = request();
  EXPECT_EQ(fourth.overall, Code::kOverLimit);
  EXPECT_EQ(fourth.statuses[0].limit_remaining, 0u);
  clock_->advance(60s);
  EXPECT_EQ(request().overall, Code::kOk) << "the quota is refreshed a minute later";
}

// integration-test/scripts/multiservice-tokenquota.sh: both services are checked with 0; Envoy routes to the first
// one that passed (upstream's response metadata names it) and debits that one. Service 1 serves 2 requests, service
// 2 then 3, and the 6th is refused: every quota_mode descriptor is over.
TEST_F(EnvoyCompat, MultiserviceTokenQuotaScript) {
  write("rl.yaml", kQuotaRules);
  service();
  const auto request = [&]() -> std::string {
    const CheckResponse r = check("rl", {desc({{"service", "service_1"}}, 0), desc({{"service", "service_2"}}, 0)});
    if (r.overall != Code::kOk) return "refused";
    const std::string chosen = r.statuses[0].code == Code::kOk ? "service_1" : "service_2";
    check("rl", {desc({{"service", chosen}}, 1)});
    return chosen;
  };
  const std::vector<std::string> expected = {"service_1", "service_1", "service_2",
                                             "service_2", "service_2", "refused"};
  for (std::size_t n = 0; n < expected.size(); ++n) EXPECT_EQ(request(), expected[n]) << "request " << n + 1;
  clock_->advance(60s);
  EXPECT_EQ(request(), "service_1");
}

// test/redis/fixed_cache_impl_test.go, TestRedis: hits_addend 0 on a counter past its limit (11 of 10) is over the
// limit with nothing left; on a descriptor with no limit, OK with no current_limit.
TEST_F(EnvoyCompat, FixedCacheTestRedisZeroAddend) {
  write("domain.yaml", R"(
domain: domain
descriptors:
  - key: key3
    value: value3
    rate_limit: {unit: hour, requests_per_unit: 10}
)");
  service();
  for (int i = 0; i < 10; ++i) check("domain", {desc({{"key3", "value3"}})});
  CheckResponse r = check("domain", {desc({{"key3", "value3"}}, 0)});
  EXPECT_EQ(r.overall, Code::kOk) << "10 of 10: at the limit, not past it";
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
  EXPECT_EQ(check("domain", {desc({{"key3", "value3"}})}).overall, Code::kOverLimit);  // counted: 11 of 10
  r = check("domain", {desc({{"key2", "value2"}}, 0), desc({{"key3", "value3"}}, 0)});
  EXPECT_FALSE(r.statuses[0].has_limit);
  EXPECT_EQ(r.statuses[0].code, Code::kOk);
  EXPECT_EQ(r.statuses[1].code, Code::kOverLimit);
  EXPECT_EQ(r.statuses[1].limit_remaining, 0u);
  EXPECT_EQ(r.statuses[1].requests_per_unit, 10u);
  EXPECT_EQ(r.overall, Code::kOverLimit);
}

// The documented meaning of hits_addend 0 for every other algorithm (docs/compatibility.md): a look that charges
// nothing, OVER_LIMIT once a request of cost 1 would be refused. Without it, their state never passes the limit and
// the token-quota check would let everything through.
class ZeroAddendEveryAlgorithm : public EnvoyCompat, public ::testing::WithParamInterface<Algorithm> {};

TEST_P(ZeroAddendEveryAlgorithm, LooksWithoutCharging) {
  const Algorithm a = GetParam();
  std::string params;
  if (core::takes(a, core::Param::kHalfLife)) params += ", half_life: 1m";
  if (core::takes(a, core::Param::kCountRefused)) params += ", count_refused: false";
  write("d.yaml",
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 4, algorithm: " +
            std::string(core::info(a).name) + params + "}\n");
  service();
  // Looks on a fresh key pass and charge nothing: afterwards as many debits pass as on a key never looked at.
  for (int i = 0; i < 20; ++i) {
    const CheckResponse r = check("d", {desc({{"k", "looked"}}, 0)});
    ASSERT_EQ(r.overall, Code::kOk);
    EXPECT_FALSE(r.statuses[0].charged);
  }
  const auto debits_until_refused = [&](const std::string& key) {
    int n = 0;
    while (n < 100 && check("d", {desc({{"k", key}}, 1)}).overall == Code::kOk) ++n;
    return n;
  };
  const int looked = debits_until_refused("looked");
  EXPECT_EQ(looked, debits_until_refused("fresh"));
  EXPECT_GE(looked, 1);
  // Exhausted: the look is refused, and says when to come back.
  const CheckResponse r = check("d", {desc({{"k", "looked"}}, 0)});
  EXPECT_EQ(r.overall, Code::kOverLimit);
  EXPECT_GT(r.statuses[0].retry_after, Nanos{0});
}

INSTANTIATE_TEST_SUITE_P(All, ZeroAddendEveryAlgorithm, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& p) { return std::string(core::info(p.param).name); });

// test/config/config_test.go, TestDomainMerge (merge_domain_key1.yaml + merge_domain_key2.yaml): with merging on,
// both files' limits apply to the one domain; off, the second file is an error.
TEST_F(EnvoyCompat, ConfigTestDomainMerge) {
  write("merge_domain_key1.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n"
        "    rate_limit: {unit: minute, requests_per_unit: 10}\n");
  write("merge_domain_key2.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key2\n    value: value2\n"
        "    rate_limit: {unit: minute, requests_per_unit: 20}\n");
  const auto errors = load(false);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("domain 'test-domain' is already defined in"), std::string::npos);
  service(true);
  const CheckResponse r = check("test-domain", {desc({{"key1", "value1"}}), desc({{"key2", "value2"}})});
  EXPECT_EQ(r.statuses[0].requests_per_unit, 10u);
  EXPECT_EQ(r.statuses[1].requests_per_unit, 20u);
  EXPECT_FALSE(check("foo_domain", {desc({{"key1", "value1"}})}).statuses[0].has_limit);
}

// test/config/duplicate_domain.yaml and empty `descriptors:`: a placeholder domain, known with no limits.
TEST_F(EnvoyCompat, ConfigTestPlaceholderDomain) {
  write("duplicate_domain.yaml", "domain: test-domain\ndescriptors:\n");
  write("nested.yaml", "domain: nested\ndescriptors:\n  - key: a\n    descriptors:\n");
  Service& s = service();
  ASSERT_NE(s.rules()->domain("test-domain"), nullptr);
  EXPECT_TRUE(s.rules()->domain("test-domain")->descriptors.empty());
  const CheckResponse r = check("test-domain", {desc({{"key1", "value1"}})});
  EXPECT_EQ(r.overall, Code::kOk);
  EXPECT_FALSE(r.statuses[0].has_limit);
  EXPECT_EQ(check("nested", {desc({{"a", "x"}})}).overall, Code::kOk);
}

// test/config/config_test.go, TestConfigLimitOverride, "No matching domain": a request's own limit on a domain that
// has no rules file is not applied; on a known domain it is, and its current_limit has no name.
TEST_F(EnvoyCompat, ConfigTestLimitOverrideNoMatchingDomain) {
  write("test.yaml", "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n");
  service();
  CheckDescriptor d = desc({{"key1", "value1"}, {"subkey1", "something"}});
  d.limit = LimitOverride{1, rules::Unit::kDay};
  for (int i = 0; i < 3; ++i) {
    const CheckResponse r = check("foo_domain", {d});
    EXPECT_EQ(r.overall, Code::kOk);
    EXPECT_FALSE(r.statuses[0].has_limit);
  }
  EXPECT_EQ(check("test-domain", {d}).overall, Code::kOk);
  const CheckResponse r = check("test-domain", {d});
  EXPECT_EQ(r.overall, Code::kOverLimit);
  EXPECT_EQ(r.statuses[0].rule, nullptr);
  EXPECT_EQ(r.statuses[0].requests_per_unit, 1u);
}

}  // namespace
}  // namespace rk::service
