// Debts: with count_refused, a charge beyond what is left is recorded (the AI-gateway debit sent after the
// response), refuses until it has drained, and is bounded (docs/algorithms.md, "Debts").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ratekeeper/limiter.h"
#include "support/test_util.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec debt_spec(Algorithm a) { return test::ten_a_second(a, true); }

const Nanos t0{10s};  // the start of a window

// When a look (cost 0, Envoy's hits_addend 0) is first allowed again after `debit` at t0, searched to the
// nanosecond up to `horizon`: the look at t - 1 ns is refused and the one at t allowed.
Nanos first_look_allowed(const Limiter& l, Nanos horizon) {
  Nanos lo{0}, hi = horizon;  // refused at t0 + lo (just after the debit), allowed at t0 + hi
  EXPECT_TRUE(l.peek_at("k", t0 + hi, 0).allowed);
  while (hi - lo > Nanos{1}) {
    const Nanos mid = lo + (hi - lo) / 2;
    (l.peek_at("k", t0 + mid, 0).allowed ? hi : lo) = mid;
  }
  return hi;
}

class Debt : public ::testing::TestWithParam<Algorithm> {};

// The measurement: a look, then a debit of 15 at 10/s. Each algorithm records it and stays refused until
// the debt of 5 has drained at the rate (buckets, GCRA), until the window's turn (windows, log), or the estimate
// has decayed (earrrl).
TEST_P(Debt, ADebitBeyondWhatIsLeftIsRecorded) {
  const Algorithm a = GetParam();
  Limiter l(debt_spec(a));
  EXPECT_TRUE(l.check_at("k", t0, 0).allowed);
  const Decision debit = l.check_at("k", t0, 15);
  // earrrl tests the estimate before the attempt, not its cost (docs/algorithms.md): the debit on a quiet key is
  // allowed, and the next attempts pay for it.
  EXPECT_EQ(debit.allowed, a == Algorithm::kEarrrl) << "the debit overdrew: OVER_LIMIT";
  EXPECT_FALSE(l.peek_at("k", t0 + Nanos{1}, 0).allowed) << "the debt was dropped";
  const Nanos back = first_look_allowed(l, Nanos{10s});
  switch (a) {
    case Algorithm::kGcra:
    case Algorithm::kLeakyQueue:
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: EXPECT_EQ(back, Nanos{500ms}); break;  // a debt of 5 at 10/s
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingLog:
      EXPECT_EQ(back, Nanos{1s});
      break;  // the window's turn
    // The next window, once 15 weighted by what is left of it floors to at most 10: 15 (W - e) / W < 11.
    case Algorithm::kSlidingWindow: EXPECT_EQ(back, Nanos{1s} + Nanos{266'666'667}); break;
    case Algorithm::kEarrrl: EXPECT_GT(back, Nanos{50ms}); break;  // 15 * ln 2 / 1 s, over 10/s for ln(1.04) / λ
  }
  // The debit's reset_after: the key is a fresh key's again then.
  EXPECT_TRUE(l.peek_at("k", t0 + debit.reset_after, 10).allowed || a == Algorithm::kEarrrl);
}

// A charge of cost 1 while a debt is owed is refused and (counted) adds to it, so the debt's answers stay honest:
// retry_after from the debit's own answer holds.
TEST_P(Debt, TheDebitsRetryAfterHolds) {
  const Algorithm a = GetParam();
  if (a == Algorithm::kEarrrl) GTEST_SKIP() << "earrrl's retry_after is checked in earrrl_test.cc";
  Limiter l(debt_spec(a));
  l.check_at("k", t0, 8);
  const Decision d = l.check_at("k", t0 + Nanos{100ms}, 5);
  ASSERT_FALSE(d.allowed);
  ASSERT_NE(d.retry_after, kNever);
  EXPECT_TRUE(l.peek_at("k", t0 + Nanos{100ms} + d.retry_after, 5).allowed);
  EXPECT_FALSE(l.peek_at("k", t0 + Nanos{100ms} + d.retry_after - Nanos{1}, 5).allowed);
}

