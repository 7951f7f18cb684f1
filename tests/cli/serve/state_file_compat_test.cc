// The state file as a compatibility promise (docs/upgrading.md): a file a released version wrote
// (tests/testdata/compat/state_file.v3, every algorithm's states after a known sequence on a fixed clock) is read
// by every later minor of its major with every key's state, and this build still writes the same content from
// the same decisions (keys in any order): a change of the format fails here. A minor may write a newer format only
// if it still reads this one: then keep this file and its read, and record the new version's beside it (a kFile of
// its own, written by RK_COMPAT_RECORD=1).
#include "cli/serve/state_file.h"

#include <gtest/gtest.h>

#include "base/content_hash.h"
#include "base/hex.h"
#include "core/state_codec.h"
#include "rules/parse.h"
#include "support/compat_data.h"

namespace rk::cli::serve {
namespace {

using namespace std::chrono_literals;

// One rule per algorithm whose states the file keeps; windows long enough that nothing expires between the save
// and the restore's checks.
const char* kRules = R"(
domain: compat
descriptors:
  - key: earrrl
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: earrrl, half_life: 10m}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: gcra, burst: 1}
  - key: token_bucket
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket, capacity: 3}
  - key: leaky_bucket
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: leaky_bucket}
  - key: leaky_queue
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: leaky_queue, burst: 2}
  - key: fixed_window
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: fixed_window}
  - key: sliding_log
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_log}
  - key: sliding_window
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_window}
)";
constexpr std::size_t kRulesCount = 8;
constexpr std::string_view kFile = "state_file.v3";

// The file's content in an order of its own: its header's fields, then each rule's identity with its keys and
// states sorted (a store's keys are saved in its table's order, which differs from one process to the next), as
// text; the CRC, which follows the order, left out. "" for a file this reading cannot follow to its end.
std::string canonical(std::string_view in) {
  std::uint32_t version = 0, mac = 0, rules = 0;
  std::uint64_t saved_at = 0;
  if (in.substr(0, 8) != std::string_view("rkstate\0", 8)) return "";
  in.remove_prefix(8);
  if (!core::get_u32(in, version) || !core::get_u32(in, mac) || !core::get_u64(in, saved_at) ||
      !core::get_u32(in, rules)) {
    return "";
  }
  std::string out = "version " + std::to_string(version) + " mac " + std::to_string(mac) + " saved_at " +
                    std::to_string(saved_at) + " rules " + std::to_string(rules) + "\n";
  auto text = [&in](std::string& v) {
    std::uint32_t n = 0;
    if (!core::get_u32(in, n) || n > in.size()) return false;
    v.clear();
    for (const char c : in.substr(0, n)) base::append_hex(v, static_cast<unsigned char>(c));
    in.remove_prefix(n);
    return true;
  };
  std::set<std::string> ruled;
  for (std::uint32_t r = 0; r < rules; ++r) {
    std::string identity, key, state;
    std::uint64_t keys = 0;
    if (!text(identity) || !core::get_u64(in, keys)) return "";
    std::set<std::string> states;
    for (std::uint64_t k = 0; k < keys; ++k) {
      if (!text(key) || !text(state)) return "";
      states.insert("  " + key + " " + state + "\n");
    }
    std::string lines = "rule " + identity + "\n";
    for (const std::string& l : states) lines += l;
    ruled.insert(lines);
  }
  if (in.size() != 4) return "";  // the CRC, and nothing after it
  for (const std::string& r : ruled) out += r;
  return out;
}

struct StateFileCompat : ::testing::Test {
  // 2023-11-14 22:13:20 UTC plus a little: inside an hour, not on its edge.
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000 + 60'000'000'000});

  std::shared_ptr<const rules::RuleSet> build() {
    rules::DomainConfig d;
    const auto errors = rules::parse_domain("compat.yaml", kRules, d);
    EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].to_string());
    std::vector<rules::DomainConfig> domains;
    domains.push_back(std::move(d));
    return rules::RuleSet::build(std::move(domains), nullptr, rules::BuildOptions{.clock = clock},
                                 base::content_hash(kRules));
  }

  static bool all(const rules::RuleSet&, const rules::Rule&) { return true; }

  // Every rule's key "full" charged until refused, 100 ms apart, and its key "one" charged once: then saved.
  std::string saved() {
    const auto set = build();
    EXPECT_EQ(set->rules().size(), kRulesCount);
    for (const auto& r : set->rules()) {
      for (int i = 0; i < 10 && r->limiter->check("full").allowed; ++i) clock->advance(100ms);
      r->limiter->check("one");
    }
    StateCounts counts;
    std::string bytes = encode_state_file(*set, all, clock->now(), counts);
    EXPECT_EQ(counts.rules, kRulesCount);
    EXPECT_EQ(counts.keys, 2 * kRulesCount);
    return bytes;
  }
};

TEST_F(StateFileCompat, TheHeaderAndFormatVersionAreThoseRecorded) {
  const std::string bytes = saved();
  ASSERT_GE(bytes.size(), 12u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("rkstate\0", 8));
  const auto version = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[8])) |
                       static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[9])) << 8 |
                       static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[10])) << 16 |
                       static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[11])) << 24;
  EXPECT_EQ(version, 3u) << "a new state file format: a minor must still read version 3 (docs/upgrading.md); record "
                            "the new version's file beside state_file.v3";
}

TEST_F(StateFileCompat, TheSameDecisionsWriteTheRecordedBytes) {
  const std::string bytes = saved();
  if (compat::recording()) return compat::record(std::string(kFile), bytes);
  const std::string now = canonical(bytes);
  ASSERT_FALSE(now.empty()) << "the file no longer reads as the format the header comment of state_file.h says";
  EXPECT_EQ(now, canonical(compat::read(std::string(kFile))))
      << "the state file written from the same decisions differs from " << kFile << ": the format, a rule's "
      << "identity or a state's layout changed (docs/upgrading.md)";
}

// What the released version saved comes back whole: every key of every rule, each as far used as it was.
TEST_F(StateFileCompat, TheRecordedFileIsReadWithEveryKey) {
  const std::string bytes = compat::read(std::string(kFile));
  ASSERT_FALSE(bytes.empty());
  saved();  // the clock where the recording left it
  const auto set = build();
  const auto result = restore_state_file(bytes, *set, all);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(result)) << std::get<std::string>(result);
  EXPECT_EQ(std::get<StateCounts>(result).rules, kRulesCount);
  EXPECT_EQ(std::get<StateCounts>(result).keys, 2 * kRulesCount);
  for (const auto& r : set->rules()) {
    EXPECT_FALSE(r->limiter->peek("full").allowed) << r->path << ": its full key came back fresh";
    EXPECT_TRUE(r->limiter->peek("fresh").allowed) << r->path;
    EXPECT_EQ(r->limiter->stats().keys, 2u) << r->path;
  }
}

}  // namespace
}  // namespace rk::cli::serve
