// serve --state-file (cli/serve/state_file.h): states come back into the rules of the same identity with the
// time passed applied, and a file truncated at any byte, with any byte flipped, foreign, or of another version is
// refused whole (nothing restored). With a key, a file without the key's MAC is refused. On a real file, what is at
// the path is believed only if this user owns it and no one else may write it, and only up to what the stores can
// hold; whatever is refused is replaced at the next save. On a manual clock.
#include "cli/serve/state_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include "base/content_hash.h"
#include "base/crc32c.h"
#include "core/state_codec.h"
#include "rules/parse.h"

namespace rk::cli::serve {
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
    expect_refused_with_key(bytes, {}, why, what);
  }
  void expect_refused_with_key(std::string_view bytes, std::string_view key, std::string_view why,
                               const std::string& what) {
    const auto set = build(kRules);
    const auto result = restore_state_file(bytes, *set, all, key);
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

// A version-3 file without a MAC as the older version `v` wrote it: no MAC kind in the header.
std::string as_version(std::string v3, std::uint8_t v) {
  v3.erase(12, 4);
  v3[8] = static_cast<char>(v);
  return with_checksum(v3);
}

TEST_F(StateFileTest, RefusesOtherVersionsAndImpossibleStates) {
  std::string v4 = saved_file();
  v4[8] = 4;
  expect_refused(with_checksum(v4), "version 4, this ratekeeper reads versions 1 to 3", "version 4");
  std::string v0 = saved_file();
  v0[8] = 0;
  expect_refused(with_checksum(v0), "version 0, this ratekeeper reads versions 1 to 3", "version 0");
  std::string mac2 = saved_file();
  mac2[12] = 2;
  expect_refused(with_checksum(mac2), "of MAC kind 2, which is none known", "an unknown MAC kind");
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
  EXPECT_NE(write_file_atomically((dir / "missing" / "state").string(), "x").find("cannot create"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A version-2 file (before the MAC kind in the header) comes back whole; a version-1 file (before the sliding
// window's state took 16 bytes) comes back but for its sliding_window rules, whose 24-byte states mean nothing now:
// those start fresh and count as skipped.
TEST_F(StateFileTest, OlderVersionsComeBackAVersion1FileButItsSlidingWindowRules) {
  const std::string rules = std::string(kRules) + R"(
  - key: win
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window}
)";
  const auto saved = build(rules);
  for (int i = 0; i < 3; ++i) limiter(*saved, "ip").check("10.0.0.1");
  for (int i = 0; i < 2; ++i) limiter(*saved, "win").check("w");
  StateCounts counts;
  const std::string v3 = encode_state_file(*saved, all, clock->now(), counts);
  ASSERT_EQ(counts.rules, 5u);
  const std::string v2 = as_version(v3, 2);
  const std::string v1 = as_version(v3, 1);

  for (const std::string& whole : {v3, v2}) {
    const auto now = build(rules);
    ASSERT_TRUE(std::holds_alternative<StateCounts>(restore_state_file(whole, *now, all)));
    EXPECT_FALSE(limiter(*now, "win").check("w").allowed);
    EXPECT_FALSE(limiter(*now, "ip").check("10.0.0.1").allowed);
  }

  const auto now_v1 = build(rules);
  const auto result = restore_state_file(v1, *now_v1, all);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(result)) << std::get<std::string>(result);
  EXPECT_EQ(std::get<StateCounts>(result).rules, 4u);
  EXPECT_EQ(std::get<StateCounts>(result).skipped_rules, 1u);
  EXPECT_FALSE(limiter(*now_v1, "ip").check("10.0.0.1").allowed);
  EXPECT_TRUE(limiter(*now_v1, "win").check("w").allowed);
}

// --- A MAC under a key (--state-file-key-file): the CRC finds damage, only the MAC finds forgery.

const std::string kKey(32, 'k');

TEST_F(StateFileTest, WithAKeyOnlyAFileWithItsMacIsBelieved) {
  const auto set = build(kRules);
  for (int i = 0; i < 3; ++i) limiter(*set, "ip").check("10.0.0.1");
  StateCounts counts;
  const std::string keyed = encode_state_file(*set, all, clock->now(), counts, kKey);
  const std::string plain = saved_file();
  const auto back = build(kRules);
  ASSERT_TRUE(std::holds_alternative<StateCounts>(restore_state_file(keyed, *back, all, kKey)));
  EXPECT_FALSE(limiter(*back, "ip").check("10.0.0.1").allowed);

  // The attack: a file made by whoever could write it, its CRC recomputed, is taken when no key is set...
  ASSERT_TRUE(std::holds_alternative<StateCounts>(restore_state_file(plain, *build(kRules), all)));
  // ...and refused when one is, with a MAC of its own or none.
  expect_refused_with_key(plain, kKey, "without a MAC, and --state-file-key-file is set", "a file without a MAC");
  expect_refused_with_key(keyed, std::string(32, 'x'), "its MAC is not the one", "another key's file");
  std::string forged = keyed;
  const std::size_t ip = forged.find("10.0.0.1");
  ASSERT_NE(ip, std::string::npos);
  forged[ip + 7] = '2';  // 10.0.0.2's state now: the file's own CRC recomputed, its MAC kept
  forged.erase(forged.size() - 32);
  forged = with_checksum(forged) + keyed.substr(keyed.size() - 32);
  expect_refused_with_key(forged, kKey, "its MAC is not the one", "a forged key with its CRC recomputed");
  expect_refused(keyed, "with a MAC, and no --state-file-key-file is set to check it", "a MAC and no key");
  for (std::size_t at = 0; at < keyed.size(); ++at) {
    std::string damaged = keyed;
    damaged[at] = static_cast<char>(damaged[at] ^ (1 << (at % 8)));
    const auto fresh_set = build(kRules);
    ASSERT_TRUE(std::holds_alternative<std::string>(restore_state_file(damaged, *fresh_set, all, kKey))) << at;
    ASSERT_TRUE(fresh(*fresh_set)) << "byte " << at;
  }
}

// --- The saver on a real file, as `serve --state-file` runs it: what is found at the path is not believed blindly.

struct StateSaverTest : StateFileTest {
  std::filesystem::path dir;
  std::string path;
  std::unique_ptr<rules::Reloader> reloader;
  std::unique_ptr<StateSaver> saver;

  void SetUp() override {
    dir = std::filesystem::temp_directory_path() / ("rk_saver_" + std::to_string(::getpid()) + "_" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "edge.yaml") << kRules;
    load_rules();
    path = (dir / "state").string();
  }
  void TearDown() override {
    stop_quietly();
    reloader.reset();
    std::filesystem::remove_all(dir);
  }

  const rules::RuleSet& live() const { return *reloader->current(); }

  // A saver on `path` started as serve starts it (restoring first); returns what it logged.
  std::string start(std::shared_ptr<base::SecretFile> key = nullptr) {
    ::testing::internal::CaptureStderr();
    try {
      saver = std::make_unique<StateSaver>(path, *reloader, all, clock, std::chrono::hours(1), std::move(key));
    } catch (...) {
      ::testing::internal::GetCapturedStderr();
      throw;
    }
    return ::testing::internal::GetCapturedStderr();
  }
  void stop_quietly() {
    ::testing::internal::CaptureStderr();
    saver.reset();
    ::testing::internal::GetCapturedStderr();
  }
  // The rules loaded anew, every limiter fresh, as at a start.
  void load_rules() {
    reloader = std::make_unique<rules::Reloader>((dir / "edge.yaml").string(), rules::BuildOptions{.clock = clock});
    ASSERT_TRUE(reloader->load_now().empty());
  }
  // Stops the saver (its last save) and loads the rules anew, as a restart does; returns what the stop logged.
  std::string restart() {
    ::testing::internal::CaptureStderr();
    EXPECT_TRUE(saver->stop());
    saver.reset();
    load_rules();
    return ::testing::internal::GetCapturedStderr();
  }

  void plant(const std::string& bytes, mode_t mode) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }
};

// A sparse file of 1 TiB (no disk used) made the start allocate 1 TiB: std::bad_alloc, an abort, and the same at
// every restart. It is refused by its size before a byte is read, and the next save replaces it.
TEST_F(StateSaverTest, ASparseTerabyteFileIsRefusedUnreadAndStartsFresh) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ::close(fd);
  const auto started = std::chrono::steady_clock::now();
  std::string log;
  ASSERT_NO_THROW(log = start());
  // Reading it would take minutes whatever the machine; refusing it is one fstat.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  EXPECT_NE(log.find("state file ignored, starting fresh"), std::string::npos) << log;
  EXPECT_NE(log.find(path + " is 1099511627776 bytes or more, and the configured stores"), std::string::npos) << log;
  EXPECT_NE(log.find("refused unread"), std::string::npos) << log;
  EXPECT_TRUE(fresh(live()));
  restart();
  EXPECT_LT(std::filesystem::file_size(path), 4096u);
}

