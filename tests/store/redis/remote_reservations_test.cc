// Reserve and settle in a real redis-server (lua/reservations.lua; docs/redis.md, "Reserve and settle"), each one
// script: for every algorithm, against rk::Limiter's reserve_at and settle_at at the same times (a settle for less
// refunds, one for more goes into debt), the settles that find nothing and change nothing, a refused reserve that
// charges nothing, a foreign value in a record's key, packed states and Redis's own clock. Random traces of them
// are tests/differential's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "library/random_id.h"
#include "ratekeeper/limiter.h"
#include "store/redis/algorithm_scripts.h"
#include "store/redis/remote.h"
#include "store/remote/remote_store.h"
#include "support/redis_process.h"

namespace rk::store::redis {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;
using remote::RemoteResult;
using remote::ReservationResult;

constexpr Nanos kT0{1'790'000'000'123'456'789};

LimitSpec spec_of(Algorithm a, bool count_refused = false) {
  LimitSpec s{.algorithm = a, .limit = 10, .window = 10s};
  if (a == Algorithm::kEarrrl) s.half_life = 5s;
  if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) s.burst = 9;
  if (a == Algorithm::kTokenBucket || a == Algorithm::kLeakyBucket) s.capacity = 10;
  s.count_refused = count_refused;
  return s;
}

