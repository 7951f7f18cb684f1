#include "service/service.h"

#include "http_fields/rate_limit_headers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace rk::service {
namespace {

using namespace std::chrono_literals;

const char* kRules = R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 2, name: per_key}
  - key: api_key
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 100, replaces: [{name: per_key}]}
  - key: user
    rate_limit: {unlimited: true}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: earrrl, half_life: 10s}
)";

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-service-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    write(kRules);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& text, const std::string& name = "edge.yaml") { std::ofstream(dir_ / name) << text; }

  Service& service(ServiceOptions o = {}) {
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    EXPECT_TRUE(reloader_->load_now().empty());
    service_ = std::make_unique<Service>(*reloader_, clock_, o);
    return *service_;
  }

  static CheckRequest req(std::initializer_list<std::vector<std::pair<std::string, std::string>>> descriptors,
                          std::string domain = "edge") {
    CheckRequest r;
    r.domain = std::move(domain);
    for (const auto& e : descriptors) r.descriptors.push_back({.entries = e});
    return r;
  }

  static CheckResponse ok(std::variant<CheckResponse, RequestError> v) {
    if (auto* e = std::get_if<RequestError>(&v)) ADD_FAILURE() << e->field << ": " << e->message;
    return std::get<CheckResponse>(std::move(v));
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<Service> service_;
};

TEST_F(ServiceTest, FixedWindowLikeEnvoy) {
  Service& s = service();
  for (int i = 0; i < 3; ++i) {
    const CheckResponse r = ok(s.check(req({{{"remote_address", "10.0.0.1"}}})));
    EXPECT_EQ(r.overall, Code::kOk);
    EXPECT_EQ(r.statuses[0].limit_remaining, static_cast<std::uint32_t>(2 - i));
    EXPECT_EQ(r.statuses[0].requests_per_unit, 3u);
    EXPECT_EQ(r.statuses[0].unit, rules::Unit::kMinute);
  }
  const CheckResponse r = ok(s.check(req({{{"remote_address", "10.0.0.1"}}})));
  EXPECT_EQ(r.overall, Code::kOverLimit);
  EXPECT_EQ(r.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
  // 1.7e18 ns is 20 s into its minute: 40 s until the window resets.
  EXPECT_EQ(r.statuses[0].duration_until_reset, Nanos{40s});
  // Another address has its own counter.
  EXPECT_EQ(ok(s.check(req({{{"remote_address", "10.0.0.2"}}}))).overall, Code::kOk);
  clock_->advance(40s);
  EXPECT_EQ(ok(s.check(req({{{"remote_address", "10.0.0.1"}}}))).overall, Code::kOk);
}

TEST_F(ServiceTest, BlockedUnlimitedUnknownAndUnmatched) {
  Service& s = service();
  CheckResponse r = ok(s.check(req({{{"remote_address", "50.0.0.5"}}})));
  EXPECT_EQ(r.overall, Code::kOverLimit);
  // Never, as the header fields say it (not the second's end, after which it refuses again).
  EXPECT_EQ(r.statuses[0].duration_until_reset, http_fields::kMaxWait);
  r = ok(s.check(req({{{"user", "bob"}}})));
  EXPECT_EQ(r.overall, Code::kOk);
  EXPECT_TRUE(r.statuses[0].unlimited);
  EXPECT_FALSE(r.statuses[0].has_limit);
  EXPECT_EQ(r.statuses[0].limit_remaining, 4294967295u);
  r = ok(s.check(req({{{"nothing", "x"}}})));
  EXPECT_EQ(r.overall, Code::kOk);
  EXPECT_FALSE(r.statuses[0].has_limit);
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
  r = ok(s.check(req({{{"remote_address", "1.2.3.4"}}}, "unknown-domain")));
  EXPECT_EQ(r.overall, Code::kOk);
  EXPECT_FALSE(r.statuses[0].has_limit);
}

TEST_F(ServiceTest, HitsAddend) {
  Service& s = service();
  CheckRequest r = req({{{"remote_address", "10.0.0.1"}}});
  r.hits_addend = 2;
  EXPECT_EQ(ok(s.check(r)).statuses[0].limit_remaining, 1u);
  r.descriptors[0].hits_addend = 0;  // the descriptor's own addend wins, even 0
  EXPECT_EQ(ok(s.check(r)).statuses[0].limit_remaining, 1u);
  r.descriptors[0].hits_addend = 2;
  EXPECT_EQ(ok(s.check(r)).overall, Code::kOverLimit);
}

TEST_F(ServiceTest, ReplacesDropsTheReplacedLimit) {
  Service& s = service();
  for (int i = 0; i < 3; ++i) {
    const CheckResponse r = ok(s.check(req({{{"api_key", "vip"}}, {{"api_key", "plain"}}})));
    ASSERT_EQ(r.statuses.size(), 2u);
    EXPECT_EQ(r.statuses[0].requests_per_unit, 100u);
    EXPECT_FALSE(r.statuses[1].has_limit) << "per_key is replaced by the vip limit";
    EXPECT_EQ(r.overall, Code::kOk);
  }
  // Alone, the per_key limit applies.
  ok(s.check(req({{{"api_key", "plain"}}})));
  ok(s.check(req({{{"api_key", "plain"}}})));
  EXPECT_EQ(ok(s.check(req({{{"api_key", "plain"}}}))).overall, Code::kOverLimit);
}

TEST_F(ServiceTest, ShadowModeCountsButNeverRefuses) {
  Service& s = service();
  ok(s.check(req({{{"shadowed", "a"}}})));
  const CheckResponse r = ok(s.check(req({{{"shadowed", "a"}}})));
  EXPECT_EQ(r.overall, Code::kOk);
  EXPECT_TRUE(r.statuses[0].shadowed);
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);

  Service& global = service({.shadow_mode = true});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ok(global.check(req({{{"remote_address", "9.9.9.9"}}}))).overall, Code::kOk);
}

