#include "rules/ruleset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "base/content_hash.h"
#include "rules/parse.h"
#include "rules/reloader.h"

namespace rk::rules {
namespace {

using namespace std::chrono_literals;

const char* kEdge = R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: /api/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: plan
    value: free
    rate_limit: {unit: hour, requests_per_unit: 50, algorithm: earrrl, half_life: 10m, name: free_plan}
    descriptors:
      - key: user
        rate_limit: {unlimited: true}
)";

std::shared_ptr<const RuleSet> build(const std::string& text, const RuleSet* previous = nullptr) {
  DomainConfig d;
  const auto errors = parse_domain("edge.yaml", text, d);
  EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].to_string());
  std::vector<DomainConfig> domains;
  domains.push_back(std::move(d));
  return RuleSet::build(std::move(domains), previous, BuildOptions{}, base::content_hash(text));
}

Match match(const RuleSet& set, std::initializer_list<Entry> entries) {
  const std::vector<Entry> v(entries);
  return set.match("edge", v);
}

TEST(RuleSetMatch, EnvoySemantics) {
  const auto set = build(kEdge);
  // Key alone: any address, counted per address.
  Match m = match(*set, {{"remote_address", "10.0.0.1"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_EQ(m.rule->path, "remote_address");
  EXPECT_NE(m.counter_key, match(*set, {{"remote_address", "10.0.0.2"}}).counter_key);
  // Exact value first.
  m = match(*set, {{"remote_address", "50.0.0.5"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_TRUE(m.rule->limit->blocked);
  // Wildcards in load order; the first that matches wins.
  m = match(*set, {{"path", "/api/v1/action"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_EQ(m.rule->path, "path=/api/*/action");
  m = match(*set, {{"path", "/api/v1/other"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_EQ(m.rule->path, "path=/api/*");
  // share_threshold: every value matching the wildcard shares one counter.
  EXPECT_EQ(m.counter_key, match(*set, {{"path", "/api/v2/else"}}).counter_key);
  EXPECT_EQ(match(*set, {{"path", "/other"}}).rule, nullptr);
  // Nested: the limit is at the node the last entry reaches.
  m = match(*set, {{"message_type", "marketing"}, {"to_number", "2061111111"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_EQ(m.rule->path, "message_type=marketing/to_number");
  EXPECT_EQ(match(*set, {{"message_type", "marketing"}}).rule, nullptr);  // a level with no limit of its own
  EXPECT_EQ(match(*set, {{"message_type", "transactional"}, {"to_number", "1"}}).rule, nullptr);
  // Too many entries for the tree: no limit.
  EXPECT_EQ(match(*set, {{"remote_address", "1.2.3.4"}, {"extra", "x"}}).rule, nullptr);
  // A node with both a limit and children: one entry hits its limit, two go down.
  m = match(*set, {{"plan", "free"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_EQ(m.rule->name, "free_plan");
  EXPECT_EQ(m.rule->limit->spec.algorithm, Algorithm::kEarrrl);
  m = match(*set, {{"plan", "free"}, {"user", "bob"}});
  ASSERT_NE(m.rule, nullptr);
  EXPECT_TRUE(m.rule->limit->unlimited);
  EXPECT_EQ(m.rule->limiter, nullptr);
  // Unknown domain.
  const std::vector<Entry> e{{"remote_address", "1.2.3.4"}};
  EXPECT_EQ(set->match("nope", e).rule, nullptr);
}

TEST(RuleSetMatch, CounterKeysCannotCollideAcrossEntries) {
  const auto set = build(R"(
domain: edge
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
)");
  const Match one = match(*set, {{"a", "1|b=2"}, {"b", "3"}});
  const Match two = match(*set, {{"a", "1"}, {"b", "2|b=3"}});
  ASSERT_NE(one.rule, nullptr);
  EXPECT_NE(one.counter_key, two.counter_key);
}

TEST(RuleSetMatch, EnvoyFilesDefaultToFixedWindowsCountingEveryHit) {
  const auto set = build(kEdge);
  const Match m = match(*set, {{"remote_address", "10.0.0.1"}});
  const LimitSpec& s = m.rule->limit->spec;
  EXPECT_EQ(s.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(s.limit, 10);
  EXPECT_EQ(s.window, Nanos{1s});
  EXPECT_EQ(s.count_refused, true);
}

TEST(RuleSetBuild, UnchangedRulesKeepTheirCounters) {
  const auto first = build(kEdge);
  const Match m1 = match(*first, {{"remote_address", "10.0.0.1"}});
  m1.rule->limiter->check_at(m1.counter_key, Nanos{0}, 7);
  // Same rule, another rule changed and one added: the counter survives.
  std::string changed = kEdge;
  changed.replace(changed.find("requests_per_unit: 20"), 21, "requests_per_unit: 21");
  changed += "  - key: new_rule\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  const auto second = build(changed, first.get());
  const Match m2 = match(*second, {{"remote_address", "10.0.0.1"}});
  EXPECT_EQ(m2.rule->limiter, m1.rule->limiter);
  EXPECT_EQ(m2.rule->limiter->peek_at(m2.counter_key, Nanos{0}, 0).remaining, 3);
  // The changed rule starts afresh.
  EXPECT_NE(match(*second, {{"path", "/api/x/action"}}).rule->limiter,
            match(*first, {{"path", "/api/x/action"}}).rule->limiter);
  // Changing the limit itself resets its counters.
  std::string relimited = kEdge;
  relimited.replace(relimited.find("requests_per_unit: 10"), 21, "requests_per_unit: 11");
  const auto third = build(relimited, second.get());
  EXPECT_NE(match(*third, {{"remote_address", "10.0.0.1"}}).rule->limiter, m1.rule->limiter);
}

TEST(Wildcard, Matching) {
  EXPECT_TRUE(wildcard_match("/api/*/action", "/api/v1/action"));
  EXPECT_TRUE(wildcard_match("/api/*/action", "/api//action"));
  EXPECT_FALSE(wildcard_match("/api/*/action", "/api/v1/actions"));
  EXPECT_TRUE(wildcard_match("*", ""));
  EXPECT_TRUE(wildcard_match("a*b*c", "a-b-b-c"));
  EXPECT_FALSE(wildcard_match("a*b*c", "a-b-b-"));
  EXPECT_TRUE(wildcard_match("**x", "yyx"));
  // No exponential blow-up on hostile input.
  EXPECT_FALSE(wildcard_match("*a*a*a*a*a*a*a*a*a*b", std::string(10'000, 'a')));
}

class ReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-reload-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    // Write then rename, as config management tools do, so the poller never sees half a file.
    const auto tmp = dir_ / (name + ".tmp");
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, dir_ / name);
  }
  std::filesystem::path dir_;
};

TEST_F(ReloaderTest, KeepsTheLastGoodRulesAndCountsFailures) {
  int successes = 0;
  std::vector<std::string> failures;
  Reloader r(dir_.string(), BuildOptions{},
             {.on_success = [&](const RuleSet&) { ++successes; },
              .on_failure = [&](const std::vector<ConfigError>& e) { failures.push_back(e[0].to_string()); }});
  write("edge.yaml", kEdge);
  ASSERT_TRUE(r.load_now().empty());
  const auto good = r.current();
  ASSERT_NE(good->domain("edge"), nullptr);
  EXPECT_FALSE(r.poll_once());  // nothing changed

  write("edge.yaml", "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: never, requests_per_unit: 1}\n");
  EXPECT_TRUE(r.poll_once());
  EXPECT_EQ(r.current(), good);  // the broken file did not replace the good rules
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("edge.yaml:4:24: descriptors[0] (a).rate_limit.unit: 'never' is not a unit"),
            std::string::npos)
      << failures[0];
  EXPECT_FALSE(r.poll_once());  // the same broken file is not retried

  write("other.yaml", "domain: other\ndescriptors: []\n");
  write("edge.yaml", kEdge);
  EXPECT_TRUE(r.poll_once());
  EXPECT_NE(r.current(), good);
  EXPECT_NE(r.current()->domain("other"), nullptr);
  EXPECT_EQ(r.current()->version(), r.current()->version());
  EXPECT_EQ(successes, 2);

  // A domain in two files is an error, and the rules stay as they were.
  write("dup.yaml", "domain: other\ndescriptors: []\n");
  EXPECT_TRUE(r.poll_once());
  EXPECT_EQ(r.current()->domain("other")->file, (dir_ / "other.yaml").string());
  EXPECT_NE(failures.back().find("domain 'other' is already defined in"), std::string::npos);

  // Deleting the rules keeps them too.
  std::filesystem::remove_all(dir_);
  EXPECT_TRUE(r.poll_once());
  EXPECT_NE(r.current()->domain("edge"), nullptr);
}

TEST_F(ReloaderTest, VersionChangesWithContent) {
  Reloader r(dir_.string(), BuildOptions{});
  write("edge.yaml", kEdge);
  ASSERT_TRUE(r.load_now().empty());
  const std::string v1 = r.current()->version();
  EXPECT_EQ(v1.size(), 16u);
  write("edge.yaml", std::string(kEdge) + "# a comment\n");
  ASSERT_TRUE(r.poll_once());
  EXPECT_NE(r.current()->version(), v1);
}

}  // namespace
}  // namespace rk::rules