// Bounded: one huge debit owes at most one limit (10) beyond what the key holds, so it refuses for at most one
// window more (a window and a half for the sliding window; earrrl's decays, a few dozen half-lives at most).
TEST_P(Debt, AHugeDebitOwesAtMostOneLimit) {
  const Algorithm a = GetParam();
  Limiter l(debt_spec(a));
  EXPECT_EQ(l.check_at("k", t0, std::uint64_t{1} << 53).allowed, a == Algorithm::kEarrrl);
  const Nanos back = first_look_allowed(l, Nanos{3600s});
  switch (a) {
    case Algorithm::kGcra:
    case Algorithm::kLeakyQueue:
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: EXPECT_EQ(back, Nanos{1s}); break;  // 20 owed, 10 may be held
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingLog: EXPECT_EQ(back, Nanos{1s}); break;
    case Algorithm::kSlidingWindow: EXPECT_EQ(back, Nanos{1450ms} + Nanos{1}); break;  // 20 (W - e) / W < 11
    case Algorithm::kEarrrl: EXPECT_LT(back, Nanos{60s}); break;
  }
}

// Without count_refused (the library's default but for earrrl), a refused charge changes nothing.
TEST_P(Debt, WithoutCountRefusedARefusedChargeChangesNothing) {
  const Algorithm a = GetParam();
  if (a == Algorithm::kEarrrl) GTEST_SKIP() << "earrrl's count_refused defaults to true";
  LimitSpec s = debt_spec(a);
  s.count_refused = false;
  Limiter l(s);
  EXPECT_FALSE(l.check_at("k", t0, 15).allowed);
  EXPECT_TRUE(l.peek_at("k", t0, 10).allowed);
}

// algorithms_common_test.cc's honesty on a random trace of checks and debits, with debts: a refused check is
// allowed at now + retry_after and (but earrrl) not a nanosecond before; at now + reset_after the key answers as a
// fresh one; and a clock stepped back never admits what the latest time refuses.
TEST_P(Debt, DecisionsStayHonestWithDebts) {
  const Algorithm a = GetParam();
  Limiter l(debt_spec(a));
  std::mt19937_64 rng(33);
  std::int64_t now = 1'000'000'000'000, latest = now;
  int refused = 0, allowed = 0;
  for (int i = 0; i < 5000; ++i) {
    now += static_cast<std::int64_t>(rng() % 400'000'000);  // ~5 a second, some of them debits: ~8 hits
    const bool back = rng() % 20 == 0;                      // a step back of up to 50 ms
    const std::int64_t t = back ? now - static_cast<std::int64_t>(rng() % 50'000'000) : now;
    const std::uint64_t cost = rng() % 20 == 0 ? 5 + rng() % 20 : rng() % 10 == 0 ? 0 : 1;
    const Decision at_latest = l.peek_at("k", Nanos{std::max(t, latest)}, cost);
    const Decision d = l.check_at("k", Nanos{t}, cost);
    latest = std::max(latest, t);
    ASSERT_FALSE(d.allowed && !at_latest.allowed) << i;
    ASSERT_TRUE(std::isfinite(d.remaining) && d.remaining >= 0) << i;
    if (d.allowed) {
      ++allowed;
    } else {
      ++refused;
      if (d.retry_after != kNever) {
        ASSERT_TRUE(l.peek_at("k", Nanos{t} + d.retry_after, cost).allowed) << i;
        if (a != Algorithm::kEarrrl && !back) {
          ASSERT_FALSE(l.peek_at("k", Nanos{t} + d.retry_after - Nanos{1}, cost).allowed) << i;
        }
      }
    }
    const Nanos later = Nanos{t} + d.reset_after;
    ASSERT_EQ(l.peek_at("k", later, 1).allowed, l.peek_at("fresh", later, 1).allowed) << i;
  }
  EXPECT_GT(allowed, 500);
  EXPECT_GT(refused, 50);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, Debt, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& p) { return std::string(algorithm_name(p.param)); });

}  // namespace
}  // namespace rk
