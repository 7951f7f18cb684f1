// serve --state-file (server/serve/state_file.h): states come back into the rules of the same identity with the
// time passed applied, and a file truncated at any byte, with any byte flipped, foreign, or of another version is
// refused whole (nothing restored). On a manual clock.
#include "server/serve/state_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "base/content_hash.h"
#include "base/crc32c.h"
#include "core/state_codec.h"
#include "rules/parse.h"

namespace rk::serve {
namespace {

using namespace std::chrono_literals;

const char* kRules = R"(
domain: edge
descriptors:
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: earrrl, half_life: 10m}
  - key: api
    rate_limit: {unit: minute, requests_per_unit: 4, algorithm: sliding_log}
  - key: token
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra, burst: 1}
)";

struct StateFileTest : ::testing::Test {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});

  std::shared_ptr<const rules::RuleSet> build(const std::string& text) {
    rules::DomainConfig d;
    const auto errors = rules::parse_domain("edge.yaml", text, d);
    EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].to_string());
    std::vector<rules::DomainConfig> domains;
    domains.push_back(std::move(d));
    return rules::RuleSet::build(std::move(domains), nullptr, rules::BuildOptions{.clock = clock},
                                 base::content_hash(text));
  }

  static Limiter& limiter(const rules::RuleSet& set, std::string_view path) {
    for (const auto& r : set.rules()) {
      if (r->path == path) return *r->limiter;
    }
    throw std::runtime_error("no rule " + std::string(path));
  }

  static bool all(const rules::RuleSet&, const rules::Rule&) { return true; }

  // A set whose "ip" key 10.0.0.1 used its 3 a minute, "user" alice 2 an hour, "api" k 4 a minute, "token" t 2.
  std::string saved_file() {
    const auto set = build(kRules);
    for (int i = 0; i < 3; ++i) limiter(*set, "ip").check("10.0.0.1");
    for (int i = 0; i < 2; ++i) limiter(*set, "user").check("alice");
    for (int i = 0; i < 4; ++i) limiter(*set, "api").check("k");
    for (int i = 0; i < 2; ++i) limiter(*set, "token").check("t");
    limiter(*set, "ip").check("10.0.0.2");
    StateCounts counts;
    std::string bytes = encode_state_file(*set, all, clock->now(), counts);
    EXPECT_EQ(counts.rules, 4u);
    EXPECT_EQ(counts.keys, 5u);
    return bytes;
  }

  // Whether every key of saved_file() is fresh in `set`.
  static bool fresh(const rules::RuleSet& set) {
    return limiter(set, "ip").peek("10.0.0.1").allowed && limiter(set, "user").peek("alice").allowed &&
           limiter(set, "api").peek("k").allowed && limiter(set, "token").peek("t").allowed &&
           limiter(set, "ip").stats().keys == 0;
  }

  void expect_refused(std::string_view bytes, std::string_view why, const std::string& what) {
    const auto set = build(kRules);
    const auto result = restore_state_file(bytes, *set, all);
    ASSERT_TRUE(std::holds_alternative<std::string>(result)) << what;
    const std::string& error = std::get<std::string>(result);
    EXPECT_NE(error.find(why), std::string::npos) << what << ": " << error;
    EXPECT_TRUE(fresh(*set)) << what;
  }
};

TEST_F(StateFileTest, RestoresIntoTheSameIdentities) {
  const std::string bytes = saved_file();
  clock->advance(100ms);
  const auto set = build(kRules);
  const auto result = restore_state_file(bytes, *set, all);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(result)) << std::get<std::string>(result);
  EXPECT_EQ(std::get<StateCounts>(result).keys, 5u);
  EXPECT_EQ(std::get<StateCounts>(result).saved_at_ns, clock->now().count() - 100'000'000);
  EXPECT_FALSE(limiter(*set, "ip").check("10.0.0.1").allowed);
  EXPECT_TRUE(limiter(*set, "ip").check("10.0.0.2").allowed);
  EXPECT_FALSE(limiter(*set, "user").check("alice").allowed);
  EXPECT_FALSE(limiter(*set, "api").check("k").allowed);
  EXPECT_FALSE(limiter(*set, "token").check("t").allowed);
}

