// Reserve and settle (ratekeeper/limiter.h; docs/algorithms.md, "Reserve and settle"): a settle leaves the key as
// a check of the actual amount would have, the refund never giving more than the reservation took and an overdraw
// recorded as a debt; a bad id or amount changes nothing; concurrent clients are accounted exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "ratekeeper/limiter.h"
#include "support/test_util.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec spec_of(Algorithm a, bool count_refused = false) { return test::ten_a_second(a, count_refused); }

const Nanos t0{10s};  // the start of a window

// The two keys answer alike from `from` for two seconds (every 50 ms, for costs 0, 1 and 4). `owing`: `want` has
// count_refused and `got` not, so a refused peek of cost above 0 answers there as if its own cost were owed: beyond
// `allowed`, the answers are compared for looks (cost 0) alone.
void expect_same(const Limiter& got, const Limiter& want, Nanos from, bool owing = false) {
  for (Nanos t = from; t < from + 2s; t += 50ms) {
    for (std::uint64_t cost : {0, 1, 4}) {
      const Decision g = got.peek_at("k", t, cost), w = want.peek_at("k", t, cost);
      EXPECT_EQ(g.allowed, w.allowed) << "at " << (t - t0).count() << " ns, cost " << cost;
      if (owing && cost > 0) continue;
      EXPECT_NEAR(g.remaining, w.remaining, 1e-6) << "at " << (t - t0).count() << " ns, cost " << cost;
      EXPECT_NEAR(static_cast<double>(g.retry_after.count()), static_cast<double>(w.retry_after.count()), 1e3)
          << "at " << (t - t0).count() << " ns, cost " << cost;
    }
  }
}

class Settle : public ::testing::TestWithParam<Algorithm> {};

// A reservation of 5, a check of 3 later, and the reservation settled at 2 then: the key answers as one charged 2
// at t0 and 3 later: the refund gave back the 3 not used, and nothing of the other check's.
TEST_P(Settle, ARefundGivesBackWhatWasNotUsedAndNoMore) {
  for (const Nanos later : {Nanos{0}, Nanos{300ms}, Nanos{900ms}}) {
    Limiter l(spec_of(GetParam())), want(spec_of(GetParam()));
    const Reservation r = l.reserve_at("k", t0, 5);
    ASSERT_TRUE(r.decision.allowed);
    ASSERT_EQ(r.id.size(), 32u);
    l.check_at("k", t0 + later, 3);
    want.check_at("k", t0, 2);
    want.check_at("k", t0 + later, 3);
    const Settlement s = l.settle_at("k", r.id, t0 + later, 2);
    ASSERT_TRUE(s.settled);
    EXPECT_EQ(s.reserved, 5u);
    EXPECT_TRUE(s.decision.allowed);
    expect_same(l, want, t0 + later);
  }
}

// gcra and the buckets attribute what has drained to the oldest charge first: a reservation half drained when
// another charge was queued behind it gives back at most what is left of it, never the other charge's share.
TEST(Settle, ARefundInTheScheduleGivesBackAtMostWhatIsLeftOfTheReservation) {
  for (const Algorithm a : {Algorithm::kGcra, Algorithm::kLeakyQueue, Algorithm::kTokenBucket}) {
    Limiter l(spec_of(a)), at_most(spec_of(a));
    const Reservation r = l.reserve_at("k", t0, 5);  // held until t0 + 0.5 s
    l.check_at("k", t0, 3);                          // queued behind it, until t0 + 0.8 s
    ASSERT_TRUE(l.settle_at("k", r.id, t0 + 300ms, 2).settled);
    // 0.3 s of the reservation has drained: 0.2 s (2 requests) of it is left to give back, not the 3 unused.
    at_most.check_at("k", t0, 6);
    expect_same(l, at_most, t0 + 300ms);
  }
}

