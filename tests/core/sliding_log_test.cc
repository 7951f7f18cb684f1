#include "core/sliding_log.h"

#include "core/numeric.h"

#include <gtest/gtest.h>

#include <deque>
#include <limits>
#include <random>

#include "support/test_util.h"

namespace rk::core {
namespace {

using namespace rk::test;

WindowParams params(double limit, double window_s) {
  return window_params(LimitSpec{.algorithm = Algorithm::kSlidingLog, .limit = limit, .window = Nanos{sec(window_s)}});
}

TEST(SlidingLog, ExactWindow) {
  const auto p = params(3, 10);
  SlidingLogState s;
  EXPECT_TRUE(sliding_log_decide(p, s, 1 * kSec, 1).allowed);
  EXPECT_TRUE(sliding_log_decide(p, s, 2 * kSec, 1).allowed);
  EXPECT_TRUE(sliding_log_decide(p, s, 3 * kSec, 1).allowed);
  Decision d = sliding_log_decide(p, s, 4 * kSec, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{7 * kSec});  // the request at 1 s leaves the window at 11 s
  EXPECT_EQ(d.reset_after, Nanos{9 * kSec});
  EXPECT_FALSE(sliding_log_decide(p, s, 11 * kSec - 1, 1).allowed);
  EXPECT_TRUE(sliding_log_decide(p, s, 11 * kSec, 1).allowed);
}

TEST(SlidingLog, RetryWaitsForEnoughToExpireForTheCost) {
  const auto p = params(5, 10);
  SlidingLogState s;
  sliding_log_decide(p, s, 0, 1);
  sliding_log_decide(p, s, 1 * kSec, 2);
  sliding_log_decide(p, s, 2 * kSec, 2);
  const Decision d = sliding_log_decide(p, s, 3 * kSec, 3);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{8 * kSec});  // 1 + 2 must leave: at 11 s
  EXPECT_EQ(sliding_log_decide(p, s, 3 * kSec, 6).retry_after, kNever);
}

// Against a brute-force model: every admitted set has at most `limit` in any window.
TEST(SlidingLog, MatchesBruteForce) {
  const auto p = params(20, 1);
  SlidingLogState s;
  std::deque<std::int64_t> model;
  std::mt19937_64 rng(7);
  std::int64_t t = 0;
  for (int i = 0; i < 20'000; ++i) {
    t += static_cast<std::int64_t>(rng() % 100'000'000);
    while (!model.empty() && model.front() + kSec <= t) model.pop_front();
    const bool expect = model.size() < 20;
    ASSERT_EQ(sliding_log_decide(p, s, t, 1).allowed, expect) << i;
    if (expect) model.push_back(t);
    ASSERT_EQ(s.sum(), model.size());
  }
}

TEST(SlidingLog, MemoryBoundedByTheLimit) {
  const auto p = params(1000, 10);
  SlidingLogState s;
  for (std::int64_t i = 0; i < 100'000; ++i) sliding_log_decide(p, s, i, 1);  // 1/ns: 1000 admitted
  EXPECT_EQ(s.size(), 1000u);
  EXPECT_LE(s.heap_bytes(), 1024 * sizeof(SlidingLogState::Entry));
  // Same-nanosecond requests share an entry.
  SlidingLogState same;
  for (int i = 0; i < 1000; ++i) sliding_log_decide(p, same, 0, 1);
  EXPECT_EQ(same.size(), 1u);
  EXPECT_EQ(same.sum(), 1000u);
  // And the log shrinks back once traffic is gone.
  sliding_log_decide(p, s, 100 * kSec, 1);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_LE(s.heap_bytes(), 16 * sizeof(SlidingLogState::Entry));
}

// A log of one entry or none holds no ring (sliding_log.h): sparse traffic with costs and same-nanosecond requests
// moves it between no ring and a ring again and again, and every answer, size and sum matches a brute-force model
// of (time, cost) pairs, through copies and moves made at every step.
TEST(SlidingLog, OneEntryWithoutARingMatchesBruteForce) {
  const auto p = params(4, 1);
  SlidingLogState s;
  std::deque<std::pair<std::int64_t, std::uint64_t>> model;
  std::mt19937_64 rng(11);
  std::int64_t t = 0;
  std::size_t rings = 0, none = 0;
  for (int i = 0; i < 20'000; ++i) {
    const std::uint64_t r = rng();
    if (r % 4 != 0) t += static_cast<std::int64_t>(r % 900'000'000);  // a quarter at the same nanosecond
    const std::uint64_t cost = 1 + (r >> 32) % 2;
    while (!model.empty() && model.front().first + kSec <= t) model.pop_front();
    std::uint64_t used = 0;
    for (const auto& e : model) used += e.second;
    const bool expect = used + cost <= 4;
    if (expect) {
      if (!model.empty() && model.back().first == t) model.back().second += cost;
      else model.emplace_back(t, cost);
    }
    ASSERT_EQ(sliding_log_decide(p, s, t, cost).allowed, expect) << "step " << i;
    ASSERT_EQ(s.size(), model.size());
    for (std::uint32_t k = 0; k < s.size(); ++k) {
      ASSERT_EQ(s.at(k).t_ns, model[k].first);
      ASSERT_EQ(s.at(k).cost, model[k].second);
    }
    if (s.size() <= 1 && s.heap_bytes() == 0) ++none;
    if (s.heap_bytes() > 0) ++rings;
    SlidingLogState copy = s;  // deep, in either form
    SlidingLogState moved = std::move(copy);
    ASSERT_EQ(moved.size(), s.size());
    ASSERT_EQ(moved.sum(), s.sum());
    if (i % 3 == 0) s = std::move(moved);
  }
  EXPECT_GT(none, 1000u);  // both forms were exercised
  EXPECT_GT(rings, 1000u);
  // Emptied, it lets its ring go.
  sliding_log_decide(p, s, t + 10 * kSec, 1);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.heap_bytes(), 0u);
}

TEST(SlidingLog, CopiesAreDeep) {
  const auto p = params(10, 10);
  SlidingLogState a;
  for (int i = 0; i < 5; ++i) sliding_log_decide(p, a, i, 1);
  SlidingLogState b = a;
  sliding_log_decide(p, b, 10, 5);
  EXPECT_EQ(a.sum(), 5u);
  EXPECT_EQ(b.sum(), 10u);
}

TEST(SlidingLog, ClockGoingBackwardsKeepsOrder) {
  const auto p = params(3, 10);
  SlidingLogState s;
  sliding_log_decide(p, s, 5 * kSec, 1);
  sliding_log_decide(p, s, 1 * kSec, 1);  // logged at 5 s
  EXPECT_EQ(s.at(0).t_ns, 5 * kSec);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.sum(), 2u);
  EXPECT_EQ(sliding_log_decide(p, s, kMaxI64, std::numeric_limits<std::uint64_t>::max()).retry_after, kNever);
}

}  // namespace
}  // namespace rk::core
