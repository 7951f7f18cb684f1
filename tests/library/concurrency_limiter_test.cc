#include "ratekeeper/concurrency.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace rk {
namespace {

using std::chrono::seconds;

TEST(ConcurrencyLimiter, HoldsAtMostMaxInFlightAndGuardReleasesOnScopeExit) {
  auto clock = std::make_shared<ManualClock>(seconds(100));
  ConcurrencyLimiter limiter({.max_in_flight = 2, .lease_ttl = seconds(30)}, clock);
  {
    Lease a = limiter.acquire("k");
    Lease b = limiter.acquire("k");
    ASSERT_TRUE(a);
    ASSERT_TRUE(b);
    EXPECT_EQ(b.in_flight(), 2u);
    Lease c = limiter.acquire("k");
    EXPECT_FALSE(c);
    EXPECT_EQ(c.retry_after(), seconds(30));
    EXPECT_TRUE(limiter.acquire("other"));  // another key has its own slots
    EXPECT_EQ(limiter.in_flight("k"), 2u);
  }
  EXPECT_EQ(limiter.in_flight("k"), 0u);
  EXPECT_TRUE(limiter.acquire("k"));
}

TEST(ConcurrencyLimiter, KilledClientsSlotComesBackAfterTheTtl) {
  auto clock = std::make_shared<ManualClock>(seconds(100));
  ConcurrencyLimiter limiter({.max_in_flight = 1, .lease_ttl = seconds(5)}, clock);
  const std::string id = limiter.acquire("k").detach();  // the client dies holding it
  EXPECT_FALSE(limiter.acquire("k"));
  clock->advance(seconds(5) - Nanos{1});
  EXPECT_FALSE(limiter.acquire("k"));
  clock->advance(Nanos{1});
  Lease again = limiter.acquire("k");
  EXPECT_TRUE(again);
  EXPECT_FALSE(limiter.release("k", id));  // the expired lease frees nothing
  EXPECT_EQ(limiter.in_flight("k"), 1u);
}

TEST(ConcurrencyLimiter, ReleaseOfUnknownExpiredOrOthersIdChangesNothing) {
  auto clock = std::make_shared<ManualClock>(seconds(100));
  ConcurrencyLimiter limiter({.max_in_flight = 3, .lease_ttl = seconds(5)}, clock);
  const std::string mine = limiter.acquire("k").detach();
  const std::string theirs = limiter.acquire("other").detach();
  ASSERT_EQ(mine.size(), 32u);
  EXPECT_NE(mine, theirs);
  EXPECT_FALSE(limiter.release("k", "00000000000000000000000000000000"));
  EXPECT_FALSE(limiter.release("k", "not hex at all"));
  EXPECT_FALSE(limiter.release("k", theirs));  // someone else's key
  EXPECT_EQ(limiter.in_flight("k"), 1u);
  EXPECT_EQ(limiter.in_flight("other"), 1u);
  EXPECT_TRUE(limiter.release("k", mine));
  EXPECT_FALSE(limiter.release("k", mine));  // twice
  EXPECT_EQ(limiter.in_flight("other"), 1u);
}

TEST(ConcurrencyLimiter, IdsAreDistinct) {
  ConcurrencyLimiter limiter({.max_in_flight = 1000});
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(limiter.acquire("k").detach());
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(ConcurrencyLimiter, BadSpecAndKeyAreRefusedByName) {
  EXPECT_THROW(ConcurrencyLimiter({.max_in_flight = 0}), InvalidArgument);
  const auto e = validate(ConcurrencySpec{.max_in_flight = 1, .lease_ttl = Nanos{5}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].param, "lease_ttl");
  ConcurrencyLimiter limiter({.max_in_flight = 1, .max_key_bytes = 4});
  EXPECT_THROW(limiter.acquire("12345"), InvalidArgument);
  EXPECT_EQ(limiter.in_flight("12345"), 0u);
}

// 100 clients on a limit of 10: the number holding a lease, sampled throughout, never passes 10.
TEST(ConcurrencyLimiter, HundredClientsNeverHoldMoreThanTen) {
  ConcurrencyLimiter limiter({.max_in_flight = 10, .lease_ttl = seconds(60)});
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> granted{0};
  std::atomic<bool> stop{false};
  std::thread sampler([&] {
    while (!stop.load()) {
      const int n = static_cast<int>(limiter.in_flight("k"));
      int m = most.load();
      while (n > m && !most.compare_exchange_weak(m, n)) {
      }
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < 100; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (Lease lease = limiter.acquire("k")) {
          const int now = holding.fetch_add(1) + 1;
          int m = most.load();
          while (now > m && !most.compare_exchange_weak(m, now)) {
          }
          granted.fetch_add(1);
          std::this_thread::yield();
          holding.fetch_sub(1);
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  stop = true;
  sampler.join();
  EXPECT_LE(most.load(), 10);
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(limiter.in_flight("k"), 0u);
}

}  // namespace
}  // namespace rk

namespace rk {
namespace {

// A stream of new keys cannot grow the table past max_keys: a new key past it is refused until leases go.
TEST(ConcurrencyLimiter, KeysAreBoundedByMaxKeys) {
  auto clock = std::make_shared<ManualClock>(std::chrono::seconds(100));
  ConcurrencyLimiter limiter({.max_in_flight = 1, .lease_ttl = std::chrono::seconds(5), .max_keys = 64}, clock);
  std::vector<std::string> held;
  for (int i = 0; i < 10'000; ++i) {
    Lease l = limiter.acquire("k" + std::to_string(i));
    if (l) held.push_back(l.detach());
  }
  EXPECT_LE(held.size(), 64u);  // one key a shard
  EXPECT_GE(held.size(), 1u);
  clock->advance(std::chrono::seconds(5));  // every lease expired: room again
  clock->advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(limiter.acquire("fresh"));
}

}  // namespace
}  // namespace rk