// The time between the save and the restore counts: each algorithm lets the key go as if it had been up all along.
TEST_F(StateFileTest, TimePassedMeanwhileCounts) {
  const std::string bytes = saved_file();
  const auto set = build(kRules);
  clock->advance(2h);  // the server was down: past every window, and twelve EARRRL half-lives
  ASSERT_TRUE(std::holds_alternative<StateCounts>(restore_state_file(bytes, *set, all)));
  EXPECT_EQ(limiter(*set, "ip").stats().keys, 2u);
  EXPECT_TRUE(limiter(*set, "ip").check("10.0.0.1").allowed);
  EXPECT_TRUE(limiter(*set, "user").check("alice").allowed);
  EXPECT_TRUE(limiter(*set, "api").check("k").allowed);
  EXPECT_TRUE(limiter(*set, "token").check("t").allowed);
}

TEST_F(StateFileTest, AChangedRuleStartsFresh) {
  const std::string bytes = saved_file();
  std::string changed = kRules;
  changed.replace(changed.find("requests_per_unit: 3"), 20, "requests_per_unit: 5");
  const auto set = build(changed);
  const auto result = restore_state_file(bytes, *set, all);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(result));
  EXPECT_EQ(std::get<StateCounts>(result).rules, 3u);
  EXPECT_EQ(std::get<StateCounts>(result).skipped_rules, 1u);
  EXPECT_EQ(limiter(*set, "ip").stats().keys, 0u);
  EXPECT_FALSE(limiter(*set, "user").check("alice").allowed);
}

TEST_F(StateFileTest, RulesNotKeptAreNeitherSavedNorRestored) {
  const auto only_ip = [](const rules::RuleSet&, const rules::Rule& r) { return r.path == "ip"; };
  const auto set = build(kRules);
  limiter(*set, "user").check("alice");
  StateCounts counts;
  const std::string bytes = encode_state_file(*set, only_ip, clock->now(), counts);
  EXPECT_EQ(counts.rules, 1u);
  const auto back = build(kRules);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(restore_state_file(saved_file(), *back, only_ip)));
  EXPECT_FALSE(limiter(*back, "ip").peek("10.0.0.1").allowed);
  EXPECT_TRUE(limiter(*back, "user").peek("alice").allowed);
}

TEST_F(StateFileTest, RefusesEveryTruncation) {
  const std::string bytes = saved_file();
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    const auto set = build(kRules);
    const auto result = restore_state_file(std::string_view(bytes).substr(0, cut), *set, all);
    ASSERT_TRUE(std::holds_alternative<std::string>(result)) << "cut at " << cut;
    ASSERT_TRUE(fresh(*set)) << "cut at " << cut;
  }
  expect_refused(std::string_view(bytes).substr(0, bytes.size() - 1), "checksum", "one byte short");
}

TEST_F(StateFileTest, RefusesEveryFlippedByte) {
  const std::string bytes = saved_file();
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ (1 << (at % 8)));
    const auto set = build(kRules);
    ASSERT_TRUE(std::holds_alternative<std::string>(restore_state_file(damaged, *set, all))) << "byte " << at;
    ASSERT_TRUE(fresh(*set)) << "byte " << at;
  }
}

TEST_F(StateFileTest, RefusesForeignFiles) {
  std::mt19937_64 rng(6);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  expect_refused(noise, "not a ratekeeper state file", "random bytes");
  expect_refused("", "not a ratekeeper state file", "empty");
  expect_refused("domain: edge\n", "not a ratekeeper state file", "a rules file");
  std::string other = saved_file();
  other[0] = 'R';
  expect_refused(other, "not a ratekeeper state file", "another magic");
}

// A file of another version, or one whose checksum is right but whose states are impossible (written by another
// program): refused before anything is restored, even the rules before the bad one.
std::string with_checksum(std::string body) {
  body.resize(body.size() - 4);
  core::put_u32(base::crc32c(body), body);
  return body;
}

