// Hostile keys through `sharing: batched` (service/batcher.h), against a real redis-server: keys a client computed to
// collide under an unseeded hash, and floods of distinct keys. A lookup's cost is counted (the comparisons along a
// key's bucket chain, Batcher::probe_stats), never timed; memory is the keys held, bounded by max_keys.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <string>
#include <unordered_map>
#include <vector>

#include "redis_process.h"
#include "service/batcher.h"
#include "store/redis/shared_counters.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

constexpr std::size_t kAttackKeys = 1000;

LimitSpec fixed() { return LimitSpec{.algorithm = Algorithm::kFixedWindow, .limit = 5, .window = Nanos{1h}}; }

std::unique_ptr<Batcher> batcher(int port, std::size_t max_keys) {
  return std::make_unique<Batcher>(
      redis::make_redis_shared_counters({.url = "redis://127.0.0.1:" + std::to_string(port)}),
      std::make_shared<SystemClock>(), BatcherOptions{.max_keys = max_keys, .start_thread = false});
}

Decision decide(Batcher& b, const std::string& key) {
  std::promise<Decision> p;
  b.decide(fixed(), key, 1, false, SystemClock().now(), [&p](Decision d) { p.set_value(d); });
  return p.get_future().get();
}

// The bucket count a std::unordered_map reaches holding `n` keys (its growth policy, whatever the hash).
std::size_t buckets_for(std::size_t n) {
  std::unordered_map<std::string, int> m;
  for (std::size_t i = 0; i < n; ++i) m.emplace(std::to_string(i), 0);
  return m.bucket_count();
}

// What an attacker computes offline against a map hashed by std::hash (its seed is fixed and public): keys whose
// hash falls in bucket 0 of a map holding `count` keys, about one candidate in bucket_count.
std::vector<std::string> colliding_keys(std::size_t count) {
  const std::size_t buckets = buckets_for(count);
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; keys.size() < count; ++i) {
    std::string key = "rk:t:attacker-" + std::to_string(i);
    if (std::hash<std::string>{}(key) % buckets == 0) keys.push_back(std::move(key));
  }
  return keys;
}

// The attack is real: a map hashed by std::hash puts every one of the keys in one chain, so each lookup there walks
// up to all of them (what the batcher's maps did before they took the store's seeded hash).
TEST(BatcherHostileKeys, KeysCollidingUnderStdHashPileUpInAnUnseededMap) {
  const auto keys = colliding_keys(kAttackKeys);
  std::unordered_map<std::string, int> m;
  for (const auto& k : keys) m.emplace(k, 0);
  ASSERT_EQ(m.bucket_count(), buckets_for(kAttackKeys));
  EXPECT_EQ(m.bucket_size(m.bucket(keys.front())), kAttackKeys);
}

// The same keys through the batcher spread as any keys do: a lookup compares a key with about one other, whatever
// the client chose.
TEST(BatcherHostileKeys, KeysChosenToCollideKeepALookupFlat) {
  RedisProcess redis;
  const auto attack = colliding_keys(kAttackKeys);
  auto b = batcher(redis.port(), 4 * kAttackKeys);
  for (const auto& k : attack) decide(*b, k);
  const Batcher::ProbeStats st = b->probe_stats();
  ASSERT_EQ(st.keys, kAttackKeys);
  EXPECT_LE(st.longest, 10u);                        // a pile-up would be ~kAttackKeys / shards
  EXPECT_LE(st.total, 2 * kAttackKeys);              // about 1.5 comparisons a key on average, as for any keys
  EXPECT_EQ(b->stats().evicted.load(), 0u);
}

// A flood of distinct keys, each decided once (each waits for its own fetch): the keys held never pass max_keys,
// the older ones are evicted, and a lookup stays as cheap as in a table of benign keys.
TEST(BatcherHostileKeys, AFloodOfDistinctKeysStaysWithinMaxKeys) {
  RedisProcess redis;
  constexpr std::size_t kMaxKeys = 256, kFlood = 3000;
  auto b = batcher(redis.port(), kMaxKeys);
  ASSERT_GT(b->shard_count(), 1u);
  for (std::size_t i = 0; i < kFlood; ++i) {
    decide(*b, "rk:t:flood-" + std::to_string(i));
    ASSERT_LE(static_cast<std::size_t>(b->stats().keys.load()), kMaxKeys) << i;
  }
  EXPECT_GE(b->stats().evicted.load(), kFlood - kMaxKeys);
  const Batcher::ProbeStats st = b->probe_stats();
  EXPECT_LE(st.keys, kMaxKeys);
  EXPECT_LE(st.longest, 10u);
  EXPECT_LE(st.total, 2 * st.keys);
  b->flush();  // the evicted keys' hits go out; nothing is left waiting here
}

}  // namespace
}  // namespace rk::service