// A decision's working storage is its thread's spare, reused by the next decision on that thread: nothing of one
// request may show in the next one's answer, nor in an answer given while a decision finishes.
TEST_F(ServiceTest, NothingOfOneDecisionShowsInTheNext) {
  Service& s = service();
  ok(s.check(req({{{"shadowed", "a"}}})));
  const CheckResponse first = ok(s.check(req(
      {{{"shadowed", "a"}}, {{"remote_address", "50.0.0.5"}}, {{"user", "bob"}}, {{"remote_address", "10.0.0.9"}}})));
  ASSERT_EQ(first.statuses.size(), 4u);
  EXPECT_TRUE(first.statuses[0].shadowed);
  EXPECT_EQ(first.overall, Code::kOverLimit);  // the blocked address

  const CheckResponse next = ok(s.check(req({{{"remote_address", "10.0.0.7"}}})));
  ASSERT_EQ(next.statuses.size(), 1u);
  EXPECT_EQ(next.overall, Code::kOk);
  EXPECT_EQ(next.statuses[0].code, Code::kOk);
  EXPECT_FALSE(next.statuses[0].shadowed);
  EXPECT_FALSE(next.statuses[0].unlimited);
  EXPECT_EQ(next.statuses[0].limit_remaining, 2u);
  EXPECT_EQ(next.statuses[0].fallback, rules::FailurePolicy::kDefault);
  EXPECT_TRUE(next.statuses[0].store_error.empty());

  // A callback that decides again, on the thread whose decision is finishing.
  std::optional<CheckResponse> outer, inner;
  s.check_async(req({{{"remote_address", "50.0.0.5"}}, {{"user", "carol"}}}), [&](CheckResult r) {
    inner = ok(s.check(req({{{"remote_address", "10.0.0.8"}}})));
    outer = ok(std::move(r));
  });
  ASSERT_TRUE(outer && inner);
  ASSERT_EQ(outer->statuses.size(), 2u);
  EXPECT_EQ(outer->overall, Code::kOverLimit);
  EXPECT_TRUE(outer->statuses[1].unlimited);
  ASSERT_EQ(inner->statuses.size(), 1u);
  EXPECT_EQ(inner->overall, Code::kOk);
  EXPECT_EQ(inner->statuses[0].limit_remaining, 2u);
}

TEST_F(ServiceTest, EveryDescriptorIsChargedUnlessAllOrNothing) {
  Service& s = service();
  // remote_address allows 3 a minute, api_key 2: the third request is over on api_key but charged on both.
  for (int i = 0; i < 3; ++i) ok(s.check(req({{{"remote_address", "1.1.1.1"}}, {{"api_key", "k"}}})));
  EXPECT_EQ(ok(s.check(req({{{"remote_address", "1.1.1.1"}}}))).overall, Code::kOverLimit);

  write(std::string(kRules) + "all_or_nothing: true\n");
  Service& aon = service();
  for (int i = 0; i < 3; ++i) ok(aon.check(req({{{"remote_address", "2.2.2.2"}}, {{"api_key", "k2"}}})));
  // The third was refused by api_key, so remote_address was not charged for it: one left.
  const CheckResponse r = ok(aon.check(req({{{"remote_address", "2.2.2.2"}}})));
  EXPECT_EQ(r.overall, Code::kOk);
  EXPECT_EQ(r.statuses[0].limit_remaining, 0u);
}

