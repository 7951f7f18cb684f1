// Properties every algorithm must have, checked on random traces through the public Limiter.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ratekeeper/limiter.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec spec_for(Algorithm a) {
  LimitSpec s{.algorithm = a, .limit = 10, .window = Nanos{1s}};
  switch (a) {
    case Algorithm::kEarrrl: s.half_life = Nanos{2s}; break;
    case Algorithm::kGcra:
    case Algorithm::kLeakyQueue: s.burst = 4; break;
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: s.capacity = 6; break;
    default: break;
  }
  return s;
}

// Algorithms whose retry_after is also the earliest time (earrrl's is a nanosecond past a logarithm).
bool exact(Algorithm a) { return a != Algorithm::kEarrrl; }

bool same(const Decision& a, const Decision& b) {
  return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining && a.retry_after == b.retry_after &&
         a.reset_after == b.reset_after && a.delay == b.delay && a.estimate == b.estimate;
}

class EveryAlgorithm : public ::testing::TestWithParam<Algorithm> {};

TEST_P(EveryAlgorithm, DecisionsAreHonest) {
  const Algorithm a = GetParam();
  Limiter limiter(spec_for(a));
  std::mt19937_64 rng(1234);
  std::int64_t now = 1'000'000'000'000;
  int refused = 0, allowed = 0;
  for (int i = 0; i < 5000; ++i) {
    // ~13 attempts a second against 10; earrrl, which counts refusals, would lock that out for good, so it gets ~9.
    now += static_cast<std::int64_t>(rng() % (a == Algorithm::kEarrrl ? 220'000'000 : 150'000'000));
    const std::uint64_t cost = rng() % 10 == 0 ? rng() % 4 : 1;
    const Decision peeked = limiter.peek_at("k", Nanos{now}, cost);
    const Decision d = limiter.check_at("k", Nanos{now}, cost);
    ASSERT_TRUE(same(peeked, d)) << "peek differs from check at step " << i;

    ASSERT_TRUE(std::isfinite(d.remaining) && d.remaining >= 0) << i;
    ASSERT_TRUE(std::isfinite(d.limit) && d.limit > 0) << i;
    ASSERT_GE(d.retry_after.count(), 0) << i;
    ASSERT_GE(d.reset_after.count(), 0) << i;
    ASSERT_GE(d.delay.count(), 0) << i;
    ASSERT_EQ(d.estimate.has_value(), a == Algorithm::kEarrrl);
    if (d.estimate) {
      ASSERT_TRUE(std::isfinite(*d.estimate) && *d.estimate >= 0);
    }

    if (d.allowed) {
      ++allowed;
      ASSERT_EQ(d.retry_after, Nanos{0});
    } else {
      ++refused;
      ASSERT_NE(d.retry_after, Nanos{0}) << i;
      ASSERT_NE(d.retry_after, kNever) << i;  // every cost here fits the limit
      // The same attempt is allowed after retry_after (if none is made meanwhile), and for the exact
      // algorithms not a nanosecond before.
      ASSERT_TRUE(limiter.peek_at("k", Nanos{now} + d.retry_after, cost).allowed) << i;
      if (exact(a)) {
        ASSERT_FALSE(limiter.peek_at("k", Nanos{now} + d.retry_after - Nanos{1}, cost).allowed) << i;
      }
    }
    // After reset_after the key answers as a fresh one would.
    const Nanos later = Nanos{now} + d.reset_after;
    const Decision then = limiter.peek_at("k", later, 1);
    const Decision fresh = limiter.peek_at("never-seen", later, 1);
    ASSERT_EQ(then.allowed, fresh.allowed) << i;
    ASSERT_NEAR(then.remaining, fresh.remaining, 1e-6 * fresh.remaining) << i;
  }
  EXPECT_GT(allowed, 1000);
  EXPECT_GT(refused, 100);
}

TEST_P(EveryAlgorithm, FreshKeyIsAllowedAndForgettable) {
  Limiter limiter(spec_for(GetParam()));
  const Decision d = limiter.check_at("k", Nanos{0});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(limiter.sweep_at(Nanos{0} + d.reset_after), 1u);
  EXPECT_EQ(limiter.stats().keys, 0u);
}

// earrrl decides on the estimate before the cost, so it has no such cost: see earrrl_test.cc.
class EveryCountingAlgorithm : public ::testing::TestWithParam<Algorithm> {};

TEST_P(EveryCountingAlgorithm, CostAboveWhatTheLimitAdmitsIsNever) {
  Limiter limiter(spec_for(GetParam()));
  const Decision d = limiter.check_at("k", Nanos{0}, 1'000'000);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, kNever);
  EXPECT_TRUE(limiter.check_at("k", Nanos{0}, 1).allowed);  // the refused cost spent nothing
}

TEST_P(EveryAlgorithm, ClockGoingBackwardsNeverAdmitsMore) {
  const Algorithm a = GetParam();
  Limiter forward(spec_for(a)), jumpy(spec_for(a));
  int forward_allowed = 0, jumpy_allowed = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t t = i * 10'000'000LL;
    forward_allowed += forward.check_at("k", Nanos{t}).allowed;
    // Every tenth attempt the clock reads a full second earlier.
    jumpy_allowed += jumpy.check_at("k", Nanos{i % 10 == 9 ? t - 1'000'000'000 : t}).allowed;
  }
  EXPECT_LE(jumpy_allowed, forward_allowed + 1) << algorithm_name(a);
}

// The backwards-clock rule (docs/algorithms.md): an attempt timed before the latest time the key has seen is never
// admitted where that latest time would refuse it, and its retry_after counts from its own time: the same attempt
// is allowed at its time + retry_after (and, for the exact algorithms, not a nanosecond before).
TEST_P(EveryAlgorithm, RetryAfterCountsFromTheAttemptsOwnTimeWhenTheClockStepsBack) {
  const Algorithm a = GetParam();
  std::mt19937_64 rng(99);
  for (int round = 0; round < 200; ++round) {
    Limiter limiter(spec_for(a));
    std::int64_t latest = 5'000'000'000'000;
    for (int i = 0; i < 12; ++i) {
      latest += static_cast<std::int64_t>(rng() % 40'000'000);
      limiter.check_at("k", Nanos{latest}, 1);
    }
    const Nanos back{latest - static_cast<std::int64_t>(rng() % 3'000'000'000)};
    const Decision at_latest = limiter.peek_at("k", Nanos{latest}, 1);
    const Decision d = limiter.peek_at("k", back, 1);
    if (!at_latest.allowed) {
      ASSERT_FALSE(d.allowed) << round;
    }
    if (d.allowed) continue;
    ASSERT_NE(d.retry_after, kNever);
    ASSERT_TRUE(limiter.peek_at("k", back + d.retry_after, 1).allowed) << round;
    if (exact(a)) {
      ASSERT_FALSE(limiter.peek_at("k", back + d.retry_after - Nanos{1}, 1).allowed) << round;
    }
  }
}

std::string name_of(const ::testing::TestParamInfo<Algorithm>& p) { return std::string(algorithm_name(p.param)); }

INSTANTIATE_TEST_SUITE_P(All, EveryAlgorithm, ::testing::ValuesIn(kAllAlgorithms), name_of);
INSTANTIATE_TEST_SUITE_P(All, EveryCountingAlgorithm,
                         ::testing::Values(Algorithm::kGcra, Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                           Algorithm::kLeakyQueue, Algorithm::kFixedWindow, Algorithm::kSlidingLog,
                                           Algorithm::kSlidingWindow),
                         name_of);

}  // namespace
}  // namespace rk