// Settled at 0 after the whole reservation has drained or its window has turned: nothing to give back, and the
// key is not made any fresher than a fresh one (a refund never goes below empty or into another window's count).
TEST_P(Settle, ARefundAfterTheChargeHasGoneGivesNothing) {
  Limiter l(spec_of(GetParam())), want(spec_of(GetParam()));
  const Reservation r = l.reserve_at("k", t0, 10);
  ASSERT_TRUE(r.decision.allowed);
  l.check_at("k", t0 + 2500ms, 4);
  want.check_at("k", t0 + 2500ms, 4);
  ASSERT_TRUE(l.settle_at("k", r.id, t0 + 2500ms, 0).settled);
  if (GetParam() != Algorithm::kEarrrl) expect_same(l, want, t0 + 2500ms);  // earrrl: the decayed rest is refunded
}

// actual above the estimate: the difference is charged even past what is left, as a debt (count_refused's, here on
// a spec without it): the key answers as one with count_refused that took 10 and then a debit of 5.
TEST_P(Settle, AnOverdrawIsRecordedAsADebt) {
  Limiter l(spec_of(GetParam())), want(spec_of(GetParam(), true));
  const Reservation r = l.reserve_at("k", t0, 10);
  ASSERT_TRUE(r.decision.allowed);
  want.check_at("k", t0, 10);
  const Decision debit = want.check_at("k", t0, 5);
  const Settlement s = l.settle_at("k", r.id, t0, 15);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.decision.allowed, debit.allowed) << "the answer to the overdraw is the debit's";
  if (GetParam() != Algorithm::kEarrrl) {
    EXPECT_FALSE(s.decision.allowed) << "the settle overdrew";
    EXPECT_FALSE(l.peek_at("k", t0 + Nanos{1}, 0).allowed) << "the debt was dropped";
  }
  expect_same(l, want, t0, true);
}

INSTANTIATE_TEST_SUITE_P(Every, Settle, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& p) { return std::string(algorithm_name(p.param)); });

TEST(Reserve, UnknownExpiredSettledOrAnotherKeysIdChangesNothing) {
  Limiter l(spec_of(Algorithm::kFixedWindow));
  const Reservation r = l.reserve_at("k", t0, 6, 1s);
  const Reservation other = l.reserve_at("other", t0, 6, 1s);
  ASSERT_TRUE(r.decision.allowed);
  ASSERT_TRUE(other.decision.allowed);
  EXPECT_NE(r.id, other.id);
  for (const std::string_view id : {std::string_view(""), std::string_view("not hex"),
                                    std::string_view("00000000000000000000000000000000"), std::string_view(other.id)}) {
    EXPECT_FALSE(l.settle_at("k", id, t0, 0).settled) << id;
  }
  EXPECT_EQ(l.peek_at("k", t0, 0).remaining, 4);
  EXPECT_EQ(l.peek_at("other", t0, 0).remaining, 4) << "another key's reservation was settled";
  EXPECT_TRUE(l.settle_at("other", other.id, t0, 1).settled) << "a wrong key's settle took it away";
  EXPECT_EQ(l.peek_at("other", t0, 0).remaining, 9);
  EXPECT_FALSE(l.settle_at("other", other.id, t0, 0).settled) << "settled twice";
  // Expired: settled as reserved; a settle after it changes nothing.
  EXPECT_FALSE(l.settle_at("k", r.id, t0 + 1s, 0).settled);
  EXPECT_EQ(l.peek_at("k", t0 + 999ms, 0).remaining, 4);
}

// A refused reservation charges nothing, even with count_refused (which a refused check of the same cost obeys).
TEST(Reserve, ARefusedReservationChargesNothing) {
  for (const Algorithm a : kAllAlgorithms) {
    Limiter l(spec_of(a, true));
    ASSERT_TRUE(l.reserve_at("k", t0, 10).decision.allowed);
    const Decision before = l.peek_at("k", t0, 0);
    for (int i = 0; i < 3; ++i) {
      const Reservation r = l.reserve_at("k", t0, 10);
      if (a == Algorithm::kEarrrl && r.decision.allowed) continue;  // earrrl tests the rate before the attempt
      EXPECT_FALSE(r.decision.allowed) << algorithm_name(a);
      EXPECT_TRUE(r.id.empty());
    }
    if (a == Algorithm::kEarrrl) continue;
    EXPECT_EQ(l.peek_at("k", t0, 0).remaining, before.remaining) << algorithm_name(a);
    EXPECT_EQ(l.peek_at("k", t0, 0).retry_after, before.retry_after) << algorithm_name(a);
  }
}

