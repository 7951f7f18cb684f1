#include "core/fluid.h"

#include <cmath>
#include "core/numeric.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "core/gcra.h"

#include "support/test_util.h"

namespace rk::core {
namespace {

using namespace rk::test;

FluidParams params(double limit, double window_s, double capacity) {
  return fluid_params(LimitSpec{
      .algorithm = Algorithm::kTokenBucket, .limit = limit, .window = Nanos{sec(window_s)}, .capacity = capacity});
}

TEST(TokenBucket, FullBucketThenRefill) {
  const auto p = params(2, 1, 5);  // 5 tokens, 2 per second
  FluidState s;
  for (int i = 0; i < 5; ++i) {
    const Decision d = fluid_decide(p, s, 0, 1);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 4 - i);
  }
  Decision d = fluid_decide(p, s, 0, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{500'000'000});
  EXPECT_EQ(d.reset_after, Nanos{2'500'000'000});
  EXPECT_FALSE(fluid_decide(p, s, 499'999'999, 1).allowed);
  EXPECT_TRUE(fluid_decide(p, s, 500'000'000, 1).allowed);
  // Never more than the capacity, however long the wait.
  d = fluid_decide(p, s, 1000 * kSec, 0);
  EXPECT_EQ(d.remaining, 5);
}

TEST(TokenBucket, FractionsOfARefillAddUp) {
  const auto p = params(3, 1, 1);  // one token, refilled in thirds of a second
  FluidState s;
  ASSERT_TRUE(fluid_decide(p, s, 0, 1).allowed);
  std::int64_t t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += 333'333'334;  // a third of a second, rounded up to the nanosecond
    ASSERT_TRUE(fluid_decide(p, s, t, 1).allowed) << i;
  }
}

TEST(TokenBucket, CostAboveCapacityNeverPasses) {
  const auto p = params(1, 1, 3);
  FluidState s;
  const Decision d = fluid_decide(p, s, 0, 4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, kNever);
  EXPECT_EQ(d.remaining, 3);
}

// A leaky bucket as a meter is the same function: level is what the token bucket lacks.
TEST(LeakyBucket, LevelDrainsContinuously) {
  const auto p = fluid_params(LimitSpec{.algorithm = Algorithm::kLeakyBucket, .limit = 10, .window = Nanos{kSec}});
  EXPECT_EQ(p.capacity, 10);  // capacity defaults to the limit
  FluidState s;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(fluid_decide(p, s, 0, 1).allowed);
  const Decision full = fluid_decide(p, s, 0, 1);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.reset_after, Nanos{kSec});                 // ten requests at 100 ms each
  EXPECT_TRUE(fluid_decide(p, s, 100'000'000, 1).allowed);  // 100 ms drains one
  EXPECT_EQ(fluid_decide(p, s, 100'000'000, 0).reset_after, Nanos{kSec});
  EXPECT_FALSE(fluid_forgettable(p, s, kSec));
  EXPECT_TRUE(fluid_forgettable(p, s, 1'100'000'000));
}

// x/time/rate, redis-cell and throttled say 1 s here; a level kept in requests with a 1e-9 tolerance said 0.999999999.
TEST(TokenBucket, RetryAfterIsExactToTheNanosecond) {
  const auto p = params(1, 1, 1);
  FluidState s;
  ASSERT_TRUE(fluid_decide(p, s, 0, 1).allowed);
  const Decision d = fluid_decide(p, s, 0, 1);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{kSec});
  EXPECT_FALSE(fluid_decide(p, s, kSec - 1, 1).allowed);
  EXPECT_TRUE(fluid_decide(p, s, kSec, 1).allowed);
}

// At one request a year the tolerance used to admit 31.5 ms early, where gcra refused.
TEST(TokenBucket, NoEarlyAdmissionAtSlowRates) {
  const std::int64_t year = 365LL * 86'400 * kSec;
  const auto p = fluid_params(LimitSpec{.algorithm = Algorithm::kTokenBucket, .limit = 1, .window = Nanos{year}});
  FluidState s;
  const std::int64_t t0 = 1'700'000'000 * kSec;
  ASSERT_TRUE(fluid_decide(p, s, t0, 1).allowed);
  const Decision d = fluid_decide(p, s, t0 + 1, 1);
  EXPECT_EQ(d.retry_after, Nanos{year - 1});
  EXPECT_FALSE(fluid_decide(p, s, t0 + year - 1, 1).allowed);
  EXPECT_TRUE(fluid_decide(p, s, t0 + year, 1).allowed);
}

// With a whole capacity and a whole number of nanoseconds per request, the token bucket is gcra, field for field.
TEST(TokenBucket, IsGcraWhenEverythingIsWhole) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const double limit = static_cast<double>(1 + rng() % 20);
    const std::int64_t window = static_cast<std::int64_t>(limit) * static_cast<std::int64_t>(1 + rng() % 1'000'000);
    const double capacity = static_cast<double>(1 + rng() % 10);
    const auto fp = fluid_params(
        LimitSpec{.algorithm = Algorithm::kTokenBucket, .limit = limit, .window = Nanos{window}, .capacity = capacity});
    const auto gp = gcra_params(
        LimitSpec{.algorithm = Algorithm::kGcra, .limit = limit, .window = Nanos{window}, .burst = capacity - 1});
    FluidState fs;
    GcraState gs;
    std::int64_t t = 1'000'000;
    for (int i = 0; i < 200; ++i) {
      t += static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * window / static_cast<std::int64_t>(limit)));
      if (rng() % 8 == 0) t -= static_cast<std::int64_t>(rng() % 1000);  // the clock steps back
      const std::uint64_t cost = rng() % 3;
      const Decision f = fluid_decide(fp, fs, t, cost);
      const Decision g = gcra_decide(gp, gs, t, cost);
      ASSERT_EQ(f.allowed, g.allowed) << round << " " << i;
      ASSERT_EQ(f.retry_after, g.retry_after) << round << " " << i;
      ASSERT_EQ(f.reset_after, g.reset_after) << round << " " << i;
      ASSERT_EQ(f.remaining, g.remaining) << round << " " << i;
    }
  }
}