TEST_F(StateFileTest, RefusesOtherVersionsAndImpossibleStates) {
  std::string v3 = saved_file();
  v3[8] = 3;
  expect_refused(with_checksum(v3), "version 3, this ratekeeper reads versions 1 to 2", "version 3");
  std::string v0 = saved_file();
  v0[8] = 0;
  expect_refused(with_checksum(v0), "version 0, this ratekeeper reads versions 1 to 2", "version 0");
  expect_refused(with_checksum(saved_file() + "xxxx"), "after the last rule", "trailing bytes");

  // The sliding log's entry count, 3 where 4 were logged at one time (merged into one entry): its one entry's
  // 16 bytes then read as three.
  std::string bad = saved_file();
  std::string log_state;
  core::SlidingLogState log;
  log.push(clock->now().count(), 4);
  core::encode_state<core::SlidingLog>(log, log_state);
  const std::size_t at = bad.find(log_state);
  ASSERT_NE(at, std::string::npos);
  bad[at] = 0;  // an empty log, with 16 bytes left over: the state's length no longer matches
  expect_refused(with_checksum(bad), "cannot have", "a state with bytes left over");
  std::string nan = saved_file();
  std::string earrrl_n;
  core::put_u64(0x7FF8000000000001ULL, earrrl_n);
  // Alice's EARRRL state follows her key: "alice", then the state's length (16), then n.
  const std::size_t alice = nan.find("alice");
  nan.replace(alice + 5 + 4, 8, earrrl_n);
  expect_refused(with_checksum(nan), "cannot have", "a NaN estimate");
}

TEST(StateFileWrite, ReplacesWholeAndLeavesNoTemporary) {
  const auto dir = std::filesystem::temp_directory_path() / ("rk_state_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "state").string();
  EXPECT_EQ(check_state_path(path), "");
  EXPECT_EQ(write_file_atomically(path, "first"), "");
  EXPECT_EQ(write_file_atomically(path, "second"), "");
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "second");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  EXPECT_EQ((std::filesystem::status(path).permissions() & std::filesystem::perms::others_read),
            std::filesystem::perms::none);
  EXPECT_NE(check_state_path((dir / "missing" / "state").string()).find("does not exist"), std::string::npos);
  EXPECT_NE(check_state_path(dir.string()).find("not a regular file"), std::string::npos);
  EXPECT_NE(write_file_atomically((dir / "missing" / "state").string(), "x").find("cannot create"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(base::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(base::crc32c(""), 0u);
  EXPECT_EQ(base::crc32c("56789", base::crc32c("1234")), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(base::crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
}

// A version-1 file (before the sliding window's state took 16 bytes) comes back but for its sliding_window rules,
// whose 24-byte states mean nothing now: those start fresh and count as skipped.
TEST_F(StateFileTest, AVersion1FileSkipsOnlyItsSlidingWindowRules) {
  const std::string rules = std::string(kRules) + R"(
  - key: win
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window}
)";
  const auto saved = build(rules);
  for (int i = 0; i < 3; ++i) limiter(*saved, "ip").check("10.0.0.1");
  for (int i = 0; i < 2; ++i) limiter(*saved, "win").check("w");
  StateCounts counts;
  const std::string v2 = encode_state_file(*saved, all, clock->now(), counts);
  ASSERT_EQ(counts.rules, 5u);
  std::string v1 = v2;
  v1[8] = 1;
  v1 = with_checksum(v1);

  const auto now_v2 = build(rules);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(restore_state_file(v2, *now_v2, all)));
  EXPECT_FALSE(limiter(*now_v2, "win").check("w").allowed);

  const auto now_v1 = build(rules);
  const auto result = restore_state_file(v1, *now_v1, all);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(result)) << std::get<std::string>(result);
  EXPECT_EQ(std::get<StateCounts>(result).rules, 4u);
  EXPECT_EQ(std::get<StateCounts>(result).skipped_rules, 1u);
  EXPECT_FALSE(limiter(*now_v1, "ip").check("10.0.0.1").allowed);
  EXPECT_TRUE(limiter(*now_v1, "win").check("w").allowed);
}

}  // namespace
}  // namespace rk::serve
