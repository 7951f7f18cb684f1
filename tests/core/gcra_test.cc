#include "core/gcra.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "support/test_util.h"

namespace rk::core {
namespace {

using namespace rk::test;

GcraParams params(Algorithm a, double limit, double window_s, double burst) {
  return gcra_params(LimitSpec{.algorithm = a, .limit = limit, .window = Nanos{sec(window_s)}, .burst = burst});
}

// redis-cell: CL.THROTTLE key 15 30 60 -> limit 16, then 15, 14, ... remaining; one token every 2 s.
TEST(Gcra, RedisCellReply) {
  const auto p = params(Algorithm::kGcra, 30, 60, 15);
  GcraState s;
  Decision d = gcra_decide(p, s, 0, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 16);
  EXPECT_EQ(d.remaining, 15);
  EXPECT_EQ(d.retry_after, Nanos{0});
  EXPECT_EQ(d.reset_after, Nanos{2 * kSec});
  for (int i = 0; i < 15; ++i) d = gcra_decide(p, s, 0, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, Nanos{32 * kSec});
  d = gcra_decide(p, s, 0, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos{2 * kSec});
  EXPECT_EQ(d.reset_after, Nanos{32 * kSec});
  // One emission interval later exactly one more fits.
  EXPECT_TRUE(gcra_decide(p, s, 2 * kSec, 1).allowed);
  EXPECT_FALSE(gcra_decide(p, s, 2 * kSec, 1).allowed);
}

TEST(Gcra, CostsSpendSeveralIntervals) {
  const auto p = params(Algorithm::kGcra, 10, 1, 9);  // 10 at once, one every 100 ms
  GcraState s;
  EXPECT_TRUE(gcra_decide(p, s, 0, 7).allowed);
  Decision d = gcra_decide(p, s, 0, 4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 3);
  EXPECT_EQ(d.retry_after, Nanos{100'000'000});
  EXPECT_TRUE(gcra_decide(p, s, 100'000'000, 4).allowed);
}

TEST(Gcra, CostAboveCapacityNeverPasses) {
  const auto p = params(Algorithm::kGcra, 10, 1, 4);
  GcraState s;
  const Decision d = gcra_decide(p, s, 0, 6);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, kNever);
  EXPECT_EQ(s.tat_ns, kMinI64);  // nothing spent
}

TEST(Gcra, SteadyRateAtTheEmissionInterval) {
  const auto p = params(Algorithm::kGcra, 5, 1, 0);  // one every 200 ms, no burst
  GcraState s;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(gcra_decide(p, s, i * 200'000'000LL, 1).allowed) << i;
    EXPECT_FALSE(gcra_decide(p, s, i * 200'000'000LL + 199'999'999, 1).allowed) << i;
  }
}

TEST(Gcra, ExtremeCostsAndClocksSaturate) {
  const auto p = params(Algorithm::kGcra, 1, 1, 3);
  GcraState s;
  const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
  Decision d = gcra_decide(p, s, kMaxI64, huge);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, kNever);
  d = gcra_decide(p, s, kMinI64, 1);
  EXPECT_TRUE(d.allowed);
  d = gcra_decide(p, s, kMaxI64, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_GE(d.reset_after.count(), 0);
}

// nginx limit_req rate=1r/s burst=3 (no nodelay): 4 requests at once pass with delays 0, 1, 2, 3 s; the 5th is
// refused until one has left the queue.
// `remaining` is floor((tau - (TAT - now)) / T) exactly at every scale, from a nanosecond's interval to a year's,
// with tolerances up to the end of the range.
TEST(Gcra, RemainingIsExactlyTheWholeIntervalsLeft) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200'000; ++i) {
    GcraParams p;
    p.interval_ns = static_cast<std::int64_t>(rng() >> (1 + rng() % 63)) + 1;
    p.tolerance_ns = sat_mul(rng() >> (rng() % 64), p.interval_ns);
    p.limit = 1;
    p.per_interval = Divider(static_cast<std::uint64_t>(p.interval_ns));  // as gcra_params sets it
    GcraState s{.tat_ns = static_cast<std::int64_t>(rng() >> (1 + rng() % 63))};
    const std::int64_t now = static_cast<std::int64_t>(rng() >> (1 + rng() % 63));
    const GcraState before = s;
    const Decision d = gcra_decide(p, s, now, rng() % 3);
    const std::int64_t room = sat_sub(p.tolerance_ns, d.reset_after.count());
    ASSERT_EQ(d.remaining, room > 0 ? static_cast<double>(room / p.interval_ns) : 0.0)
        << "T " << p.interval_ns << " tau " << p.tolerance_ns << " tat " << before.tat_ns << " now " << now;
  }
}

// The precomputed division `remaining` uses equals the hardware's for divisors and dividends at every scale: ones,
// powers of two and their neighbours, the ends of the range, and random ones.
TEST(Divider, EqualsDivisionEverywhere) {
  std::vector<std::uint64_t> edges{1, 2, 3, 5, 7, 10, 641, 1000, 6700417, kMaxI64, ~std::uint64_t{0}};
  for (int b = 1; b < 64; ++b) {
    for (const std::uint64_t x : {(std::uint64_t{1} << b) - 1, std::uint64_t{1} << b, (std::uint64_t{1} << b) + 1}) {
      edges.push_back(x);
    }
  }
  std::mt19937_64 rng(18);
  for (const std::uint64_t d : edges) {
    const Divider div(d);
    for (const std::uint64_t n : edges) ASSERT_EQ(div.divide(n), n / d) << n << " / " << d;
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t n = rng() >> (rng() % 64);
      ASSERT_EQ(div.divide(n), n / d) << n << " / " << d;
    }
  }
  for (int i = 0; i < 200'000; ++i) {
    const std::uint64_t d = (rng() >> (rng() % 64)) | 1u, n = rng() >> (rng() % 64);
    ASSERT_EQ(Divider(d).divide(n), n / d) << n << " / " << d;
  }
}

TEST(LeakyQueue, DelaysInsteadOfRefusing) {
  const auto p = params(Algorithm::kLeakyQueue, 1, 1, 3);
  GcraState s;
  for (int i = 0; i < 4; ++i) {
    const Decision d = leaky_queue_decide(p, s, 0, 1);
    EXPECT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.delay, Nanos{i * kSec}) << i;
    EXPECT_EQ(d.remaining, 3 - i) << i;
  }
  Decision d = leaky_queue_decide(p, s, 0, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.delay, Nanos{0});
  EXPECT_EQ(d.retry_after, Nanos{kSec});
  EXPECT_EQ(d.reset_after, Nanos{4 * kSec});
  d = leaky_queue_decide(p, s, kSec, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, Nanos{3 * kSec});
  // After the queue has drained, no delay at all.
  d = leaky_queue_decide(p, s, 100 * kSec, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, Nanos{0});
}

TEST(LeakyQueue, OutflowNeverExceedsTheRate) {
  const auto p = params(Algorithm::kLeakyQueue, 10, 1, 20);
  GcraState s;
  std::int64_t last_departure = kMinI64;
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t now = i * 10'000'000LL;  // 100/s offered against 10/s
    const Decision d = leaky_queue_decide(p, s, now, 1);
    if (!d.allowed) continue;
    ++admitted;
    const std::int64_t departure = now + d.delay.count();
    if (last_departure != kMinI64) {
      EXPECT_GE(departure - last_departure, 100'000'000);
    }
    last_departure = departure;
  }
  EXPECT_EQ(admitted, 21 + 99);  // the first burst fills the queue, then one per 100 ms over 9.99 s
}

}  // namespace
}  // namespace rk::core