// A refused attempt answers when it would pass, from its own time, even when the clock has gone back.
TEST(TokenBucket, RetryAfterHoldsAfterTheClockStepsBack) {
  const auto p = params(1, 1, 2);
  FluidState s;
  ASSERT_TRUE(fluid_decide(p, s, 10 * kSec, 2).allowed);
  const std::int64_t back = 9 * kSec;  // a second before the latest time seen
  const Decision d = fluid_decide(p, s, back, 1);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{2 * kSec});
  EXPECT_FALSE(fluid_decide(p, s, back + d.retry_after.count() - 1, 1).allowed);
  EXPECT_TRUE(fluid_decide(p, s, back + d.retry_after.count(), 1).allowed);
}

TEST(Fluid, ExtremeInputsStayFinite) {
  const auto p = params(1, 1, 3);
  FluidState s;
  const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
  Decision d = fluid_decide(p, s, kMinI64, huge);
  EXPECT_FALSE(d.allowed);
  d = fluid_decide(p, s, kMaxI64, 1);
  EXPECT_TRUE(d.allowed);
  d = fluid_decide(p, s, kMinI64, 3);  // backwards: no refill
  EXPECT_FALSE(d.allowed);
  EXPECT_GE(d.retry_after.count(), 0);
  EXPECT_TRUE(std::isfinite(d.remaining));
}

