// Packed states (--redis-packed-hashes; docs/redis.md, "Packed states") in a real redis-server: many keys' states
// in one hash, what a flood of keys chosen to share a hash can and cannot do, the hash's expiry, eviction of a whole
// hash under maxmemory, and resets. That packed and unpacked decide alike, step by step, is tests/differential's.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <map>
#include <set>
#include <string>

#include "support/redis_process.h"
#include "store/redis/resp.h"
#include "store/redis/remote.h"
#include "store/redis/algorithm_scripts.h"
#include "store/remote/remote_store.h"

namespace rk::store::redis {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

std::string cli(const RedisProcess& r, const std::string& args) { return redis_test::redis_cli(r.port(), args); }

long stat(const RedisProcess& r, const std::string& section, const std::string& field) {
  const std::string out = cli(r, "INFO " + section);
  const auto at = out.find(field);
  return at == std::string::npos ? 0 : std::stol(out.substr(at + field.size()));
}

// Decisions on many keys at once (one pipelined batch), at `now` by the caller's clock.
std::vector<store::remote::RemoteResult> decide(store::remote::RemoteStore& s, const LimitSpec& spec,
                                                const std::vector<std::string>& keys, Nanos now,
                                                std::uint64_t cost = 1) {
  std::vector<store::remote::RemoteOp> ops;
  for (const auto& k : keys) ops.push_back({&spec, k, cost, false});
  std::promise<std::vector<store::remote::RemoteResult>> p;
  auto f = p.get_future();
  s.decide(std::move(ops), now, [&p](std::vector<store::remote::RemoteResult> r) { p.set_value(std::move(r)); });
  return f.get();
}

std::vector<std::string> names(const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

const Nanos kNow{1'700'000'000'000'000'000};

// Sends `commands` at once on a connection of its own and gives their replies, in order (empty if the server did not
// answer them all within 10 s): for a MULTI that must run as written, which the store's client does not send.
std::vector<Reply> exchange(int port, const std::vector<std::vector<std::string>>& commands) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<Reply> replies;
  std::string out;
  for (const auto& c : commands) encode(out, c);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size())) {
    Parser parser;
    pollfd pfd{fd, POLLIN, 0};
    char buf[4096];
    while (replies.size() < commands.size() && !parser.failed() && ::poll(&pfd, 1, 10'000) == 1) {
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      while (auto r = parser.next()) replies.push_back(std::move(*r));
    }
  }
  ::close(fd);
  if (replies.size() != commands.size()) replies.clear();
  return replies;
}

TEST(RedisKeys, APackedKeysHashAndOwnKeyShareAHashTagAndLongNamesStayUnpacked) {
  EXPECT_EQ(redis_keys("rk:abc:4:user", 0), std::vector<std::string>{redis_key("rk:abc:4:user")});
  const auto k = redis_keys("rk:abc:4:user", 1);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0], "rk:{0}");
  EXPECT_EQ(k[1], "rk:{0}abc:4:user");  // the hash's name, then the field: one hash tag, one Cluster slot
  std::set<std::string> hashes;
  for (int i = 0; i < 2000; ++i) hashes.insert(redis_keys("rk:k" + std::to_string(i), 16)[0]);
  EXPECT_EQ(hashes.size(), 16u);  // spread over all of them
  const std::string long_name = "rk:" + std::string(kPackedFieldBytes + 1, 'x');
  EXPECT_EQ(redis_keys(long_name, 16), std::vector<std::string>{redis_key(long_name)});
  EXPECT_EQ(redis_keys("rk:" + std::string(kPackedFieldBytes, 'x'), 16).size(), 2u);
  EXPECT_EQ(redis_keys("abc:4:user", 16), std::vector<std::string>{redis_key("abc:4:user")});  // not the service's
  EXPECT_THROW(make_redis_remote({.url = "redis://127.0.0.1:1", .packed_hashes = kMaxPackedHashes + 1}),
               std::invalid_argument);
}