// Several descriptors on one rule are charged together (Limiter::check_many): in the order given, the same key
// twice seeing its first charge, other keys and other rules untouched by it.
TEST_F(ServiceTest, SeveralDescriptorsOnOneRuleAreChargedInOrder) {
  Service& s = service();
  const CheckResponse r = ok(s.check(req({{{"remote_address", "3.3.3.3"}},
                                          {{"api_key", "a"}},
                                          {{"remote_address", "3.3.3.3"}},
                                          {{"remote_address", "4.4.4.4"}},
                                          {{"remote_address", "3.3.3.3"}},
                                          {{"remote_address", "3.3.3.3"}}})));
  ASSERT_EQ(r.statuses.size(), 6u);
  EXPECT_EQ(r.statuses[0].limit_remaining, 2u);
  EXPECT_EQ(r.statuses[1].limit_remaining, 1u);
  EXPECT_EQ(r.statuses[2].limit_remaining, 1u);
  EXPECT_EQ(r.statuses[3].limit_remaining, 2u);
  EXPECT_EQ(r.statuses[4].limit_remaining, 0u);
  EXPECT_EQ(r.statuses[4].code, Code::kOk);
  EXPECT_EQ(r.statuses[5].code, Code::kOverLimit);
  EXPECT_EQ(r.overall, Code::kOverLimit);
}

TEST_F(ServiceTest, EarrrlThroughRules) {
  Service& s = service();
  CheckResponse r;
  int allowed = 0;
  for (int i = 0; i < 40; ++i) allowed += ok(s.check(req({{{"client", "c"}}}))).overall == Code::kOk;
  EXPECT_EQ(allowed, 15);  // ceil(1 / (ln 2 / 10)) = 15 at once
  r = ok(s.check(req({{{"client", "c"}}})));
  ASSERT_TRUE(r.statuses[0].estimate.has_value());
  EXPECT_GT(*r.statuses[0].estimate, 1.0);
  EXPECT_EQ(r.statuses[0].algorithm, Algorithm::kEarrrl);
  EXPECT_GT(r.statuses[0].duration_until_reset, Nanos{0});
}

TEST_F(ServiceTest, RequestOverrides) {
  Service& s = service();
  CheckRequest r = req({{{"anything", "x"}}});
  r.descriptors[0].limit = LimitOverride{1, rules::Unit::kHour};
  EXPECT_EQ(ok(s.check(r)).overall, Code::kOk);
  const CheckResponse second = ok(s.check(r));
  EXPECT_EQ(second.overall, Code::kOverLimit);
  EXPECT_EQ(second.statuses[0].name, "override");
  EXPECT_FALSE(second.statuses[0].shadowed);
}

// Regression (issue 19): 1,000 distinct override limits used to empty the override table, resetting every client's
// override counters. Counters are now keyed by domain, unit and entries; the limit value only decides.
CheckRequest override_req(std::string domain, const std::string& client, std::uint32_t limit, rules::Unit unit) {
  CheckRequest r;
  r.domain = std::move(domain);
  r.descriptors.push_back({.entries = {{"client", client}}, .limit = LimitOverride{limit, unit}});
  return r;
}

// Sends `n` overrides with distinct limits (and, if `distinct_clients`, distinct entries) in `domain`, 64 a request.
void flood_overrides(Service& s, const std::string& domain, int n, bool distinct_clients) {
  for (int sent = 0; sent < n;) {
    CheckRequest r;
    r.domain = domain;
    for (int j = 0; j < 64 && sent < n; ++j, ++sent) {
      const std::string client = distinct_clients ? "flood-" + std::to_string(sent)
                                                  : "flood-" + std::to_string(sent % 10);
      r.descriptors.push_back(
          {.entries = {{"client", client}},
           .limit = LimitOverride{static_cast<std::uint32_t>(1000 + sent), static_cast<rules::Unit>(sent % 7)}});
    }
    auto v = s.check(r);
    ASSERT_TRUE(std::holds_alternative<CheckResponse>(v));
  }
}