// The bound is what the stores can hold: a file the full stores write fits it; one byte more is refused unread.
TEST_F(StateSaverTest, TheSizeBoundIsWhatTheStoresCanHold) {
  const auto set = [&] {
    rules::DomainConfig d;
    EXPECT_TRUE(rules::parse_domain("edge.yaml", kRules, d).empty());
    std::vector<rules::DomainConfig> domains;
    domains.push_back(std::move(d));
    return rules::RuleSet::build(std::move(domains), nullptr,
                                 rules::BuildOptions{.store = {.max_keys = 20}, .clock = clock}, "small");
  }();
  for (int k = 0; k < 40; ++k) {
    const std::string key = std::string(60, 'k') + std::to_string(1000 + k);  // 64 bytes: the longest kept as is
    for (const auto& r : set->rules()) {
      for (int i = 0; i < 4; ++i) {
        r->limiter->check(key);
        clock->advance(1ms);  // a sliding log entry each, up to its limit
      }
    }
  }
  StateCounts counts;
  const std::string full = encode_state_file(*set, all, clock->now(), counts, kKey);
  const std::uint64_t bound = max_state_file_bytes(*set, all);
  EXPECT_GE(counts.keys, 4u * 10);  // the stores full, or nearly (each shard evicts on its own)
  EXPECT_LE(full.size(), bound);
  EXPECT_LT(bound, 300'000u);  // the stores' 80 keys and 4 rules' identities, not a general allowance
  std::string read;
  plant(std::string(bound, 'x'), 0600);
  EXPECT_EQ(read_state_file(path, bound, read), "");
  EXPECT_EQ(read.size(), bound);
  plant(std::string(bound + 1, 'x'), 0600);
  EXPECT_NE(read_state_file(path, bound, read).find("refused unread"), std::string::npos);
  EXPECT_TRUE(read.empty());
}

// A file another user owns, mode 0666, with a valid (recomputed) CRC: it was restored (one key locked out for good,
// another fresh), every later save failed to replace it where the directory did not allow it, and it came back at
// every restart. Now it is refused for its owner, and the next save replaces it with this user's own file, 0600.
TEST_F(StateSaverTest, AnotherUsersFileIsRefusedAndReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  plant(saved_file(), 0666);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);  // nobody
  const std::string log = start();
  EXPECT_NE(log.find("state file ignored, starting fresh"), std::string::npos) << log;
  EXPECT_NE(log.find(path + " belongs to uid 65534, not to this process's uid 0"), std::string::npos) << log;
  EXPECT_TRUE(fresh(live()));
  for (int i = 0; i < 3; ++i) limiter(live(), "ip").check("10.0.0.9");
  restart();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // What comes back is this server's own state, not the planted one.
  EXPECT_NE(start().find("state restored"), std::string::npos);
  EXPECT_FALSE(limiter(live(), "ip").peek("10.0.0.9").allowed);
  EXPECT_TRUE(limiter(live(), "ip").peek("10.0.0.1").allowed);
}

