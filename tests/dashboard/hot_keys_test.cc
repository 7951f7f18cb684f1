// The dashboard's hot keys (dashboard/hot_keys.h): a space-saving sketch of decaying counts, which finds the heavy
// hitters among many more keys than it has counters, and stays exact and finite under churn and odd clocks.
#include "dashboard/hot_keys.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

namespace rk::dashboard {
namespace {

using namespace std::chrono_literals;

TEST(HotKeys, FindsTheHeavyHitterAmongManyMoreKeysThanCounters) {
  HotKeys hot({.capacity = 16, .half_life = 10s});
  // 20,000 distinct keys once each, and one key every 10th attempt: 10% of the traffic, far above 1/16.
  for (int i = 0; i < 20000; ++i) {
    hot.add("k" + std::to_string(i), false, Nanos{i});
    if (i % 10 == 0) hot.add("heavy", true, Nanos{i});
  }
  const auto top = hot.top(100, Nanos{20000});
  ASSERT_EQ(top.size(), 16u);  // never more than the capacity
  EXPECT_EQ(top[0].key, "heavy");
  EXPECT_TRUE(top[0].last_refused);
  EXPECT_GE(top[0].hits, 1999.99);  // space-saving never undercounts a key it holds (decay over 20 µs aside)
  EXPECT_LE(top[0].hits - top[0].error, 2000.01);
}

TEST(HotKeys, CountsDecaySoRecentTrafficOutranksOldTraffic) {
  HotKeys hot({.capacity = 8, .half_life = 1s});
  for (int i = 0; i < 100; ++i) hot.add("old", false, Nanos{0});
  for (int i = 0; i < 10; ++i) hot.add("new", false, 10s);
  const auto top = hot.top(2, 10s);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "new");
  EXPECT_NEAR(top[0].hits, 10, 1e-9);
  EXPECT_NEAR(top[1].hits, 100.0 / 1024, 1e-9);   // ten half-lives
  EXPECT_NEAR(hot.top(1, 11s)[0].hits, 5, 1e-9);  // read later: half
}

// add() finds keys through a hash index with linear probing, from which a key taken over is removed by moving
// later entries back: after much churn every key held must still be found (a lost one would get a second counter).
TEST(HotKeys, KeysHeldAreFoundAfterManyTakeOvers) {
  HotKeys hot({.capacity = 8, .half_life = 1000s});
  std::uint64_t x = 42;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    hot.add("key" + std::to_string((x >> 33) % 13), false, Nanos{0});  // 13 keys for 8 counters, an index of 16
  }
  const auto top = hot.top(8, Nanos{0});
  ASSERT_EQ(top.size(), 8u);
  std::set<std::string> keys;
  double hits = 0;
  for (const auto& k : top) {
    keys.insert(k.key);
    hits += k.hits;
  }
  EXPECT_EQ(keys.size(), 8u);      // no key twice
  EXPECT_NEAR(hits, 20000, 1e-6);  // each attempt counted once, in one counter (no decay at one instant)
  for (const auto& k : top) {
    const double before = k.hits;
    hot.add(k.key, false, Nanos{0});  // a key held adds to its own counter, taking none over
    for (const auto& again : hot.top(8, Nanos{0})) {
      if (again.key == k.key) {
        EXPECT_NEAR(again.hits, before + 1, 1e-9) << k.key;
      }
    }
  }
}

TEST(HotKeys, StaysFiniteOverCenturiesAndWhenTheClockGoesBack) {
  HotKeys hot({.capacity = 4, .half_life = 1s});
  hot.add("a", false, Nanos{0});
  for (int y = 1; y <= 100; ++y) hot.add("a", false, std::chrono::hours(24 * 365) * y);  // rescales on the way
  hot.add("a", false, std::chrono::hours(24 * 365));                                     // back in time: weighs as now
  const auto top = hot.top(1, std::chrono::hours(24 * 365 * 100));
  ASSERT_EQ(top.size(), 1u);
  EXPECT_TRUE(std::isfinite(top[0].hits));
  EXPECT_NEAR(top[0].hits, 2, 1e-9);
}

}  // namespace
}  // namespace rk::dashboard
