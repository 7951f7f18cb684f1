// One test per kind of bad parameter, each checked against the message a user sees.
#include "ratekeeper/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ratekeeper/limiter.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec earrrl() { return {.algorithm = Algorithm::kEarrrl, .limit = 0.5, .half_life = Nanos{10s}}; }

// The single error the spec has, as "param: message".
std::string only_error(const LimitSpec& spec) {
  const auto errors = validate(spec);
  if (errors.size() != 1) return "expected one error, got " + std::to_string(errors.size());
  return errors[0].param + ": " + errors[0].message;
}

TEST(AlgorithmNames, RoundTrip) {
  for (Algorithm a : kAllAlgorithms) EXPECT_EQ(parse_algorithm(algorithm_name(a)), a);
  EXPECT_EQ(parse_algorithm("EARRRL"), std::nullopt);
  EXPECT_EQ(parse_algorithm("token-bucket"), std::nullopt);
  EXPECT_EQ(algorithm_name(Algorithm::kSlidingWindow), "sliding_window");
}

TEST(Validate, SoundSpecsPass) {
  EXPECT_TRUE(validate(earrrl()).empty());
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec s{.algorithm = a, .limit = 100, .window = Nanos{60s}};
    if (a == Algorithm::kEarrrl) s.half_life = Nanos{10s};
    EXPECT_TRUE(validate(s).empty()) << algorithm_name(a);
  }
}

TEST(Validate, ZeroLimit) {
  auto s = earrrl();
  s.limit = 0;
  EXPECT_EQ(only_error(s), "limit: limit must be a number greater than 0 (got 0)");
}

TEST(Validate, NegativeLimit) {
  auto s = earrrl();
  s.limit = -1;
  EXPECT_EQ(only_error(s), "limit: limit must be a number greater than 0 (got -1)");
}

TEST(Validate, NanAndInfiniteLimit) {
  auto s = earrrl();
  s.limit = std::nan("");
  EXPECT_EQ(only_error(s), "limit: limit must be a number greater than 0 (got nan)");
  s.limit = std::numeric_limits<double>::infinity();
  EXPECT_EQ(only_error(s), "limit: limit must be a number greater than 0 (got inf)");
}

TEST(Validate, AbsurdLimit) {
  auto s = earrrl();
  s.limit = 1e13;
  EXPECT_EQ(only_error(s), "limit: limit 10000000000000 is absurd: at most 1000000000000");
}

TEST(Validate, FractionalCountLimit) {
  LimitSpec s{.algorithm = Algorithm::kFixedWindow, .limit = 2.5};
  EXPECT_EQ(only_error(s), "limit: limit of fixed_window must be a whole number of requests (got 2.5)");
}

TEST(Validate, SlidingLogTooLarge) {
  LimitSpec s{.algorithm = Algorithm::kSlidingLog, .limit = 2e6};
  EXPECT_EQ(only_error(s).rfind("limit: limit 2000000 is too large for sliding_log", 0), 0u) << only_error(s);
}