// An attacker who knows the hash function (it is not secret: every server of a fleet must agree) sends keys that
// all land in one hash. The hash stops at kPackedFields fields, the rest get keys of their own, every key is still
// limited exactly, and a decision's work stays bounded: the full hash is scanned once, not once per new key.
TEST(PackedStates, AFloodIntoOneHashIsBoundedAndEveryKeyStillLimited) {
  RedisProcess redis;
  auto store = make_redis_remote({.url = redis.url(), .caller_clock = true, .timeout = 5s, .packed_hashes = 1});
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 2, .window = 60s};
  const auto flood = names("rk:flood:", 500);
  for (int round = 0; round < 3; ++round) {
    const auto r = decide(*store, spec, flood, kNow);
    for (std::size_t i = 0; i < r.size(); ++i) {
      ASSERT_EQ(r[i].status, store::remote::RemoteResult::Status::kOk) << r[i].error;
      EXPECT_EQ(r[i].decision.allowed, round < 2) << flood[i] << " round " << round;
    }
  }
  const long fields = std::stol(cli(redis, "HLEN 'rk:{0}'"));
  EXPECT_LE(fields, kPackedFields + 1);  // + 1: the note of when a scan is next worth it
  EXPECT_GE(fields, kPackedFields);
  EXPECT_EQ(std::stol(cli(redis, "DBSIZE")), 1 + 500 - (kPackedFields));  // the hash, and the others' own keys
  EXPECT_EQ(cli(redis, "OBJECT ENCODING 'rk:{0}'"), "listpack");          // small, and a lookup in it is short
  // 1,500 decisions: one scan of the full hash (the first key that found it full), then none while its fields live.
  EXPECT_EQ(stat(redis, "commandstats", "cmdstat_hgetall:calls="), 1);

  // A minute on, every field has expired: the next new key's scan forgets them, and new keys fill the hash again.
  const Nanos later = kNow + 61s + 1s;
  const auto next = names("rk:next:", 10);
  for (const auto& d : decide(*store, spec, next, later)) EXPECT_TRUE(d.decision.allowed);
  EXPECT_EQ(stat(redis, "commandstats", "cmdstat_hgetall:calls="), 2);
  EXPECT_EQ(cli(redis, "HEXISTS 'rk:{0}' next:9"), "1");
  EXPECT_EQ(cli(redis, "HEXISTS 'rk:{0}' flood:0"), "0");
  // A flooded key with its own key is still read from there, wherever its state lives.
  EXPECT_EQ(cli(redis, "EXISTS 'rk:{0}flood:499'"), "1");
  const auto again = decide(*store, spec, {"rk:flood:499", "rk:flood:0"}, kNow);
  EXPECT_FALSE(again[0].decision.allowed);
  EXPECT_TRUE(again[1].decision.allowed);  // its field was forgotten as expired by the later clock
  store->close();
}

// The hash lives as long as its longest-lived field: a short state written after a long one does not shorten it.
// A state back to a fresh key's leaves its hash; a reset removes a key's state wherever it is.
TEST(PackedStates, TheHashLivesAsLongAsItsLongestFieldAndResetsFindEveryState) {
  RedisProcess redis;
  auto store = make_redis_remote({.url = redis.url(), .caller_clock = true, .timeout = 5s, .packed_hashes = 1});
  const LimitSpec hour{.algorithm = Algorithm::kGcra, .limit = 1, .window = 3600s};
  const LimitSpec second{.algorithm = Algorithm::kGcra, .limit = 1, .window = 1s};
  ASSERT_TRUE(decide(*store, hour, {"rk:long"}, kNow)[0].decision.allowed);
  ASSERT_TRUE(decide(*store, second, {"rk:short"}, kNow)[0].decision.allowed);
  const long ttl = std::stol(cli(redis, "PTTL 'rk:{0}'"));
  EXPECT_GT(ttl, 3'500'000);
  EXPECT_LE(ttl, 3'600'001);  // the state's hour and the 1 ms prelude.lua adds to a hash's
  EXPECT_EQ(cli(redis, "HLEN 'rk:{0}'"), "2");
  // A cost-0 look at a state that is a fresh key's by now drops it, as unpacked drops its key.
  EXPECT_TRUE(decide(*store, second, {"rk:short"}, kNow + 2s, 0)[0].decision.allowed);
  EXPECT_EQ(cli(redis, "HEXISTS 'rk:{0}' short"), "0");

  // Reset: the field, or the own key (a sliding log too long for a field), whichever holds the state.
  const LimitSpec log{.algorithm = Algorithm::kSlidingLog, .limit = 10, .window = 60s};
  for (int i = 0; i < 5; ++i) decide(*store, log, {"rk:log"}, kNow + Nanos(i));  // 5 entries: 88 bytes
  EXPECT_EQ(cli(redis, "EXISTS 'rk:{0}log'"), "1");
  EXPECT_EQ(cli(redis, "HEXISTS 'rk:{0}' log"), "0");
  std::promise<std::vector<std::optional<bool>>> p;
  auto f = p.get_future();
  store->reset({"rk:long", "rk:log", "rk:none"}, [&p](std::vector<std::optional<bool>> r) { p.set_value(r); });
  EXPECT_EQ(f.get(), (std::vector<std::optional<bool>>{true, true, false}));
  EXPECT_TRUE(decide(*store, hour, {"rk:long"}, kNow)[0].decision.allowed);
  EXPECT_EQ(decide(*store, log, {"rk:log"}, kNow)[0].decision.remaining, 9);
  store->close();
}