TEST_F(StateSaverTest, AFileOthersMayWriteIsRefusedOneTheyMayReadIsNot) {
  plant(saved_file(), 0666);
  std::string log = start();
  EXPECT_NE(log.find(path + " has mode 0666, which gives group or others 0022 beyond the 0644 a state file may "
                            "have; refused: whoever can write it can change the limits"),
            std::string::npos)
      << log;
  EXPECT_TRUE(fresh(live()));
  stop_quietly();
  plant(saved_file(), 0620);
  EXPECT_NE(start().find("whoever can write it"), std::string::npos);
  stop_quietly();
  plant(saved_file(), 0644);
  log = start();
  EXPECT_NE(log.find("state restored"), std::string::npos) << log;
  EXPECT_FALSE(limiter(live(), "ip").peek("10.0.0.1").allowed);
}

// A symbolic link at the path: the old code followed it and restored whatever it pointed at. It is refused, and the
// next save puts a file in the link's place: what it pointed at is never written.
TEST_F(StateSaverTest, ASymbolicLinkIsRefusedAndReplacedNotFollowed) {
  const std::string elsewhere = (dir / "elsewhere").string();
  const std::string planted = saved_file();
  std::ofstream(elsewhere, std::ios::binary) << planted;
  ASSERT_EQ(::chmod(elsewhere.c_str(), 0600), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), path.c_str()), 0);
  const std::string log = start();
  EXPECT_NE(log.find(path + " is a symbolic link; refused"), std::string::npos) << log;
  EXPECT_TRUE(fresh(live()));
  restart();
  EXPECT_FALSE(std::filesystem::is_symlink(path));
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
  std::ifstream in(elsewhere, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), planted);
}