TEST(Validate, SlidingWindowLimitBeyondItsCounts) {
  LimitSpec s{.algorithm = Algorithm::kSlidingWindow, .limit = 5e9, .window = Nanos{1}};
  EXPECT_EQ(only_error(s),
            "limit: limit 5000000000 is too large for sliding_window with a window of 0.000000001s: "
            "at most 4294967295 (a window under 65.536us counts in fewer bits)");
  s.limit = 4294967295;
  EXPECT_TRUE(validate(s).empty());
  s.limit = 1e12;  // kMaxLimit: every window from 65.536 us holds it
  s.window = Nanos{65'536};
  EXPECT_TRUE(validate(s).empty());
}

TEST(Validate, ZeroWindow) {
  LimitSpec s{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = Nanos{0}};
  EXPECT_EQ(only_error(s), "window: window must be longer than 0 (got 0ns)");
}

TEST(Validate, AbsurdWindow) {
  LimitSpec s{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = kMaxDuration + Nanos{1}};
  EXPECT_EQ(only_error(s), "window: window of 3153600000.000000001s is absurd: at most 100 years");
}

TEST(Validate, MissingHalfLife) {
  LimitSpec s{.algorithm = Algorithm::kEarrrl, .limit = 1};
  EXPECT_EQ(only_error(s),
            "half_life: earrrl needs half_life: how long the estimate takes to halve when requests stop");
}

TEST(Validate, ZeroHalfLife) {
  auto s = earrrl();
  s.half_life = Nanos{0};
  EXPECT_EQ(only_error(s), "half_life: half_life must be longer than 0 (got 0ns)");
}

TEST(Validate, HalfLifeOnOtherAlgorithm) {
  LimitSpec s{.algorithm = Algorithm::kGcra, .limit = 1, .half_life = Nanos{1s}};
  EXPECT_EQ(only_error(s), "half_life: half_life is a parameter of earrrl, not of gcra");
}

TEST(Validate, BadBurst) {
  LimitSpec s{.algorithm = Algorithm::kGcra, .limit = 1, .burst = -1};
  EXPECT_EQ(only_error(s), "burst: burst must be a whole number >= 0 (got -1)");
  s.burst = 1.5;
  EXPECT_EQ(only_error(s), "burst: burst must be a whole number >= 0 (got 1.5)");
  s.burst = std::nan("");
  EXPECT_EQ(only_error(s), "burst: burst must be a whole number >= 0 (got nan)");
  s.algorithm = Algorithm::kFixedWindow;
  s.burst = 3;
  EXPECT_EQ(only_error(s), "burst: burst is a parameter of gcra and leaky_queue, not of fixed_window");
}

TEST(Validate, BadCapacity) {
  LimitSpec s{.algorithm = Algorithm::kTokenBucket, .limit = 1, .capacity = 0.5};
  EXPECT_EQ(only_error(s), "capacity: capacity must be a number >= 1, or no request could ever pass (got 0.5)");
  s.algorithm = Algorithm::kEarrrl;
  s.half_life = Nanos{1s};
  s.capacity = 3;
  EXPECT_EQ(only_error(s), "capacity: capacity is a parameter of token_bucket and leaky_bucket, not of earrrl");
}

TEST(Validate, CountRefusedOnWrongAlgorithm) {
  // Every algorithm takes it (a refused charge recorded as debt).
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec s{.algorithm = a, .limit = 1, .half_life = Nanos{1s}, .count_refused = true};
    if (a != Algorithm::kEarrrl) s.half_life.reset();
    EXPECT_TRUE(validate(s).empty()) << algorithm_name(a);
  }
}

TEST(Validate, RateBeyondNanosecondResolution) {
  LimitSpec s{.algorithm = Algorithm::kGcra, .limit = 1e10, .window = Nanos{1s}};
  EXPECT_EQ(only_error(s),
            "limit: limit 10000000000 per 1s is above one request a nanosecond, the finest interval gcra can keep");
}

TEST(Validate, BurstSpanningCenturies) {
  LimitSpec s{.algorithm = Algorithm::kLeakyQueue, .limit = 1, .window = Nanos{24h}, .burst = 1e9};
  EXPECT_EQ(only_error(s).rfind("burst: burst 1000000000 at one request every", 0), 0u) << only_error(s);
}

TEST(Validate, ReportsEveryProblemAtOnce) {
  LimitSpec s{.algorithm = Algorithm::kEarrrl, .limit = -3, .window = Nanos{0}, .burst = 2};
  const auto errors = validate(s);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].param, "limit");
  EXPECT_EQ(errors[1].param, "window");
  EXPECT_EQ(errors[2].param, "half_life");
  EXPECT_EQ(errors[3].param, "burst");
}

TEST(LimiterConstruction, ThrowsNamingTheParameter) {
  auto s = earrrl();
  s.half_life = Nanos{0};
  try {
    Limiter limiter(s);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "half_life must be longer than 0 (got 0ns)");
  }
}

TEST(LimiterConstruction, RejectsBadStoreOptions) {
  EXPECT_THROW(Limiter(earrrl(), StoreOptions{.max_keys = 0}), InvalidArgument);
  EXPECT_THROW(Limiter(earrrl(), StoreOptions{.max_key_bytes = 0}), InvalidArgument);
  EXPECT_THROW(Limiter(earrrl(), StoreOptions{.shards = 1'000'000}), InvalidArgument);
}

}  // namespace
}  // namespace rk