// allowed and remaining are the level test `backlog <= floor(C*T - k*T - f)`, clamped to the int64 range, taken at
// its word: here written plainly (the decision compares in doubles where that is exact), over backlogs from none to
// beyond 2^53 ns, windows of 1 µs to 17 years with limits of 1 to 1,000, fractional and whole capacities.
TEST(Fluid, AllowedAndRemainingAreTheLevelTestExactly) {
  auto floor_clamped = [](double y) {
    if (!(y > -9.2e18)) return kMinI64;
    if (y >= 9.2e18) return kMaxI64;
    return static_cast<std::int64_t>(std::floor(y));
  };
  std::mt19937_64 rng(21);
  for (int i = 0; i < 100'000; ++i) {
    const double window_s = std::ldexp(1.0, static_cast<int>(rng() % 50) - 20);  // 1 µs to 17 years
    const double capacity = static_cast<double>(8 + rng() % 8000) / (rng() % 2 ? 1 : 8);
    const auto p = params(static_cast<double>(1 + rng() % 1000), window_s, capacity);
    FluidState s{.empty_ns = static_cast<std::int64_t>(rng() >> (1 + rng() % 63)),
                 .frac = static_cast<double>(rng() % 1024) / 1024};
    const std::int64_t now = static_cast<std::int64_t>(rng() >> (1 + rng() % 63));
    const std::uint64_t cost = rng() % 4;
    const std::int64_t whole = s.empty_ns < now ? 0 : s.empty_ns - now;
    const double frac = s.empty_ns < now ? 0 : s.frac;
    const bool want_allowed = static_cast<double>(cost) <= p.capacity &&
                              whole <= floor_clamped(p.tolerance - static_cast<double>(cost) * p.interval - frac);
    const FluidState before = s;
    const Decision d = fluid_decide(p, s, now, cost);
    ASSERT_EQ(d.allowed, want_allowed) << "empty " << before.empty_ns << " now " << now << " cost " << cost;
    const std::int64_t w = s.empty_ns < now ? 0 : s.empty_ns - now;
    const double f = s.empty_ns < now ? 0 : s.frac;
    auto fits = [&](double k) { return w <= floor_clamped(p.tolerance - k * p.interval - f); };
    ASSERT_TRUE(d.remaining == 0 || fits(d.remaining)) << d.remaining;
    ASSERT_FALSE(d.remaining + 1 <= p.capacity && fits(d.remaining + 1)) << d.remaining;
  }
}

// remaining at the backlogs where the level test changes its answer (the nanoseconds on either side of the last one
// that lets k requests through), where room()'s first guess is closest to a whole number: still exactly the test's
// largest k, for capacities of 1 to 10^12, whole and fractional, and intervals of a picosecond to a day.
TEST(Fluid, RemainingIsExactWhereTheTestTurns) {
  std::mt19937_64 rng(34);
  std::uniform_real_distribution<double> unit(0, 1);
  int checked = 0;
  for (int i = 0; i < 20'000; ++i) {
    const double capacity = std::max(1.0, std::floor(std::pow(10.0, 12 * unit(rng))) / (rng() % 2 ? 1 : 4));
    const double limit = std::floor(std::pow(10.0, 9 * unit(rng))) + 1;
    const double window_s = std::pow(10.0, 5 * unit(rng) - 3);  // 1 ms to a day
    if (capacity * window_s / limit * 1e9 > 3e18) continue;     // beyond what validation allows
    const auto p = params(limit, window_s, capacity);
    const double frac = rng() % 4 == 0 ? 0 : unit(rng);
    const double k0 = std::floor(unit(rng) * (p.whole_capacity + 1));
    const double turn = std::floor(p.tolerance - k0 * p.interval - frac);  // the last backlog that admits k0
    for (std::int64_t delta = -2; delta <= 2; ++delta) {
      const std::int64_t whole = static_cast<std::int64_t>(turn) + delta;
      if (whole < 0) continue;
      const fluid_detail::Backlog b{whole, frac};
      const double k = fluid_detail::room(p, b);
      auto fits = [&](double n) { return fluid_detail::fits(p, b, n); };
      ASSERT_TRUE(k == 0 || fits(k)) << "capacity " << capacity << " interval " << p.interval << " k " << k;
      ASSERT_FALSE(k + 1 <= p.capacity && fits(k + 1))
          << "capacity " << capacity << " interval " << p.interval << " k " << k;
      ++checked;
    }
  }
  EXPECT_GT(checked, 50'000);
}

}  // namespace
}  // namespace rk::core