TEST_F(ServiceTest, OverrideFloodOfDistinctLimitsLeavesAClientAtItsLimitRefused) {
  Service& s = service();
  const CheckRequest victim = override_req("edge", "victim", 2, rules::Unit::kHour);
  EXPECT_EQ(ok(s.check(victim)).overall, Code::kOk);
  EXPECT_EQ(ok(s.check(victim)).overall, Code::kOk);
  EXPECT_EQ(ok(s.check(victim)).overall, Code::kOverLimit);
  flood_overrides(s, "edge", 5000, false);
  const CheckResponse after = ok(s.check(victim));
  EXPECT_EQ(after.overall, Code::kOverLimit);
  EXPECT_EQ(after.statuses[0].limit_remaining, 0u);
  EXPECT_LE(s.override_stats().limiters, 7u);  // one per unit in the domain, whatever the limits sent
  // The same entries under another limit share the counter, as in envoyproxy/ratelimit: 4 counted, 5 allowed.
  const CheckResponse wider = ok(s.check(override_req("edge", "victim", 5, rules::Unit::kHour)));
  EXPECT_EQ(wider.overall, Code::kOk);
  EXPECT_EQ(wider.statuses[0].limit_remaining, 0u);
  // A new hour starts afresh.
  clock_->advance(std::chrono::hours(1));
  EXPECT_EQ(ok(s.check(victim)).overall, Code::kOk);
}

TEST_F(ServiceTest, OverrideFloodInOneDomainLeavesAnothersCounters) {
  write("domain: other\ndescriptors:\n  - key: x\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
        "other.yaml");
  // Stores of 1,000 keys: the flood below (10,000 distinct clients over 7 units) fills its own and evicts within them.
  Service& s = service(ServiceOptions{.store = StoreOptions{.max_keys = 1000}});
  const CheckRequest in_other = override_req("other", "victim", 1, rules::Unit::kDay);
  EXPECT_EQ(ok(s.check(in_other)).overall, Code::kOk);
  EXPECT_EQ(ok(s.check(in_other)).overall, Code::kOverLimit);
  flood_overrides(s, "edge", 10000, true);
  EXPECT_EQ(ok(s.check(in_other)).overall, Code::kOverLimit);
  // Memory stays bounded: a limiter per domain and unit, each store within its 1,000 keys.
  const OverrideStats st = s.override_stats();
  EXPECT_LE(st.limiters, 21u);
  EXPECT_LE(st.store.keys, 21u * 1000u);
  EXPECT_GT(st.store.evictions, 0u);
}

TEST_F(ServiceTest, OverrideFloodInUnconfiguredDomainsLeavesConfiguredOnes) {
  Service& s = service(ServiceOptions{.store = StoreOptions{.max_keys = 1000}});
  const CheckRequest victim = override_req("edge", "victim", 1, rules::Unit::kDay);
  EXPECT_EQ(ok(s.check(victim)).overall, Code::kOk);
  for (int d = 0; d < 2000; ++d) flood_overrides(s, "made-up-" + std::to_string(d), 3, false);
  EXPECT_EQ(ok(s.check(victim)).overall, Code::kOverLimit);
  EXPECT_LE(s.override_stats().limiters, 7u);  // made-up domains make none: their overrides are not applied
}

TEST_F(ServiceTest, OverrideLooksAndHitsAddendJudgeAgainstTheRequestsLimit) {
  Service& s = service();
  CheckRequest r = override_req("edge", "c", 10, rules::Unit::kMinute);
  r.descriptors[0].hits_addend = 7;
  CheckResponse first = ok(s.check(r));
  EXPECT_EQ(first.overall, Code::kOk);
  EXPECT_EQ(first.statuses[0].limit_remaining, 3u);
  CheckResponse second = ok(s.check(r));  // 14 > 10: refused, and counted (Envoy counts refused hits)
  EXPECT_EQ(second.overall, Code::kOverLimit);
  EXPECT_GT(second.statuses[0].retry_after.count(), 0);
  EXPECT_LE(second.statuses[0].retry_after, std::chrono::minutes(1));
  r.descriptors[0].hits_addend = 0;  // a look: passes, reports nothing left
  const CheckResponse look = ok(s.check(r));
  EXPECT_EQ(look.overall, Code::kOk);
  EXPECT_EQ(look.statuses[0].limit_remaining, 0u);
  r.descriptors[0].hits_addend = 11;  // more than the limit: never, and so says duration_until_reset
  const CheckResponse never = ok(s.check(r));
  EXPECT_EQ(never.statuses[0].retry_after, kNever);
  EXPECT_EQ(never.statuses[0].duration_until_reset, http_fields::kMaxWait);
  const CheckResponse dry = ok(s.dry_run(override_req("edge", "fresh", 10, rules::Unit::kMinute)));
  EXPECT_EQ(dry.statuses[0].limit_remaining, 9u);
  EXPECT_EQ(ok(s.check(override_req("edge", "fresh", 10, rules::Unit::kMinute))).statuses[0].limit_remaining, 9u);
}