// A state written to live px ms (its reset, in whole milliseconds) lives that long in its hash, by Redis's clock,
// from the millisecond its script ran. Redis 7.0's PEXPIRE reads the clock for its base and again to delete a key
// already expired: given px alone, a hash written with 1 ms was deleted at once, state and all, when the millisecond
// ticked in between (tests/differential met it as a leaky bucket read as fresh 0.2 ms after its write). TIME, the
// scripts and PEXPIRETIME run in one MULTI, so the scripts run in TIME's millisecond unless it ticks in the few
// microseconds between: each round checks the expiry against that millisecond, the new hash's and an existing one's.
TEST(PackedStates, AHashOutlivesItsStatesByRedisClockEvenAtOneMillisecond) {
  RedisProcess redis;
  const LimitSpec spec{.algorithm = Algorithm::kLeakyBucket, .limit = 2, .window = 1ms};
  const std::string source(script_for(spec.algorithm).source);
  auto eval = [&](const std::string& key) {
    std::vector<std::string> cmd{"EVAL", source, "2"};
    for (auto& k : redis_keys(key, 1)) cmd.push_back(std::move(k));
    for (auto& arg : script_args(spec, kNow, 1, false)) cmd.push_back(std::move(arg));
    return cmd;
  };
  for (int round = 0; round < 5; ++round) {
    const auto r = exchange(redis.port(), {{"MULTI"},
                                           {"DEL", "rk:{0}"},
                                           {"TIME"},
                                           eval("rk:a"),
                                           {"PEXPIRETIME", "rk:{0}"},
                                           eval("rk:b"),
                                           {"PEXPIRETIME", "rk:{0}"},
                                           {"EXEC"}});
    ASSERT_EQ(r.size(), 8u);
    const Reply& exec = r[7];
    ASSERT_EQ(exec.type, Reply::Type::kArray);
    ASSERT_EQ(exec.elements.size(), 6u);
    const auto& time = exec.elements[1].elements;
    ASSERT_EQ(time.size(), 2u);
    const std::int64_t ms = std::stoll(time[0].str) * 1000 + std::stoll(time[1].str) / 1000;
    for (int at : {2, 4}) {
      const Reply& state = exec.elements[static_cast<std::size_t>(at)];
      ASSERT_EQ(state.type, Reply::Type::kArray) << state.str;
      ASSERT_EQ(state.elements.at(3).integer, 500'000);  // reset_after: half a millisecond, so px 1
      EXPECT_GT(exec.elements[static_cast<std::size_t>(at) + 1].integer, ms + 1)
          << "round " << round << ": the hash expires when its state's 1 ms may not have passed";
    }
  }
}

// Under maxmemory with an LRU policy Redis evicts whole keys: packed, a hash, so every key in it starts afresh at
// once (each may be admitted up to its limit again), while the keys of the hashes kept are still limited.
TEST(PackedStates, EvictionForgetsAWholeHashAtOnce) {
  RedisProcess redis({"--maxmemory-policy", "allkeys-lru", "--maxmemory-samples", "10"});
  constexpr std::uint32_t kHashes = 256;
  auto store = make_redis_remote({.url = redis.url(), .caller_clock = true, .timeout = 5s, .packed_hashes = kHashes});
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 1, .window = 3600s};
  const auto keys = names("rk:evict:", 8000);
  for (const auto& d : decide(*store, spec, keys, kNow)) ASSERT_EQ(d.status, store::remote::RemoteResult::Status::kOk);
  // 150 kB less than Redis uses (of about 400 kB of states): it evicts at once, down to the bound, the least
  // recently used hashes.
  const long used = stat(redis, "memory", "used_memory:");
  ASSERT_EQ(cli(redis, "CONFIG SET maxmemory " + std::to_string(used - 150'000)), "OK");
  for (int i = 0; i < 200 && stat(redis, "stats", "evicted_keys:") < 10; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(stat(redis, "stats", "evicted_keys:"), 10);
  ASSERT_EQ(cli(redis, "CONFIG SET maxmemory 0"), "OK");
  std::map<std::string, std::pair<int, int>> by_hash;  // hash -> (admitted again, refused)
  const auto again = decide(*store, spec, keys, kNow);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto& [admitted, refused] = by_hash[redis_keys(keys[i], kHashes)[0]];
    (again[i].decision.allowed ? admitted : refused) += 1;
  }
  int forgotten = 0, kept = 0;
  for (const auto& [hash, n] : by_hash) {
    EXPECT_TRUE(n.first == 0 || n.second == 0) << hash << ": a hash is kept or forgotten whole";
    (n.second == 0 ? forgotten : kept) += 1;
  }
  EXPECT_GT(forgotten, 0);
  EXPECT_GT(kept, 0);
  store->close();
}

}  // namespace
}  // namespace rk::store::redis
