// Hostile keys through the batched store's key table (store/batched/key_table.h), against a real redis-server: keys a
// client computed to collide under an unseeded hash, and floods of distinct keys. A lookup's cost is counted (the
// comparisons along a key's bucket chain, Batcher::probe_stats), never timed; memory is the keys held, bounded by
// max_keys and by bytes. That the colliding keys are a real attack, and what a key is charged, are shown without
// Redis (key_table_test.cc).
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "colliding_keys.h"
#include "support/redis_process.h"
#include "store/batched/batcher.h"
#include "store/redis/shared_counters.h"

namespace rk::store::batched {
namespace {

using namespace std::chrono_literals;
using attack::colliding_keys;
using attack::kAttackKeys;
using redis_test::RedisProcess;

LimitSpec fixed() { return LimitSpec{.algorithm = Algorithm::kFixedWindow, .limit = 5, .window = Nanos{1h}}; }

std::unique_ptr<Batcher> batcher(int port, std::size_t max_keys, std::size_t max_memory_bytes = 0) {
  return std::make_unique<Batcher>(
      store::redis::make_redis_shared_counters({.url = "redis://127.0.0.1:" + std::to_string(port)}),
      std::make_shared<SystemClock>(),
      BatcherOptions{.max_keys = max_keys, .max_memory_bytes = max_memory_bytes, .start_thread = false});
}

Decision decide(Batcher& b, const std::string& key, const LimitSpec& spec = fixed()) {
  std::promise<Decision> p;
  b.decide(spec, key, 1, false, SystemClock().now(), [&p](Decision d) { p.set_value(d); });
  return p.get_future().get();
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
  EXPECT_LE(st.longest, 10u);            // a pile-up would be ~kAttackKeys / shards
  EXPECT_LE(st.total, 2 * kAttackKeys);  // about 1.5 comparisons a key on average, as for any keys
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

// A flood of distinct keys as long as a descriptor allows (4 KB: with the default max_keys, a million of them held
// 4 GB, bounded by nothing but the count): with a budget in bytes the keys held, as key_bytes() counts them, stay
// within their 7/8 of it, so far fewer keys are kept than max_keys would allow; each is charged at least its text.
TEST(BatcherHostileKeys, AFloodOfLongKeysStaysWithinTheMemoryBudget) {
  RedisProcess redis;
  constexpr std::size_t kBudget = 1 << 20, kFlood = 1500;
  auto b = batcher(redis.port(), 1'000'000, kBudget);
  const std::string filler(4000, 'x');
  std::size_t most = 0;
  for (std::size_t i = 0; i < kFlood; ++i) {
    decide(*b, "rk:t:" + std::to_string(i) + filler);
    const auto bytes = static_cast<std::size_t>(b->stats().bytes.load());
    ASSERT_LE(bytes, kBudget / 8 * 7) << i;
    most = std::max(most, static_cast<std::size_t>(b->stats().keys.load()));
  }
  EXPECT_LE(most * filler.size(), kBudget);  // the text alone of the keys ever held at once fits the budget
  EXPECT_GE(most, kBudget / 8 * 7 / Batcher::key_bytes(fixed(), filler + "rk:t:1500") / 2);  // and it is used
  EXPECT_GE(b->stats().evicted.load(), kFlood - most);
  b->flush();  // the evicted keys' hits go out
  EXPECT_LE(static_cast<std::size_t>(b->stats().bytes.load()), kBudget / 8 * 7);
}

// A sliding log is charged its whole log at the limit, which it may grow to (key_table_test.cc): the budget then
// holds fewer keys.
TEST(BatcherHostileKeys, ABudgetHoldsFewerSlidingLogs) {
  const LimitSpec log{.algorithm = Algorithm::kSlidingLog, .limit = 1000, .window = Nanos{1h}};
  RedisProcess redis;
  constexpr std::size_t kBudget = 1 << 20;
  auto b = batcher(redis.port(), 1'000'000, kBudget);
  for (int i = 0; i < 200; ++i) decide(*b, "rk:log:" + std::to_string(i), log);
  EXPECT_LE(static_cast<std::size_t>(b->stats().keys.load()), kBudget / 8 * 7 / (1000 * 16));
  EXPECT_LE(static_cast<std::size_t>(b->stats().bytes.load()), kBudget / 8 * 7);
  b->flush();
}

}  // namespace
}  // namespace rk::store::batched
