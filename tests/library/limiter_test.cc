#include "ratekeeper/limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec fixed(double limit, Nanos window = 1s) {
  return {.algorithm = Algorithm::kFixedWindow, .limit = limit, .window = window};
}

TEST(Limiter, UsesTheInjectedClock) {
  auto clock = std::make_shared<ManualClock>(Nanos{0});
  Limiter limiter(fixed(2), {}, clock);
  EXPECT_TRUE(limiter.check("k").allowed);
  EXPECT_TRUE(limiter.check("k").allowed);
  EXPECT_FALSE(limiter.check("k").allowed);
  clock->advance(1s);
  EXPECT_TRUE(limiter.check("k").allowed);
  EXPECT_EQ(&limiter.clock(), clock.get());
}

TEST(Limiter, KeysAreIndependent) {
  Limiter limiter(fixed(1));
  EXPECT_TRUE(limiter.check_at("a", Nanos{0}).allowed);
  EXPECT_TRUE(limiter.check_at("b", Nanos{0}).allowed);
  EXPECT_FALSE(limiter.check_at("a", Nanos{0}).allowed);
}

TEST(Limiter, PeekChangesNothing) {
  Limiter limiter(fixed(3));
  limiter.check_at("k", Nanos{0});
  const Decision p = limiter.peek_at("k", Nanos{0});
  EXPECT_TRUE(p.allowed);
  EXPECT_EQ(p.remaining, 1);  // what check would say: after it, 1 left
  EXPECT_EQ(limiter.peek_at("k", Nanos{0}, 0).remaining, 2);
  EXPECT_EQ(limiter.check_at("k", Nanos{0}).remaining, 1);
  EXPECT_TRUE(limiter.peek_at("absent", Nanos{0}).allowed);
  EXPECT_EQ(limiter.stats().keys, 1u);  // peek does not create keys
}

TEST(Limiter, ResetForgetsAKey) {
  Limiter limiter(fixed(1));
  limiter.check_at("k", Nanos{0});
  EXPECT_FALSE(limiter.check_at("k", Nanos{0}).allowed);
  EXPECT_TRUE(limiter.reset("k"));
  EXPECT_FALSE(limiter.reset("k"));
  EXPECT_TRUE(limiter.check_at("k", Nanos{0}).allowed);
}

TEST(Limiter, OversizedKeyIsRefusedWithAClearError) {
  Limiter limiter(fixed(1), StoreOptions{.max_key_bytes = 16});
  EXPECT_NO_THROW(limiter.check_at(std::string(16, 'k'), Nanos{0}));
  try {
    limiter.check_at(std::string(17, 'k'), Nanos{0});
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "key is 17 bytes, above the limit of 16 (StoreOptions::max_key_bytes)");
  }
  EXPECT_EQ(limiter.stats().keys, 1u);  // nothing stored for the refused key
}

// Only keys whose state is back to fresh are swept: an EARRRL abuser is kept however long ago the window was.
TEST(Limiter, TheEmptyKeyIsAKeyEvenWithANullView) {
  Limiter limiter(fixed(1));
  EXPECT_TRUE(limiter.check_at(std::string_view{}, Nanos{0}).allowed);  // data() == nullptr
  EXPECT_FALSE(limiter.check_at("", Nanos{0}).allowed);
  EXPECT_TRUE(limiter.check_at("x", Nanos{0}).allowed);
}

TEST(Limiter, SweepForgetsOnlyFreshKeys) {
  Limiter limiter({.algorithm = Algorithm::kEarrrl, .limit = 1, .half_life = Nanos{10s}});
  for (int i = 0; i < 100; ++i) limiter.check_at("abuser", Nanos{0});
  const Decision last = limiter.check_at("visitor", Nanos{0});
  const Decision abuser = limiter.peek_at("abuser", Nanos{0}, 0);
  EXPECT_LT(last.reset_after, abuser.reset_after);
  EXPECT_EQ(limiter.sweep_at(last.reset_after + Nanos{1}), 1u);
  EXPECT_EQ(limiter.stats().keys, 1u);
  EXPECT_GT(limiter.peek_at("abuser", last.reset_after + Nanos{1}, 0).reset_after, Nanos{0});  // still tracked
  EXPECT_EQ(limiter.sweep_at(abuser.reset_after + Nanos{1}), 1u);
  EXPECT_EQ(limiter.stats().keys, 0u);
  EXPECT_EQ(limiter.stats().forgotten, 2u);
}

// 4 threads x 10,000 attempts on one key of a fixed window of 1,000 admit exactly 1,000.
TEST(Limiter, ExactUnderThreads) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingLog, Algorithm::kSlidingWindow, Algorithm::kGcra,
                      Algorithm::kTokenBucket}) {
    LimitSpec spec{.algorithm = a, .limit = 1000, .window = Nanos{1h}};
    if (a == Algorithm::kGcra) spec.burst = 999;
    Limiter limiter(spec);
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 10'000; ++i) admitted += limiter.check_at("one", Nanos{0}).allowed ? 1 : 0;
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(admitted.load(), 1000) << algorithm_name(a);
  }
}

TEST(Limiter, MovesKeepState) {
  Limiter a(fixed(1));
  a.check_at("k", Nanos{0});
  Limiter b = std::move(a);
  EXPECT_FALSE(b.check_at("k", Nanos{0}).allowed);
  EXPECT_EQ(b.spec().limit, 1);
}

}  // namespace
}  // namespace rk
