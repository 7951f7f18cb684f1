#include "core/windows.h"

#include <gtest/gtest.h>

#include <limits>

#include "support/test_util.h"

namespace rk::core {
namespace {

using namespace rk::test;

WindowParams params(Algorithm a, double limit, double window_s, std::optional<bool> count_refused = {}) {
  return window_params(
      LimitSpec{.algorithm = a, .limit = limit, .window = Nanos{sec(window_s)}, .count_refused = count_refused});
}

TEST(FixedWindow, CountsPerAlignedWindow) {
  const auto p = params(Algorithm::kFixedWindow, 3, 60);
  FixedWindowState s;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(fixed_window_decide(p, s, 10 * kSec, 1).allowed);
  Decision d = fixed_window_decide(p, s, 59 * kSec, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{kSec});
  EXPECT_EQ(d.remaining, 0);
  d = fixed_window_decide(p, s, 60 * kSec, 1);  // the next window starts at 60 s, whatever the first request time
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_after, Nanos{60 * kSec});
}

TEST(FixedWindow, CostsAndNever) {
  const auto p = params(Algorithm::kFixedWindow, 10, 1);
  FixedWindowState s;
  EXPECT_TRUE(fixed_window_decide(p, s, 0, 8).allowed);
  EXPECT_FALSE(fixed_window_decide(p, s, 0, 3).allowed);
  EXPECT_TRUE(fixed_window_decide(p, s, 0, 2).allowed);
  EXPECT_EQ(fixed_window_decide(p, s, 0, 11).retry_after, kNever);
}

TEST(FixedWindow, CountRefusedLikeEnvoyRatelimit) {
  const auto p = params(Algorithm::kFixedWindow, 10, 1, true);
  FixedWindowState s;
  EXPECT_TRUE(fixed_window_decide(p, s, 0, 8).allowed);
  EXPECT_FALSE(fixed_window_decide(p, s, 0, 3).allowed);
  EXPECT_EQ(s.count, 11u);
  EXPECT_FALSE(fixed_window_decide(p, s, 0, 1).allowed);  // without count_refused this one would pass
}

// envoyproxy/ratelimit's test/redis/fixed_cache_impl_test.go (TestRedis): a cost of 0 is compared like any other,
// the count after it against the limit; so it passes at the limit and is refused once refused hits took the count
// past it, until the window ends.
TEST(FixedWindow, CostZeroIsRefusedPastTheLimit) {
  const auto p = params(Algorithm::kFixedWindow, 10, 3600, true);
  FixedWindowState s;
  for (int i = 0; i < 10; ++i) fixed_window_decide(p, s, 0, 1);
  Decision d = fixed_window_decide(p, s, 0, 0);
  EXPECT_TRUE(d.allowed) << "10 of 10: at the limit";
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(fixed_window_decide(p, s, 0, 1).allowed);  // counted: 11 of 10
  d = fixed_window_decide(p, s, kSec, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{3599 * kSec});
  EXPECT_EQ(s.count, 11u) << "cost 0 adds nothing";
  EXPECT_TRUE(fixed_window_decide(p, s, 3600 * kSec, 0).allowed);
}

TEST(FixedWindow, ClockGoingBackNeverForgives) {
  const auto p = params(Algorithm::kFixedWindow, 2, 10);
  FixedWindowState s;
  fixed_window_decide(p, s, 25 * kSec, 2);
  EXPECT_FALSE(fixed_window_decide(p, s, 15 * kSec, 1).allowed);  // an earlier window: still the latest count
  EXPECT_TRUE(fixed_window_decide(p, s, 30 * kSec, 1).allowed);
}

TEST(FixedWindow, NegativeTimesAlignToo) {
  const auto p = params(Algorithm::kFixedWindow, 1, 10);
  FixedWindowState s;
  EXPECT_TRUE(fixed_window_decide(p, s, -5 * kSec, 1).allowed);
  const Decision d = fixed_window_decide(p, s, -1, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{1});
  EXPECT_TRUE(fixed_window_decide(p, s, 0, 1).allowed);
}

// The seed's example: limit 7 a minute, 5 in the previous minute, 3 in this one, a request 30% into the minute
// sees 3 + 5 * 0.7 = 6.5, rounded down to 6, and is allowed; the one after it is not.
TEST(SlidingWindow, SeedExample) {
  const auto p = params(Algorithm::kSlidingWindow, 7, 60);
  SlidingWindowState s;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(sliding_window_decide(p, s, 10 * kSec, 1).allowed);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sliding_window_decide(p, s, 62 * kSec, 1).allowed);
  const std::int64_t at = 60 * kSec + 18 * kSec;  // 30% into the minute
  Decision d = sliding_window_decide(p, s, at, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  d = sliding_window_decide(p, s, at, 1);
  EXPECT_FALSE(d.allowed);
  // 4 in this minute: the previous 5 must weigh at most 2 (floor), i.e. 5 * (60 - e) / 60 < 3: e > 24 s.
  EXPECT_EQ(d.retry_after, Nanos{24 * kSec + 1 - 18 * kSec});
  SlidingWindowState early = s, late = s;
  EXPECT_FALSE(sliding_window_decide(p, early, at + d.retry_after.count() - 1, 1).allowed);
  EXPECT_TRUE(sliding_window_decide(p, late, at + d.retry_after.count(), 1).allowed);
}

TEST(SlidingWindow, RetryInTheNextWindow) {
  const auto p = params(Algorithm::kSlidingWindow, 4, 10);
  SlidingWindowState s;
  ASSERT_TRUE(sliding_window_decide(p, s, 5 * kSec, 4).allowed);
  const Decision d = sliding_window_decide(p, s, 6 * kSec, 1);
  EXPECT_FALSE(d.allowed);
  // Next window: 4 * (10 - e) / 10 < 4 (floor <= 3) as soon as e > 0: at 10 s + 1 ns.
  EXPECT_EQ(d.retry_after, Nanos{4 * kSec + 1});
  // Fresh once 4 * (10 - e) / 10 floors to 0 in the next window: e > 7.5 s.
  EXPECT_EQ(d.reset_after, Nanos{11'500'000'001});
}

TEST(SlidingWindow, SkippedWindowForgetsThePast) {
  const auto p = params(Algorithm::kSlidingWindow, 4, 10);
  SlidingWindowState s;
  ASSERT_TRUE(sliding_window_decide(p, s, 5 * kSec, 4).allowed);
  EXPECT_FALSE(sliding_window_forgettable(p, s, 17'500'000'000));  // floor(4 * 2.5 / 10) = 1
  EXPECT_TRUE(sliding_window_forgettable(p, s, 17'500'000'001));
  const Decision d = sliding_window_decide(p, s, 21 * kSec, 4);
  EXPECT_TRUE(d.allowed);
}

TEST(SlidingWindow, NeverAdmitsMoreThanTwiceTheLimitInAnyWindow) {
  const auto p = params(Algorithm::kSlidingWindow, 100, 1);
  SlidingWindowState s;
  std::vector<std::int64_t> admitted;
  for (std::int64_t t = 0; t < 20 * kSec; t += 1'000'000) {  // 1000/s against 100/s
    if (sliding_window_decide(p, s, t, 1).allowed) admitted.push_back(t);
  }
  std::size_t lo = 0;
  for (std::size_t hi = 0; hi < admitted.size(); ++hi) {
    while (admitted[hi] - admitted[lo] >= kSec) ++lo;
    EXPECT_LE(hi - lo + 1, 200u);
  }
  EXPECT_NEAR(static_cast<double>(admitted.size()) / 20, 100, 5);
}

TEST(Windows, ExtremeInputs) {
  const auto p = params(Algorithm::kSlidingWindow, 5, 1);
  SlidingWindowState s;
  const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(sliding_window_decide(p, s, kMinI64, huge).retry_after, kNever);
  EXPECT_TRUE(sliding_window_decide(p, s, kMinI64, 5).allowed);
  EXPECT_TRUE(sliding_window_decide(p, s, kMaxI64, 5).allowed);
  const auto f = params(Algorithm::kFixedWindow, 5, 1, true);
  FixedWindowState fs;
  fixed_window_decide(f, fs, kMaxI64, huge);
  fixed_window_decide(f, fs, kMaxI64, huge);
  EXPECT_EQ(fs.count, huge);  // saturates
  EXPECT_EQ(fixed_window_decide(f, fs, kMaxI64, 1).remaining, 0);
}

}  // namespace
}  // namespace rk::core

namespace rk::core {
namespace {

using namespace rk::test;

// 2026-02-11 12:00 UTC (a Wednesday) and friends, as nanoseconds since the epoch.
constexpr std::int64_t kDay = 86'400 * kSec;
constexpr std::int64_t at(std::int64_t days_since_epoch, std::int64_t hour = 0) {
  return days_since_epoch * kDay + hour * 3600 * kSec;
}
constexpr std::int64_t k2026_02_01 = 20'485;  // days from 1970-01-01
constexpr std::int64_t k2026_03_01 = k2026_02_01 + 28;
constexpr std::int64_t k2027_01_01 = 20'819;

WindowParams calendar(std::chrono::hours window) {
  return window_params(
      LimitSpec{.algorithm = Algorithm::kFixedWindow, .limit = 2, .window = window, .align = Align::kCalendar});
}

TEST(FixedWindowCalendar, MonthsAreCalendarMonths) {
  const auto p = calendar(std::chrono::hours(24 * 30));
  ASSERT_EQ(p.calendar, Calendar::kMonth);
  FixedWindowState s;
  EXPECT_TRUE(fixed_window_decide(p, s, at(k2026_02_01 + 10, 12), 2).allowed);
  const Decision d = fixed_window_decide(p, s, at(k2026_02_01 + 10, 12), 1);
  EXPECT_FALSE(d.allowed);
  // February 2026 has 28 days: the window ends on March 1st, 17.5 days later.
  EXPECT_EQ(d.retry_after, Nanos{at(k2026_03_01) - at(k2026_02_01 + 10, 12)});
  EXPECT_FALSE(fixed_window_decide(p, s, at(k2026_03_01) - 1, 1).allowed);
  EXPECT_TRUE(fixed_window_decide(p, s, at(k2026_03_01), 1).allowed);
}

TEST(FixedWindowCalendar, YearsAndMondayWeeks) {
  const auto y = calendar(std::chrono::hours(24 * 365));
  FixedWindowState s;
  fixed_window_decide(y, s, at(k2027_01_01) - kSec, 2);
  EXPECT_EQ(fixed_window_decide(y, s, at(k2027_01_01) - kSec, 1).retry_after, Nanos{kSec});

  const auto w = calendar(std::chrono::hours(24 * 7));
  ASSERT_EQ(w.calendar, Calendar::kWeek);
  FixedWindowState ws;
  // 2026-02-11 was a Wednesday; its week started on Monday 2026-02-09.
  fixed_window_decide(w, ws, at(k2026_02_01 + 10, 12), 2);
  EXPECT_EQ(ws.start_ns, at(k2026_02_01 + 8));
  EXPECT_EQ(fixed_window_decide(w, ws, at(k2026_02_01 + 10, 12), 1).retry_after,
            Nanos{at(k2026_02_01 + 15) - at(k2026_02_01 + 10, 12)});
}

TEST(FixedWindowCalendar, OnlyForFixedWindowsOfCalendarLength) {
  LimitSpec s{.algorithm = Algorithm::kFixedWindow,
              .limit = 2,
              .window = std::chrono::hours(24 * 31),
              .align = Align::kCalendar};
  ASSERT_EQ(validate(s).size(), 1u);
  EXPECT_EQ(validate(s)[0].param, "align");
  s.algorithm = Algorithm::kSlidingWindow;
  s.window = std::chrono::hours(24);
  ASSERT_EQ(validate(s).size(), 1u);
  EXPECT_EQ(validate(s)[0].message, "calendar alignment is for fixed_window only, not sliding_window");
}

}  // namespace
}  // namespace rk::core
