#include "core/fluid.h"

#include <cmath>
#include "core/numeric.h"

#include <gtest/gtest.h>

#include <limits>

#include "test_util.h"

namespace rk::core {
namespace {

using namespace rk::test;

FluidParams params(double limit, double window_s, double capacity) {
  return fluid_params(LimitSpec{.algorithm = Algorithm::kTokenBucket, .limit = limit, .window = Nanos{sec(window_s)},
                                .capacity = capacity});
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
  EXPECT_FALSE(fluid_decide(p, s, 0, 1).allowed);
  EXPECT_DOUBLE_EQ(s.level, 10);
  EXPECT_TRUE(fluid_decide(p, s, 100'000'000, 1).allowed);  // 100 ms drains one
  EXPECT_NEAR(s.level, 10, 1e-9);
  EXPECT_FALSE(fluid_forgettable(p, s, kSec));
  EXPECT_TRUE(fluid_forgettable(p, s, 1'100'000'000));
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

}  // namespace
}  // namespace rk::core