TEST_F(ServiceTest, DryRunChargesNothing) {
  Service& s = service();
  for (int i = 0; i < 5; ++i) {
    const CheckResponse r = ok(s.dry_run(req({{{"remote_address", "10.0.0.9"}}})));
    EXPECT_EQ(r.statuses[0].name, "remote_address");
    EXPECT_EQ(r.statuses[0].limit_remaining, 2u);
    EXPECT_FALSE(r.statuses[0].charged);
  }
}

TEST_F(ServiceTest, EachKindOfBadRequest) {
  Service& s = service();
  const std::string big(2000, 'x');
  struct Case {
    CheckRequest request;
    std::string field;
    std::string message;
  };
  CheckRequest too_many = req({});
  too_many.descriptors.resize(65, CheckDescriptor{.entries = {{"a", "b"}}});
  CheckRequest huge_hits = req({{{"remote_address", "1"}}});
  huge_hits.hits_addend = 2'000'000'000;
  CheckRequest huge_desc_hits = req({{{"remote_address", "1"}}});
  huge_desc_hits.descriptors[0].hits_addend = 1'000'000'001;
  CheckRequest wide = req({{}});  // 16 entries of 256 + 1,000 bytes: each within its limits, over 4,096 together
  wide.descriptors[0].entries.resize(16, {std::string(256, 'k'), std::string(1000, 'v')});
  CheckRequest many_wide = req({});  // 20 descriptors of 3,500 bytes: each fine, 70,000 in all
  many_wide.descriptors.resize(20, CheckDescriptor{.entries = {{"k", std::string(1000, 'v')},
                                                               {"k2", std::string(1000, 'v')},
                                                               {"k3", std::string(1000, 'v')},
                                                               {"k4", std::string(496, 'v')}}});
  CheckRequest many_entries = req({{}});
  many_entries.descriptors[0].entries.resize(17, {"k", "v"});
  const Case cases[] = {
      {req({{{"a", "b"}}}, ""), "domain", "must not be empty"},
      {req({{{"a", "b"}}}, big), "domain", "is 2000 bytes, over the limit of 256"},
      {req({}), "descriptors", "must not be empty"},
      {too_many, "descriptors", "has 65 descriptors, over the limit of 64"},
      {req({{}}), "descriptors[0].entries", "must not be empty"},
      {many_entries, "descriptors[0].entries", "has 17 entries, over the limit of 16"},
      {req({{{"a", "b"}}, {{"", "v"}}}), "descriptors[1].entries[0].key", "must not be empty"},
      {req({{{big, "v"}}}), "descriptors[0].entries[0].key", "is 2000 bytes, over the limit of 256"},
      {req({{{"a", big}}}), "descriptors[0].entries[0].value", "is 2000 bytes, over the limit of 1024"},
      {huge_hits, "hits_addend", "2000000000 is over the limit of 1000000000"},
      {wide, "descriptors[0].entries",
       "has keys and values of 20096 bytes in all, over the limit of 4096 per descriptor"},
      {many_wide, "descriptors",
       "have keys and values of 66557 bytes in all by descriptors[18], over the limit of 65536 per request"},
      {huge_desc_hits, "descriptors[0].hits_addend", "1000000001 is over the limit of 1000000000"},
  };
  for (const Case& c : cases) {
    auto v = s.check(c.request);
    ASSERT_TRUE(std::holds_alternative<RequestError>(v)) << c.field;
    EXPECT_EQ(std::get<RequestError>(v).field, c.field);
    EXPECT_EQ(std::get<RequestError>(v).message, c.message);
  }
  // None of them charged anything.
  EXPECT_EQ(ok(s.check(req({{{"remote_address", "1"}}}))).statuses[0].limit_remaining, 2u);
}

}  // namespace
}  // namespace rk::service
