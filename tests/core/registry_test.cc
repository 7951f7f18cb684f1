// core/registry.h is the one place that says which parameters an algorithm takes: validation must agree with it
// for every algorithm and parameter, and the names must round-trip.
#include "core/registry.h"

#include <gtest/gtest.h>

#include "core/derived_params.h"

namespace rk::core {
namespace {

using namespace std::chrono_literals;

// A valid value for each parameter, set alone on an otherwise valid spec.
LimitSpec with_param(Algorithm a, Param p) {
  LimitSpec s{.algorithm = a, .limit = 10, .window = Nanos{std::chrono::hours(24 * 30)}};
  if (takes(a, Param::kHalfLife)) s.half_life = Nanos{1s};
  switch (p) {
    case Param::kHalfLife: s.half_life = Nanos{1s}; break;
    case Param::kBurst: s.burst = 2; break;
    case Param::kCapacity: s.capacity = 3; break;
    case Param::kCountRefused: s.count_refused = true; break;
    case Param::kAlign: s.align = Align::kCalendar; break;
  }
  return s;
}

TEST(Registry, ValidationAcceptsExactlyTheParametersTheRegistryNames) {
  for (Algorithm a : kAllAlgorithms) {
    for (Param p : kAllParams) {
      const auto errors = validate(with_param(a, p));
      bool names_p = false;
      for (const auto& e : errors) names_p |= e.param == param_name(p);
      EXPECT_EQ(takes(a, p), !names_p) << algorithm_name(a) << " " << param_name(p);
      if (!takes(a, p)) {
        ASSERT_FALSE(errors.empty());
        EXPECT_NE(errors[0].message.find(takers(p)), std::string::npos) << errors[0].message;
      }
    }
  }
}

TEST(Registry, NamesRoundTrip) {
  for (Algorithm a : kAllAlgorithms) {
    EXPECT_EQ(parse_algorithm(info(a).name), a);
    EXPECT_EQ(info(a).algorithm, a);
    EXPECT_NE(algorithm_names().find(info(a).name), std::string::npos);
  }
  for (Param p : kAllParams) EXPECT_EQ(parse_param(param_name(p)), p);
  EXPECT_EQ(parse_param("limit"), std::nullopt);
  EXPECT_EQ(takers(Param::kBurst), "gcra and leaky_queue");
  EXPECT_EQ(takers(Param::kCountRefused),
            "earrrl, gcra, token_bucket, leaky_bucket, leaky_queue, fixed_window, "
            "sliding_log and sliding_window");  // every one
}

TEST(Registry, DefaultsFillOnlyWhatTheAlgorithmTakes) {
  const LimitSpec tb = with_defaults({.algorithm = Algorithm::kTokenBucket, .limit = 7});
  EXPECT_EQ(tb.capacity, 7);
  EXPECT_FALSE(tb.burst);
  EXPECT_EQ(tb.count_refused, false);
  EXPECT_EQ(with_defaults({.algorithm = Algorithm::kGcra, .limit = 7}).burst, 0);
  EXPECT_EQ(with_defaults({.algorithm = Algorithm::kEarrrl, .limit = 7}).count_refused, true);
  EXPECT_EQ(with_defaults({.algorithm = Algorithm::kFixedWindow, .limit = 7}).count_refused, false);
  EXPECT_FALSE(with_defaults({.algorithm = Algorithm::kEarrrl, .limit = 7}).half_life);  // required: no default
  // A value given is kept.
  EXPECT_EQ(with_defaults({.algorithm = Algorithm::kFixedWindow, .limit = 7, .count_refused = true}).count_refused,
            true);
}

TEST(Registry, EveryAlgorithmRunsInMemoryAndRedisAndTheOneThatCannotLiveInSharedMemorySaysWhy) {
  for (Algorithm a : kAllAlgorithms) {
    EXPECT_TRUE(runs_on(a, StoreKind::kMemory));
    EXPECT_TRUE(runs_on(a, StoreKind::kRedis));
  }
  const auto why = store_refuses({.algorithm = Algorithm::kSlidingLog, .limit = 5}, StoreKind::kShared);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "sliding_log cannot run in the shared memory store: sliding_log keeps a log per key that grows with "
            "its limit, and shared memory has fixed-size slots");
  EXPECT_FALSE(store_refuses({.algorithm = Algorithm::kGcra, .limit = 5}, StoreKind::kShared));
}

}  // namespace
}  // namespace rk::core
