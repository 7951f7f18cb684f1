// store/batched/batcher.h against a real redis-server: servers (two batchers, each its own connections and id)
// converge on the fleet's count; a key joins from the snapshot; every algorithm shares; an attacker's many keys stay
// bounded. Batches are sent by flush(), on a manual clock: nothing here waits on the batch thread.
#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <thread>

#include "support/redis_process.h"
#include "store/batched/batcher.h"
#include "store/redis/remote.h"
#include "store/redis/shared_counters.h"

namespace rk::store::batched {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

constexpr Nanos kT0{1'000'000'000'000'000'000};

struct Fleet {
  explicit Fleet(int port, std::size_t max_keys = 1000) {
    for (int i = 0; i < 2; ++i) {
      servers.push_back(std::make_unique<Batcher>(
          store::redis::make_redis_shared_counters({.url = "redis://127.0.0.1:" + std::to_string(port)}), clock,
          BatcherOptions{.interval = 20ms, .max_keys = max_keys, .start_thread = false}));
    }
  }
  Decision decide(int server, const LimitSpec& spec, const std::string& key, std::uint64_t cost = 1,
                  bool peek = false) {
    std::promise<Decision> p;
    servers[server]->decide(spec, key, cost, peek, clock->now(), [&p](Decision d) { p.set_value(d); });
    return p.get_future().get();
  }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kT0);
  std::vector<std::unique_ptr<Batcher>> servers;
};

// Keys with counts in Redis.
std::size_t counted_keys(int port) {
  FILE* p = ::popen(("redis-cli -p " + std::to_string(port) + " --scan --pattern 'rk:{b:*c' | wc -l").c_str(), "r");
  std::size_t n = 0;
  if (p && std::fscanf(p, "%zu", &n) != 1) n = 0;
  if (p) ::pclose(p);
  return n;
}

LimitSpec fixed(double limit) {
  return LimitSpec{.algorithm = Algorithm::kFixedWindow, .limit = limit, .window = Nanos{1h}};
}

TEST(Batcher, ServersConvergeOnTheFleetsCount) {
  RedisProcess redis;
  Fleet f(redis.port());
  const LimitSpec spec = fixed(100);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(f.decide(0, spec, "rk:t:k").allowed);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(f.decide(1, spec, "rk:t:k").allowed);
  f.servers[0]->flush();
  f.servers[1]->flush();  // learns server 0's 5
  f.servers[0]->flush();  // learns server 1's 3
  EXPECT_EQ(f.decide(0, spec, "rk:t:k", 1, true).remaining, 100 - 9);
  EXPECT_EQ(f.decide(1, spec, "rk:t:k", 1, true).remaining, 100 - 9);
}

TEST(Batcher, AKeyJoinsFromTheSnapshotAndTheCountsPastIt) {
  RedisProcess redis;
  Fleet f(redis.port());
  const LimitSpec spec = fixed(60);
  for (int i = 0; i < 50; ++i) f.decide(0, spec, "rk:t:j");
  f.servers[0]->flush();  // the counts and a snapshot
  for (int i = 0; i < 4; ++i) f.decide(0, spec, "rk:t:j");
  f.servers[0]->flush();  // counts past the snapshot
  // Server 1's first decision waits for one fetch, then decides on the fleet's 54.
  EXPECT_EQ(f.decide(1, spec, "rk:t:j").remaining, 60 - 55);
  EXPECT_EQ(f.servers[1]->stats().fetches.load(), 1u);
}

// Concurrent first decisions on a key wait on one fetch, and every one of them is counted.
TEST(Batcher, FirstDecisionsShareOneFetch) {
  RedisProcess redis;
  Fleet f(redis.port());
  const LimitSpec spec = fixed(100);
  f.decide(0, spec, "rk:t:warm");  // the store is seen to answer
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { f.decide(0, spec, "rk:t:c"); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(f.servers[0]->stats().fetches.load(), 2u);  // "warm", then "c" once: later threads find it synced
  EXPECT_EQ(f.decide(0, spec, "rk:t:c", 1, true).remaining, 100 - 9);
}

// Each algorithm's hits, recorded on one server, refuse on the other once shared.
TEST(Batcher, EveryAlgorithmShares) {
  RedisProcess redis;
  Fleet f(redis.port());
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec spec{.algorithm = a, .limit = 10, .window = Nanos{1h}};
    if (a == Algorithm::kEarrrl) spec.half_life = Nanos{1h};
    const std::string key = "rk:t:" + std::string(algorithm_name(a));
    f.decide(1, spec, key, 1, true);                      // server 1 joins first
    for (int i = 0; i < 30; ++i) f.decide(0, spec, key);  // earrrl's estimate reaches 10 an hour at ~15
    f.servers[0]->flush();
    f.servers[1]->flush();
    EXPECT_FALSE(f.decide(1, spec, key).allowed) << algorithm_name(a);
  }
}

// A debit (count_refused) that overdraws on one server is owed on both once shared: server 1's look is refused
// too, where without the debt it would see the room the debit did not take.
TEST(Batcher, EveryAlgorithmSharesADebt) {
  RedisProcess redis;
  Fleet f(redis.port());
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec spec{.algorithm = a, .limit = 10, .window = Nanos{1h}, .count_refused = true};
    if (a == Algorithm::kEarrrl) spec.half_life = Nanos{1h};
    const std::string key = "rk:t:debt:" + std::string(algorithm_name(a));
    EXPECT_TRUE(f.decide(1, spec, key, 0).allowed) << algorithm_name(a);  // server 1 joins first: a look
    f.decide(0, spec, key, 0);
    f.decide(0, spec, key, 15);  // the debit, past the limit
    EXPECT_FALSE(f.decide(0, spec, key, 0).allowed) << algorithm_name(a);
    f.servers[0]->flush();
    f.servers[1]->flush();
    EXPECT_FALSE(f.decide(1, spec, key, 0).allowed) << algorithm_name(a);
  }
}

// An attacker's fresh keys, each decided once: the table keeps at most max_keys, the backlog of evicted keys' hits
// at most max_keys more, and Redis gets them all.
TEST(Batcher, ManyKeysStayBounded) {
  RedisProcess redis;
  Fleet f(redis.port(), 32);
  const LimitSpec spec = fixed(5);
  f.decide(0, spec, "rk:t:warm");  // the store is seen to answer; later keys still wait for their fetch
  for (int i = 0; i < 400; ++i) {
    f.decide(0, spec, "rk:t:a" + std::to_string(i));
    ASSERT_LE(f.servers[0]->stats().keys.load(), 32 + 16) << i;  // per shard: one over while a fetch is out
  }
  EXPECT_GT(f.servers[0]->stats().evicted.load(), 350u);
  f.servers[0]->flush();
  // Every key's hit reached Redis, evicted or not (the last backlog's replies are not waited for: poll).
  std::size_t keys = 0;
  for (int i = 0; i < 200 && keys < 401; ++i) {
    keys = counted_keys(redis.port());
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(keys, 401u);
}

}  // namespace
}  // namespace rk::store::batched
