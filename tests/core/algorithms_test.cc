// Each algorithm's absorb (core/algorithms.h): hits recorded elsewhere, counted as if admitted here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/algorithms.h"
#include "core/registry.h"

namespace rk::core {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kT0 = 1'000'000'000'000;

LimitSpec spec_for(Algorithm a) {
  LimitSpec s{.algorithm = a, .limit = 10, .window = Nanos{1s}};
  switch (a) {
    case Algorithm::kEarrrl: s.half_life = Nanos{2s}; break;
    case Algorithm::kGcra:
    case Algorithm::kLeakyQueue: s.burst = 9; break;
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: s.capacity = 10; break;
    default: break;
  }
  return s;
}

// Exactly, but for earrrl's doubles: n + 1 + 1 + 1 and n + 3 may round apart in the last place.
bool same(const Decision& a, const Decision& b) {
  const auto near = [](double x, double y) { return std::abs(x - y) <= 1e-9 * std::max(1.0, std::abs(x)); };
  const auto near_ns = [](Nanos x, Nanos y) { return std::abs((x - y).count()) <= 2; };
  return a.allowed == b.allowed && near(a.remaining, b.remaining) && near_ns(a.retry_after, b.retry_after) &&
         near_ns(a.reset_after, b.reset_after) && a.delay == b.delay;
}

class Absorb : public ::testing::TestWithParam<Algorithm> {};

// Absorbing k hits leaves the state k admitted requests of cost 1 at the same time would: every later answer agrees.
TEST_P(Absorb, IsWhatAdmittingThemWouldLeave) {
  const LimitSpec spec = spec_for(GetParam());
  with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) {
    for (std::uint64_t k : {0, 1, 4, 7}) {
      typename Algo::State absorbed, decided;
      Algo::decide(p, absorbed, kT0, 1);
      Algo::decide(p, decided, kT0, 1);
      Algo::absorb(p, absorbed, kT0 + 1000, k);
      for (std::uint64_t i = 0; i < k; ++i) ASSERT_TRUE(Algo::decide(p, decided, kT0 + 1000, 1).allowed);
      for (std::int64_t later : {kT0 + 1000, kT0 + 50'000'000, kT0 + 700'000'000, kT0 + 3'000'000'000}) {
        typename Algo::State a = absorbed, d = decided;
        ASSERT_TRUE(same(Algo::decide(p, a, later, 1), Algo::decide(p, d, later, 1))) << "k " << k << " at " << later;
      }
    }
  });
}

// Absorbed hits are not tested against the limit: past it, the key refuses until they have drained or expired.
TEST_P(Absorb, PastTheLimitRefuses) {
  const LimitSpec spec = spec_for(GetParam());
  with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) {
    typename Algo::State s;
    Algo::absorb(p, s, kT0, 100);  // earrrl saturates at ~29 here
    typename Algo::State copy = s;
    EXPECT_FALSE(Algo::decide(p, copy, kT0 + 1, 1).allowed);
    EXPECT_FALSE(Algo::forgettable(p, s, kT0 + 1));
    // Huge counts saturate rather than wrap into room.
    Algo::absorb(p, s, kT0 + 2, std::numeric_limits<std::uint64_t>::max());
    Algo::absorb(p, s, kT0 + 3, std::numeric_limits<std::uint64_t>::max());
    copy = s;
    EXPECT_FALSE(Algo::decide(p, copy, kT0 + 4, 1).allowed);
  });
}

TEST_P(Absorb, NothingAbsorbedChangesNothing) {
  const LimitSpec spec = spec_for(GetParam());
  with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) {
    typename Algo::State s;
    Algo::absorb(p, s, kT0, 0);
    EXPECT_TRUE(Algo::forgettable(p, s, kT0));
  });
}

TEST(Absorb, SlidingLogStaysWithinItsLimitOfEntries) {
  const auto p = window_params(spec_for(Algorithm::kSlidingLog));
  SlidingLogState s;
  for (int i = 0; i < 1000; ++i) sliding_log_absorb(p, s, kT0 + i * 1'000'000, 1);
  EXPECT_LE(s.size(), 10u);
  EXPECT_FALSE(sliding_log_decide(p, s, kT0 + 1'000'000'000 - 1, 0).allowed);
}

TEST(HitsRecorded, AdmittedAlwaysRefusedWhereRefusalsCount) {
  Decision refused{.allowed = false}, admitted{.allowed = true};
  const LimitSpec gcra = spec_for(Algorithm::kGcra);
  const LimitSpec earrrl = spec_for(Algorithm::kEarrrl);
  LimitSpec fixed = spec_for(Algorithm::kFixedWindow);
  EXPECT_EQ(hits_recorded(gcra, admitted, 3), 3u);
  EXPECT_EQ(hits_recorded(gcra, refused, 3), 0u);
  EXPECT_EQ(hits_recorded(earrrl, refused, 3), 3u);  // earrrl counts refusals by default
  fixed.count_refused = true;
  EXPECT_EQ(hits_recorded(fixed, refused, 2), 2u);
  fixed.count_refused = false;
  EXPECT_EQ(hits_recorded(fixed, refused, 2), 0u);
}

INSTANTIATE_TEST_SUITE_P(Every, Absorb,
                         ::testing::Values(Algorithm::kEarrrl, Algorithm::kGcra, Algorithm::kLeakyQueue,
                                           Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
                                           Algorithm::kSlidingLog, Algorithm::kSlidingWindow),
                         [](const auto& i) { return std::string(algorithm_name(i.param)); });

}  // namespace
}  // namespace rk::core
