// Limiter::check_many: the same decisions as one check_at per key in order, for every algorithm (random keys, some
// repeated within a batch, some long enough to be stored as digests; random costs; a store small enough to evict),
// and exact under threads.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ratekeeper/limiter.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec spec_for(Algorithm a) {
  LimitSpec s{.algorithm = a, .limit = 5, .window = Nanos{1s}};
  if (a == Algorithm::kEarrrl) s.half_life = Nanos{1s};
  if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) s.burst = 3;
  return s;
}

void expect_same(const Decision& many, const Decision& one, const std::string& where) {
  EXPECT_EQ(many.allowed, one.allowed) << where;
  EXPECT_EQ(many.limit, one.limit) << where;
  EXPECT_EQ(many.remaining, one.remaining) << where;
  EXPECT_EQ(many.retry_after, one.retry_after) << where;
  EXPECT_EQ(many.reset_after, one.reset_after) << where;
  EXPECT_EQ(many.delay, one.delay) << where;
  EXPECT_EQ(many.estimate, one.estimate) << where;
}

// Fields::kAllButResetAfter changes nothing but reset_after (0 where the check skips it; the same for the others),
// neither the answer nor the state left: a brief limiter and a full one, fed the same attempts, stay equal, one
// check at a time and in batches.
TEST(CheckMany, BriefChecksDifferOnlyInResetAfter) {
  for (Algorithm a : kAllAlgorithms) {
    Limiter brief(spec_for(a), {.hash_seed = 42}), full(spec_for(a), {.hash_seed = 42});
    std::mt19937_64 rng(18);
    std::int64_t now = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::string key = "key:" + std::to_string(rng() % 5);
      const std::uint64_t cost = rng() % 4;
      now += static_cast<std::int64_t>(rng() % 100'000'000) - (i % 50 == 0 ? 300'000'000 : 0);  // at times backwards
      const std::string where = std::string(algorithm_name(a)) + " attempt " + std::to_string(i);
      Decision one[1];
      Decision d;
      if (i % 2) {
        d = brief.check_at(key, Nanos{now}, cost, Fields::kAllButResetAfter);
      } else {
        const std::string_view keys[] = {key};
        const std::uint64_t costs[] = {cost};
        brief.check_many_at(keys, costs, Nanos{now}, one, Fields::kAllButResetAfter);
        d = one[0];
      }
      const Decision f = full.check_at(key, Nanos{now}, cost);
      // Those whose reset_after costs (a logarithm; a 128-bit division; a fluid level's few instructions) skip it
      // and leave it 0.
      if (a == Algorithm::kEarrrl || a == Algorithm::kSlidingWindow || a == Algorithm::kTokenBucket ||
          a == Algorithm::kLeakyBucket) {
        EXPECT_EQ(d.reset_after, Nanos{0}) << where;
        d.reset_after = f.reset_after;
      }
      expect_same(d, f, where);
    }
  }
}

TEST(CheckMany, DecidesAsSingleChecksInOrder) {
  for (Algorithm a : kAllAlgorithms) {
    // 200 keys in a store of 150: batches evict as single checks would (the same seed, the same CLOCK hand).
    const StoreOptions options{.max_keys = 150, .hash_seed = 42};
    Limiter batched(spec_for(a), options), single(spec_for(a), options);
    std::mt19937_64 rng(7);
    std::vector<std::string> pool;
    for (int i = 0; i < 200; ++i)
      pool.push_back(i % 10 == 0 ? std::string(70 + i % 3, 'k') + std::to_string(i) : "key:" + std::to_string(i));
    pool.push_back("");
    std::int64_t now = 0;
    for (int round = 0; round < 300; ++round) {
      const std::size_t n = 1 + rng() % 40;
      std::vector<std::string_view> keys;
      std::vector<std::uint64_t> costs;
      for (std::size_t i = 0; i < n; ++i) {
        keys.push_back(pool[rng() % (round % 2 ? 8 : pool.size())]);  // every other round: few keys, many repeats
        costs.push_back(rng() % 4);
      }
      now += static_cast<std::int64_t>(rng() % 200'000'000);
      std::vector<Decision> out(n);
      batched.check_many_at(keys, costs, Nanos{now}, out);
      for (std::size_t i = 0; i < n; ++i) {
        expect_same(out[i], single.check_at(keys[i], Nanos{now}, costs[i]),
                    std::string(algorithm_name(a)) + " round " + std::to_string(round) + " key " + std::to_string(i));
      }
      ASSERT_FALSE(testing::Test::HasFailure()) << algorithm_name(a);
    }
    EXPECT_EQ(batched.stats().keys, single.stats().keys) << algorithm_name(a);
    EXPECT_EQ(batched.stats().evictions, single.stats().evictions) << algorithm_name(a);
    EXPECT_GT(batched.stats().evictions, 0u) << algorithm_name(a);
  }
}

TEST(CheckMany, NoCostsMeansOneEach) {
  Limiter limiter(spec_for(Algorithm::kFixedWindow));
  std::vector<std::string_view> keys(100, "k");
  std::vector<Decision> out(keys.size());
  limiter.check_many_at(keys, {}, Nanos{0}, out);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].allowed, i < 5) << i;
  EXPECT_EQ(out[4].remaining, 0);
}

TEST(CheckMany, ABadArgumentDecidesNothing) {
  Limiter limiter(spec_for(Algorithm::kFixedWindow), StoreOptions{.max_key_bytes = 8});
  const std::string_view keys[] = {"a", "b", "too long a key"};
  Decision out[3];
  EXPECT_THROW(limiter.check_many_at(keys, {}, Nanos{0}, out), InvalidArgument);
  const std::uint64_t two_costs[] = {1, 1};
  EXPECT_THROW(limiter.check_many_at(std::span(keys, 2), two_costs, Nanos{0}, std::span(out, 1)), InvalidArgument);
  EXPECT_THROW(limiter.check_many_at(std::span(keys, 2), std::span(two_costs, 1), Nanos{0}, std::span(out, 2)),
               InvalidArgument);
  EXPECT_EQ(limiter.stats().keys, 0u);
  limiter.check_many_at({}, {}, Nanos{0}, {});  // nothing to decide is fine
}

// Two threads batch over the same keys while a third inserts new ones (the index grows under the prefetches):
// every key of a fixed window of 1,000 admits exactly 1,000.
TEST(CheckMany, ExactUnderThreadsWhileTheIndexGrows) {
  Limiter limiter({.algorithm = Algorithm::kFixedWindow, .limit = 1000, .window = Nanos{1h}});
  std::vector<std::string> names;
  for (int i = 0; i < 16; ++i) names.push_back("shared:" + std::to_string(i));
  const std::vector<std::string_view> keys(names.begin(), names.end());
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      std::vector<Decision> out(keys.size());
      for (int round = 0; round < 1000; ++round) {
        limiter.check_many_at(keys, {}, Nanos{0}, out);
        for (const Decision& d : out) admitted += d.allowed ? 1 : 0;
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 20'000; ++i) limiter.check_at("new:" + std::to_string(i), Nanos{0});
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 1000 * 16);
}

}  // namespace
}  // namespace rk
