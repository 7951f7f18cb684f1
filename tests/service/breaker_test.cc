// The circuit breaker on a manual clock: when it opens, when it probes, how its wait grows and resets.
#include <gtest/gtest.h>

#include "service/breaker.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;
using State = CircuitBreaker::State;

struct Breaker : ::testing::Test {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Nanos{1'000'000'000});
  CircuitBreaker breaker{clock, {.failures_to_open = 3, .open_for = 100ms, .max_open_for = 350ms}};

  void fail_while_allowed(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(breaker.allow());
      breaker.record(false);
    }
  }
};

TEST_F(Breaker, OpensAfterConsecutiveFailuresOnly) {
  fail_while_allowed(2);
  ASSERT_TRUE(breaker.allow());
  breaker.record(true);  // a success in between starts the count again
  fail_while_allowed(2);
  EXPECT_EQ(breaker.state(), State::kClosed);
  fail_while_allowed(1);
  EXPECT_EQ(breaker.state(), State::kOpen);
  EXPECT_FALSE(breaker.allow());
  EXPECT_EQ(breaker.opened(), 1u);
}

TEST_F(Breaker, OneProbeAfterTheWaitAndASuccessCloses) {
  fail_while_allowed(3);
  clock->advance(99ms);
  EXPECT_FALSE(breaker.allow());
  clock->advance(1ms);
  EXPECT_TRUE(breaker.allow());  // the probe
  EXPECT_EQ(breaker.state(), State::kHalfOpen);
  EXPECT_FALSE(breaker.allow());  // only one at a time
  breaker.record(true);
  EXPECT_EQ(breaker.state(), State::kClosed);
  EXPECT_TRUE(breaker.allow());
}

TEST_F(Breaker, AFailedProbeDoublesTheWaitUpToTheMaximumAndSuccessResetsIt) {
  fail_while_allowed(3);
  Nanos expected_wait = 100ms;
  for (Nanos next : {Nanos(200ms), Nanos(350ms), Nanos(350ms)}) {
    clock->advance(expected_wait);
    ASSERT_TRUE(breaker.allow());
    breaker.record(false);  // the probe failed
    EXPECT_EQ(breaker.state(), State::kOpen);
    clock->advance(next - 1ns);
    EXPECT_FALSE(breaker.allow()) << next.count();
    clock->advance(1ns);
    expected_wait = 0ns;
  }
  ASSERT_TRUE(breaker.allow());
  breaker.record(true);
  fail_while_allowed(3);  // opens again, for the first wait
  clock->advance(100ms);
  EXPECT_TRUE(breaker.allow());
  EXPECT_EQ(breaker.opened(), 5u);
}

TEST_F(Breaker, LateFailuresOfCallsLetThroughBeforeItOpenedDoNotExtendIt) {
  ASSERT_TRUE(breaker.allow());
  ASSERT_TRUE(breaker.allow());
  fail_while_allowed(3);
  breaker.record(false);  // an older call's failure arrives after the breaker opened
  clock->advance(100ms);
  EXPECT_TRUE(breaker.allow());
  EXPECT_EQ(breaker.opened(), 1u);
}

}  // namespace
}  // namespace rk::service