// A FIFO at the path: opening it to read waited for a writer, and the start hung. Refused without waiting.
TEST_F(StateSaverTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string log = start();
  EXPECT_NE(log.find(path + " is not a regular file; refused"), std::string::npos) << log;
  restart();
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
}

// With --state-file-key-file: a file forged with a valid CRC is refused; the server's own keyed file comes back.
TEST_F(StateSaverTest, WithAKeyFileAForgedFileIsRefusedAndItsOwnRestores) {
  const std::string key_path = (dir / "key").string();
  std::ofstream(key_path) << kKey << "\n";
  const auto key = read_state_key(key_path);
  plant(saved_file(), 0600);  // a file as the server without a key wrote it: CRC right, no MAC
  std::string log = start(key);
  EXPECT_NE(log.find("without a MAC, and --state-file-key-file is set"), std::string::npos) << log;
  EXPECT_TRUE(fresh(live()));
  for (int i = 0; i < 3; ++i) limiter(live(), "ip").check("10.0.0.9");
  restart();
  log = start(key);
  EXPECT_NE(log.find("state restored"), std::string::npos) << log;
  EXPECT_FALSE(limiter(live(), "ip").peek("10.0.0.9").allowed);
  restart();
  std::ofstream(key_path) << std::string(40, 'z');  // rotated: the file's MAC is the old key's
  log = start(read_state_key(key_path));
  EXPECT_NE(log.find("its MAC is not the one --state-file-key-file's key gives"), std::string::npos) << log;
  EXPECT_TRUE(limiter(live(), "ip").peek("10.0.0.9").allowed);
  std::ofstream(key_path) << "short";
  try {
    read_state_key(key_path);
    ADD_FAILURE() << "a 5-byte key taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "--state-file-key-file: '" + key_path + "' is 5 bytes long; it must be at least 32 bytes");
  }
}

// In a directory with the sticky bit (/tmp), another user's file cannot be replaced: the save fails, and says why
// and what to do. (Run as `nobody` in a child, since root may replace anything.)
TEST_F(StateSaverTest, AFileThatCannotBeReplacedSaysWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);
  plant("planted", 0644);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    const std::string error = ::setresgid(65534, 65534, 65534) == 0 && ::setresuid(65534, 65534, 65534) == 0
                                  ? write_file_atomically(path, "ours")
                                  : "cannot become nobody";
    [[maybe_unused]] const ssize_t n = ::write(pipe_fds[1], error.data(), error.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string error;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) error.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_NE(error.find("Operation not permitted (" + path +
                       " belongs to uid 0, and in a directory with the sticky "
                       "bit, such as /tmp, only its owner may replace it"),
            std::string::npos)
      << error;
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "planted");
}

}  // namespace
}  // namespace rk::cli::serve