TEST(Reserve, AbsurdAmountsAndTtlsAreRefusedNamingThemAndChangeNothing) {
  Limiter l(spec_of(Algorithm::kFixedWindow, true));
  const std::uint64_t absurd = kMaxReservationAmount + 1;
  try {
    l.reserve_at("k", t0, absurd);
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("estimate"), std::string::npos) << e.what();
  }
  EXPECT_THROW(l.reserve_at("k", t0, 1, Nanos{0}), InvalidArgument);
  EXPECT_THROW(l.reserve_at("k", t0, 1, kMaxReservationTtl + Nanos{1}), InvalidArgument);
  const Reservation r = l.reserve_at("k", t0, 4);
  try {
    l.settle_at("k", r.id, t0, absurd);
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("actual"), std::string::npos) << e.what();
  }
  EXPECT_EQ(l.peek_at("k", t0, 0).remaining, 6) << "a refused request changed the key";
  EXPECT_TRUE(l.settle_at("k", r.id, t0, kMaxReservationAmount).settled) << "2^53 itself is allowed";
}

// Reservations held at once are bounded by the store's max_keys (about; 16 shards of max_keys / 16 + 1): past it a
// reserve is refused and charges nothing, until reservations expire.
TEST(Reserve, ReservationsHeldAreBounded) {
  Limiter l({.algorithm = Algorithm::kFixedWindow, .limit = 1000, .window = Nanos{60s}}, {.max_keys = 16});
  int held = 0;
  for (int i = 0; i < 200; ++i) held += l.reserve_at("k", t0, 1, 5s).decision.allowed ? 1 : 0;
  EXPECT_GE(held, 16);
  EXPECT_LE(held, 32);
  EXPECT_EQ(l.peek_at("k", t0, 0).remaining, 1000 - held) << "a refused reserve charged";
  EXPECT_TRUE(l.reserve_at("k", t0 + 5s, 1).decision.allowed) << "expired reservations still held their places";
}

// 50 clients reserving and settling at once on one key (time frozen within one window): every refund and every
// overdraw is accounted exactly once, and what they take is at most the limit plus the overdraws of the
// reservations in flight (each at most 1 here; docs/algorithms.md, "Reserve and settle").
TEST(Reserve, FiftyConcurrentClientsNeverTakeMoreThanTheLimitPlusTheOverdrawsInFlight) {
  for (const int max_overdraw : {0, 1}) {
    auto clock = std::make_shared<ManualClock>(t0);
    Limiter l({.algorithm = Algorithm::kFixedWindow, .limit = 1000, .window = Nanos{60s}}, {}, clock);
    std::atomic<std::uint64_t> taken{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 50; ++c) {
      clients.emplace_back([&, c] {
        std::mt19937 rng(static_cast<unsigned>(c));
        for (int i = 0; i < 200; ++i) {
          const std::uint64_t estimate = 1 + rng() % 10;
          const Reservation r = l.reserve("k", estimate);
          if (!r.decision.allowed) continue;
          const std::uint64_t actual = rng() % (estimate + 1 + static_cast<std::uint64_t>(max_overdraw));
          taken += actual;
          EXPECT_TRUE(l.settle("k", r.id, actual).settled);
        }
      });
    }
    for (auto& t : clients) t.join();
    EXPECT_LE(taken.load(), 1000u + 50u * static_cast<std::uint64_t>(max_overdraw));
    EXPECT_GE(taken.load(), 500u) << "the refunds were not given back";
    // Exact: the window's count is what was taken, nothing refunded twice or lost.
    const Decision d = l.peek("k", 0);
    EXPECT_EQ(d.remaining, taken.load() >= 1000 ? 0.0 : static_cast<double>(1000 - taken.load()));
    EXPECT_EQ(d.allowed, taken.load() <= 1000);
  }
}

}  // namespace
}  // namespace rk