ReservationResult reserve(remote::RemoteStore& store, const LimitSpec& spec, const std::string& key,
                          const std::string& id, std::uint64_t estimate, Nanos now, Nanos ttl = 60s) {
  std::promise<ReservationResult> p;
  store.reserve(&spec, key, id, estimate, ttl, now, [&p](ReservationResult r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

ReservationResult settle(remote::RemoteStore& store, const LimitSpec& spec, const std::string& key,
                         const std::string& id, std::uint64_t actual, Nanos now) {
  std::promise<ReservationResult> p;
  store.settle(&spec, key, id, actual, now, [&p](ReservationResult r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

RemoteResult decide(remote::RemoteStore& store, const LimitSpec& spec, const std::string& key, Nanos now,
                    std::uint64_t cost = 1, bool peek = false) {
  std::promise<std::vector<RemoteResult>> p;
  store.decide({{&spec, key, cost, peek}}, now, [&p](std::vector<RemoteResult> r) { p.set_value(std::move(r)); });
  return p.get_future().get().at(0);
}

// Every field as the memory store's: exactly, but for earrrl's doubles (an exp of times the script keeps relative
// to the key's last write: tests/differential's tolerance) and its waits, ceil(log(x) / lambda).
void expect_same(const Decision& memory, const Decision& redis, Algorithm a, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(memory.allowed, redis.allowed);
  EXPECT_EQ(memory.limit, redis.limit);
  EXPECT_EQ(memory.delay, redis.delay);
  if (a != Algorithm::kEarrrl) {
    EXPECT_EQ(memory.remaining, redis.remaining);
    EXPECT_EQ(memory.retry_after, redis.retry_after);
    EXPECT_EQ(memory.reset_after, redis.reset_after);
    return;
  }
  EXPECT_NEAR(memory.remaining, redis.remaining, 1e-9 * std::max(1.0, memory.remaining));
  EXPECT_LE(std::abs((memory.retry_after - redis.retry_after).count()), 1000);
  EXPECT_LE(std::abs((memory.reset_after - redis.reset_after).count()), 1000);
}

class RemoteReservations : public ::testing::Test {
 protected:
  std::shared_ptr<remote::RemoteStore> make_store(std::uint32_t packed = 0, bool caller_clock = true) {
    return make_redis_remote(
        {.url = redis_.url(), .caller_clock = caller_clock, .timeout = 5s, .packed_hashes = packed});
  }
  std::string get(const std::string& key) { return redis_test::redis_cli(redis_.port(), "GET '" + key + "'"); }

  // One trace through the memory store and Redis at once, each answer compared.
  struct Both {
    Limiter& memory;
    remote::RemoteStore& redis;
    const LimitSpec& spec;
    std::string key;
    std::string reserve(std::uint64_t estimate, Nanos at, Nanos ttl = 60s) {
      const Reservation m = memory.reserve_at(key, at, estimate, ttl);
      const std::string id = m.id.empty() ? library::random_id() : m.id;
      const ReservationResult r = redis_reserve(id, estimate, at, ttl);
      EXPECT_EQ(r.status, RemoteResult::Status::kOk) << r.error;
      EXPECT_EQ(r.done, !m.id.empty());
      expect_same(m.decision, r.decision, spec.algorithm, "reserve " + std::to_string(estimate));
      return m.id.empty() ? std::string() : id;
    }
    ReservationResult redis_reserve(const std::string& id, std::uint64_t estimate, Nanos at, Nanos ttl) {
      return store::redis::reserve(redis, spec, key, id, estimate, at, ttl);
    }
    void settle(const std::string& id, std::uint64_t actual, Nanos at, bool settled = true) {
      const Settlement m = memory.settle_at(key, id, at, actual);
      const ReservationResult r = store::redis::settle(redis, spec, key, id, actual, at);
      EXPECT_EQ(r.status, RemoteResult::Status::kOk) << r.error;
      EXPECT_EQ(m.settled, settled);
      EXPECT_EQ(r.done, m.settled) << "settle " << actual;
      EXPECT_EQ(r.reserved, m.reserved);
      if (m.settled) expect_same(m.decision, r.decision, spec.algorithm, "settle " + std::to_string(actual));
    }
    Decision check(std::uint64_t cost, Nanos at, bool peek = false) {
      const Decision m = peek ? memory.peek_at(key, at, cost) : memory.check_at(key, at, cost);
      const RemoteResult r = decide(redis, spec, key, at, cost, peek);
      EXPECT_EQ(r.status, RemoteResult::Status::kOk) << r.error;
      expect_same(m, r.decision, spec.algorithm, (peek ? "peek " : "check ") + std::to_string(cost));
      return m;
    }
  };

  // Refunds, overdraws, and what finds nothing, for one algorithm on `redis`.
  void trace(remote::RemoteStore& redis, Algorithm a, const std::string& prefix) {
    SCOPED_TRACE(std::string(algorithm_name(a)) + " " + prefix);
    const LimitSpec spec = spec_of(a);
    Limiter memory(spec);
    Both k{memory, redis, spec, prefix + std::string(algorithm_name(a))};
    Both other{memory, redis, spec, k.key + ":other"};

    // A settle for less gives back: the next check sees it.
    std::string id = k.reserve(8, kT0);
    ASSERT_FALSE(id.empty());
    EXPECT_FALSE(k.check(5, kT0 + 1ms).allowed);
    k.settle(id, 2, kT0 + 2ms);
    EXPECT_TRUE(k.check(5, kT0 + 3ms).allowed);
    k.check(1, kT0 + 3ms, true);

    // Equal: nothing given back, nothing charged.
    id = k.reserve(1, kT0 + 4ms);
    k.settle(id, 1, kT0 + 5ms);

    // What finds nothing changes nothing: an unknown id, another key's, one settled already, one expired.
    k.settle(library::random_id(), 0, kT0 + 6ms, false);
    k.settle("not an id", 0, kT0 + 6ms, false);
    const std::string others = other.reserve(1, kT0 + 6ms);
    k.settle(others, 0, kT0 + 7ms, false);
    other.settle(others, 0, kT0 + 7ms);  // still its own key's
    k.settle(id, 0, kT0 + 7ms, false);   // settled already
    const std::string short_lived = k.reserve(1, kT0 + 8ms, 5s);
    k.check(1, kT0 + 9ms, true);
    k.settle(short_lived, 0, kT0 + 8ms + 5s, false);  // at its ttl: expired, charged as reserved
    k.check(1, kT0 + 8ms + 5s, true);

    // A settle for more goes into debt, refused when it overdrew, and the checks after it are refused as long as
    // in memory.
    const Nanos later = kT0 + 1h;
    id = k.reserve(4, later);
    k.settle(id, 30, later + 1ms);
    for (Nanos t = later + 2ms; t < later + 40s; t += 2500ms) k.check(1, t);

    // A refused reserve charges nothing (count_refused or not).
    const Nanos full = kT0 + 3h;
    ASSERT_FALSE(k.reserve(10, full).empty());
    const Decision before = k.check(1, full + 1ms, true);
    EXPECT_TRUE(k.reserve(5, full + 2ms).empty());
    const Decision after = k.check(1, full + 1ms, true);
    expect_same(before, after, a, "unchanged by a refused reserve");
  }

  RedisProcess redis_;
};

TEST_F(RemoteReservations, EveryAlgorithmRefundsAndOverdrawsAsInMemory) {
  auto s = make_store();
  for (Algorithm a : kAllAlgorithms) trace(*s, a, "rk:res:");
}

TEST_F(RemoteReservations, PackedStatesReserveAndSettleAsInMemory) {
  auto s = make_store(1);
  for (Algorithm a : kAllAlgorithms) trace(*s, a, "rk:packed:");
  // The record is in the state's slot: the hash's tag.
  const std::vector<std::string> keys = redis_keys("rk:x", 1);
  const std::string rec = reservation_key("rk:x", std::string(32, 'a'), 1);
  EXPECT_EQ(rec, "rk:r{0}x:" + std::string(32, 'a'));
  EXPECT_EQ(keys[0], "rk:{0}");
}

TEST_F(RemoteReservations, ARefusedReserveChargesNothingEvenWithCountRefused) {
  auto s = make_store();
  for (Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(algorithm_name(a));
    const LimitSpec spec = spec_of(a, true);
    Limiter memory(spec);
    Both k{memory, *s, spec, "rk:counted:" + std::string(algorithm_name(a))};
    ASSERT_FALSE(k.reserve(10, kT0).empty());
    const Decision before = k.check(1, kT0 + 1ms, true);
    EXPECT_TRUE(k.reserve(7, kT0 + 1ms).empty());
    expect_same(before, k.check(1, kT0 + 1ms, true), a, "unchanged");
    // Its overdraw counts as count_refused does: bounded.
    const Nanos later = kT0 + 2h;
    const std::string id = k.reserve(0, later);
    ASSERT_FALSE(id.empty());
    k.settle(id, 1000, later + 1ms);
    for (Nanos t = later + 2ms; t < later + 40s; t += 3s) k.check(1, t);
  }
}

TEST_F(RemoteReservations, TheRecordIsTheKeysAndIdsInTheStatesSlot) {
  const std::string id(32, 'b');
  const std::string state = redis_key("rk:abc:4:user");
  const std::string rec = reservation_key("rk:abc:4:user", id, 0);
  EXPECT_EQ(rec, "rk:r" + state.substr(3) + ":" + id);
  EXPECT_NE(rec, reservation_key("rk:abc:4:usex", id, 0));
  EXPECT_NE(rec, reservation_key("rk:abc:4:user", std::string(32, 'c'), 0));
  EXPECT_EQ(reservation_key("other", id, 0), "r" + redis_key("other") + ":" + id);

  // Its value: the tag, the estimate, the reserve's time exact (µs and ns), reset_after and the ttl; PX the ttl.
  auto s = make_store();
  const LimitSpec spec = spec_of(Algorithm::kGcra);
  const ReservationResult r = reserve(*s, spec, "rk:abc:4:user", id, 3, kT0, 2500ms);
  ASSERT_TRUE(r.done) << r.error;
  const std::string ttl = redis_test::redis_cli(redis_.port(), "PTTL '" + rec + "'");
  EXPECT_GT(std::stol(ttl), 2000);
  EXPECT_LE(std::stol(ttl), 2500);
  EXPECT_EQ(redis_test::redis_cli(redis_.port(), "STRLEN '" + rec + "'"), "34");
}

TEST_F(RemoteReservations, AForeignValueInTheRecordIsAnErrorThatChangesNothing) {
  auto s = make_store();
  const LimitSpec spec = spec_of(Algorithm::kFixedWindow);
  const std::string key = "rk:foreign", id = library::random_id();
  ASSERT_TRUE(reserve(*s, spec, key, id, 4, kT0).done);
  const std::string rec = reservation_key(key, id, 0);
  redis_test::redis_cli(redis_.port(), "SET '" + rec + "' hello");
  const Decision before = decide(*s, spec, key, kT0 + 1ms, 1, true).decision;

  const ReservationResult r = settle(*s, spec, key, id, 0, kT0 + 2ms);
  EXPECT_EQ(r.status, RemoteResult::Status::kError);
  EXPECT_NE(r.error.find(rec), std::string::npos) << r.error;
  EXPECT_FALSE(r.done);
  EXPECT_EQ(get(rec), "hello");
  EXPECT_EQ(decide(*s, spec, key, kT0 + 1ms, 1, true).decision.remaining, before.remaining);

  // A reserve whose record's key holds something: refused as an error, nothing charged.
  const ReservationResult again = reserve(*s, spec, key, id, 4, kT0 + 3ms);
  EXPECT_EQ(again.status, RemoteResult::Status::kError);
  EXPECT_NE(again.error.find(rec), std::string::npos) << again.error;
  EXPECT_EQ(decide(*s, spec, key, kT0 + 1ms, 1, true).decision.remaining, before.remaining);

  // A foreign state under a good record: an error too, and the record stays for a later settle.
  const std::string key2 = "rk:foreign2", id2 = library::random_id();
  ASSERT_TRUE(reserve(*s, spec, key2, id2, 4, kT0).done);
  const std::string state = redis_key(key2);
  redis_test::redis_cli(redis_.port(), "SET '" + state + "' hello");
  EXPECT_EQ(settle(*s, spec, key2, id2, 0, kT0 + 1ms).status, RemoteResult::Status::kError);
  EXPECT_EQ(redis_test::redis_cli(redis_.port(), "EXISTS '" + reservation_key(key2, id2, 0) + "'"), "1");
}

TEST_F(RemoteReservations, BadArgumentsAreRefusedBeforeRedis) {
  auto s = make_store();
  const LimitSpec spec = spec_of(Algorithm::kGcra);
  EXPECT_EQ(reserve(*s, spec, "rk:bad", "short", 1, kT0).status, RemoteResult::Status::kError);
  EXPECT_EQ(reserve(*s, spec, "rk:bad", library::random_id(), kMaxReservationAmount + 1, kT0).status,
            RemoteResult::Status::kError);
  EXPECT_EQ(reserve(*s, spec, "rk:bad", library::random_id(), 1, kT0, 0s).status, RemoteResult::Status::kError);
  EXPECT_EQ(settle(*s, spec, "rk:bad", library::random_id(), kMaxReservationAmount + 1, kT0).status,
            RemoteResult::Status::kError);
  EXPECT_EQ(redis_test::redis_cli(redis_.port(), "DBSIZE"), "0");
}

TEST_F(RemoteReservations, TheScriptRefusesBadArgumentsWithAnErrorReply) {
  // What C++ validates, the script checks again: loaded as it is and called by hand.
  const std::string file = ::testing::TempDir() + "rk-reservations.lua";
  std::ofstream(file) << reservation_script_for(Algorithm::kGcra).source;
  const std::string sha = redis_test::redis_cli(redis_.port(), "-x SCRIPT LOAD < " + file);
  std::remove(file.c_str());
  ASSERT_EQ(sha.size(), 40u) << sha;
  const std::string params = " 1000000 10000000 10 0 0";  // gcra's: interval, tolerance, limit, queue, backlog
  auto call = [&](const std::string& rest) {
    return redis_test::redis_cli(redis_.port(), "EVALSHA " + sha + " " + rest);
  };
  EXPECT_NE(call("1 rk:a 1 0 1 r" + params + " 1000000").find("bad arguments: 1 keys"), std::string::npos);
  EXPECT_NE(call("2 rk:a rk:r 1 0 1 x" + params + " 1000000").find("bad arguments: mode=x"), std::string::npos);
  EXPECT_NE(call("2 rk:a rk:r 1 0 1 r" + params + " soon").find("bad arguments: ttl=soon"), std::string::npos);
  EXPECT_NE(call("2 rk:a rk:r 1 0 1 s" + params + params + " 7").find("bad arguments: 15 arguments"),
            std::string::npos);
  EXPECT_NE(call("2 rk:a rk:r 1 0 -1 s" + params + params).find("bad arguments: actual=-1"), std::string::npos);
  EXPECT_NE(call("2 rk:a rk:r 1 0 x r" + params + " 1000000").find("bad arguments"), std::string::npos);
  EXPECT_EQ(redis_test::redis_cli(redis_.port(), "DBSIZE"), "0");
  // Well formed, it reserves.
  EXPECT_EQ(call("2 rk:a rk:r 1 0 1 r" + params + " 10000000000").substr(0, 1), "1");
  EXPECT_EQ(redis_test::redis_cli(redis_.port(), "EXISTS rk:r"), "1");
}

TEST_F(RemoteReservations, TheNearCacheNeverAnswersAReserveAndForgetsAKeyARefundFrees) {
  auto s = make_redis_remote({.url = redis_.url(), .caller_clock = true, .timeout = 5s, .near_cache = true});
  const LimitSpec spec = spec_of(Algorithm::kFixedWindow);
  const std::string key = "rk:near", id = library::random_id();
  ASSERT_TRUE(reserve(*s, spec, key, id, 10, kT0).done);
  EXPECT_FALSE(decide(*s, spec, key, kT0 + 1ms).decision.allowed);  // refused by Redis until the window's end: learnt
  auto calls = [&] {
    long n = 0;
    for (const char* c : {"fcall", "evalsha", "eval"}) n += redis_test::command_calls(redis_.port(), c);
    return n;
  };
  const long before = calls();
  EXPECT_FALSE(decide(*s, spec, key, kT0 + 2ms).decision.allowed);  // refused here
  EXPECT_EQ(calls(), before);
  // A reserve is Redis's answer: refused there too, and nothing held.
  EXPECT_FALSE(reserve(*s, spec, key, library::random_id(), 1, kT0 + 3ms).done);
  const ReservationResult r = settle(*s, spec, key, id, 4, kT0 + 4ms);
  ASSERT_TRUE(r.done) << r.error;
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_TRUE(decide(*s, spec, key, kT0 + 5ms).decision.allowed);  // the refund seen at once
}

TEST_F(RemoteReservations, ByRedissOwnClock) {
  auto s = make_store(0, false);
  const LimitSpec spec = spec_of(Algorithm::kTokenBucket);
  const Nanos ignored{1};  // the caller's time, unused
  const std::string id = library::random_id();
  ReservationResult r = reserve(*s, spec, "rk:clock", id, 6, ignored);
  ASSERT_TRUE(r.done) << r.error;
  EXPECT_EQ(r.decision.remaining, 4);
  r = settle(*s, spec, "rk:clock", id, 1, ignored);
  ASSERT_TRUE(r.done) << r.error;
  EXPECT_EQ(r.reserved, 6u);
  EXPECT_EQ(r.decision.remaining, 9);  // 5 of the 6 given back (and what drained meanwhile is below one)
  // A short ttl passes on Redis's clock.
  const std::string brief = library::random_id();
  ASSERT_TRUE(reserve(*s, spec, "rk:clock", brief, 1, ignored, 5ms).done);
  std::this_thread::sleep_for(30ms);
  r = settle(*s, spec, "rk:clock", brief, 0, ignored);
  EXPECT_EQ(r.status, RemoteResult::Status::kOk);
  EXPECT_FALSE(r.done);
  // The overdraw.
  const std::string more = library::random_id();
  ASSERT_TRUE(reserve(*s, spec, "rk:clock", more, 1, ignored).done);
  r = settle(*s, spec, "rk:clock", more, 40, ignored);
  ASSERT_TRUE(r.done);
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_FALSE(decide(*s, spec, "rk:clock", ignored).decision.allowed);
}

}  // namespace
}  // namespace rk::store::redis
