// Golden tests of the one rate-limit header formatter (src/http_fields/rate_limit_headers.h): real decisions of the
// real algorithms in, exact header lines out. The server's and the nginx module's tests assert the same strings
// from the running servers (tests/server/api/forward_auth_test.cc, tests/integration/nginx_module_test.py).
#include "http_fields/rate_limit_headers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ratekeeper/limiter.h"

namespace rk::http_fields {
namespace {

using namespace std::chrono_literals;
using Fields = std::vector<std::pair<std::string, std::string>>;

// The fields for one limit named "api", deciding `attempts` times at `now` on one key; the last decision counts.
Fields after(const LimitSpec& spec, int attempts, Nanos now, std::uint64_t cost = 1) {
  Limiter limiter(spec);
  Decision d;
  for (int i = 0; i < attempts; ++i) d = limiter.check_at("k", now, cost);
  const LimitState s = from_decision("api", spec.limit, spec.window, d);
  return format(std::span(&s, 1));
}

TEST(RateLimitHeaders, AllowedFixedWindow) {
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 60s};
  EXPECT_EQ(after(spec, 3, Nanos{15'500'000'000}), (Fields{{"RateLimit-Policy", R"("api";q=10;w=60)"},
                                                           {"RateLimit", R"("api";r=7;t=45)"},
                                                           {"X-RateLimit-Limit", "10"},
                                                           {"X-RateLimit-Remaining", "7"},
                                                           {"X-RateLimit-Reset", "45"}}));
}

TEST(RateLimitHeaders, RefusedFixedWindowSaysRetryAfterNoEarlierThanT) {
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 60s};
  EXPECT_EQ(after(spec, 11, Nanos{15'500'000'000}), (Fields{{"RateLimit-Policy", R"("api";q=10;w=60)"},
                                                            {"RateLimit", R"("api";r=0;t=45)"},
                                                            {"X-RateLimit-Limit", "10"},
                                                            {"X-RateLimit-Remaining", "0"},
                                                            {"X-RateLimit-Reset", "45"},
                                                            {"Retry-After", "45"}}));
}

// A cost above what the limit can ever admit: "never", said as the largest 32-bit count of seconds (not
// 9223372037, Nanos::max() rounded up, which a client parsing into 32 bits turns negative: retry at once), and said
// by every field alike: t and X-RateLimit-Reset are not the window's end (0 here, nothing having been spent),
// which a client reading them would take for "retry now", and be refused again, for ever.
TEST(RateLimitHeaders, NeverIsTheLargest32BitSecondsInEveryField) {
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 60s};
  EXPECT_EQ(after(spec, 1, Nanos{15'500'000'000}, 11), (Fields{{"RateLimit-Policy", R"("api";q=10;w=60)"},
                                                               {"RateLimit", R"("api";r=10;t=2147483647)"},
                                                               {"X-RateLimit-Limit", "10"},
                                                               {"X-RateLimit-Remaining", "10"},
                                                               {"X-RateLimit-Reset", "2147483647"},
                                                               {"Retry-After", "2147483647"}}));
}

// A blocked limit (q=0) as the service hands it over, whatever reset it carries: never, in every field.
TEST(RateLimitHeaders, ABlockedLimitSaysNeverInEveryField) {
  for (const Nanos reset : {Nanos{0}, Nanos{1}, Nanos{40'000'000'000}}) {
    const LimitState s{.name = "blocked", .quota = 0, .window = 1s, .refused = true, .reset = reset, .never = true};
    EXPECT_EQ(format(std::span(&s, 1)), (Fields{{"RateLimit-Policy", R"("blocked";q=0;w=1)"},
                                                {"RateLimit", R"("blocked";r=0;t=2147483647)"},
                                                {"X-RateLimit-Limit", "0"},
                                                {"X-RateLimit-Remaining", "0"},
                                                {"X-RateLimit-Reset", "2147483647"},
                                                {"Retry-After", "2147483647"}}));
  }
}

// gcra's q is its rate (5 a minute), not what it admits at once (burst + 1 = 10): r may exceed q.
TEST(RateLimitHeaders, GcraBurstIsNotTheQuota) {
  const LimitSpec spec{.algorithm = Algorithm::kGcra, .limit = 5, .window = 60s, .burst = 9};
  EXPECT_EQ(after(spec, 1, Nanos{0}), (Fields{{"RateLimit-Policy", R"("api";q=5;w=60)"},
                                              {"RateLimit", R"("api";r=9;t=12)"},
                                              {"X-RateLimit-Limit", "5"},
                                              {"X-RateLimit-Remaining", "9"},
                                              {"X-RateLimit-Reset", "12"}}));
  const Fields refused = after(spec, 11, Nanos{0});
  EXPECT_EQ(refused[1].second, R"("api";r=0;t=12)");
  EXPECT_EQ(refused.back(), (std::pair<std::string, std::string>{"Retry-After", "12"}));
}

// earrrl's remaining is a fraction (limit / lambda - N): r floors it.
TEST(RateLimitHeaders, EarrrlFractionalRemainingIsFloored) {
  const LimitSpec spec{.algorithm = Algorithm::kEarrrl, .limit = 1, .window = 1s, .half_life = 10s};
  Limiter limiter(spec);
  const Decision d = limiter.check_at("k", Nanos{0});
  ASSERT_NEAR(d.remaining, 10 / std::log(2.0) - 1, 1e-6);  // 13.43: a burst of 14.43 less this one
  const LimitState s = from_decision("abuse", spec.limit, spec.window, d);
  const Fields f = format(std::span(&s, 1));
  EXPECT_EQ(f[0].second, R"("abuse";q=1;w=1)");
  EXPECT_EQ(f[1].second.substr(0, 14), R"("abuse";r=13;t)");
  EXPECT_EQ(f[3].second, "13");
}

TEST(RateLimitHeaders, PolicyIsWholeNumbersNeverAboveTheLimit) {
  auto qw = [](double quota, Nanos window) {
    const Policy p = policy(quota, window);
    return std::to_string(p.q) + "/" + std::to_string(p.w);
  };
  EXPECT_EQ(qw(10, 60s), "10/60");
  EXPECT_EQ(qw(1000, 24h), "1000/86400");
  EXPECT_EQ(qw(0.5, 1s), "1/2");  // nginx's 0.5r/s: one every two seconds, not q=0
  EXPECT_EQ(qw(1.0 / 3, 1s), "1/3");
  EXPECT_EQ(qw(0.3, 1s), "1/4");  // rounded to the slower side
  EXPECT_EQ(qw(1.5, 1s), "1/1");
  EXPECT_EQ(qw(1, 100ms), "10/1");  // a sub-second window, said per second
  EXPECT_EQ(qw(3, 1500ms), "4/2");
  EXPECT_EQ(qw(0, 60s), "0/60");                 // blocked
  EXPECT_EQ(qw(1e30, 1s), "999999999999999/1");  // Structured Fields integers have 15 digits
  EXPECT_EQ(qw(std::nan(""), 1s), "0/1");
}

TEST(RateLimitHeaders, TheBindingLimitIsTheRefusingOneWithTheLongestWaitElseTheLeastLeft) {
  std::vector<LimitState> l = {
      {.name = "daily", .quota = 1000, .window = 24h, .remaining = 900, .reset = 3600s},
      {.name = "per \"ip\"", .quota = 10, .window = 60s, .refused = true, .reset = 2100ms},
      {.name = "burst", .quota = 5, .window = 1s, .refused = true, .reset = 900ms},
  };
  const Fields f = format(l);
  EXPECT_EQ(f, (Fields{{"RateLimit-Policy", R"("daily";q=1000;w=86400, "per \"ip\"";q=10;w=60, "burst";q=5;w=1)"},
                       {"RateLimit", R"("per \"ip\"";r=0;t=3)"},
                       {"X-RateLimit-Limit", "10"},
                       {"X-RateLimit-Remaining", "0"},
                       {"X-RateLimit-Reset", "3"},
                       {"Retry-After", "3"}}));
  l[2].never = true;  // never outwaits any finite wait
  EXPECT_EQ(binding(l), 2u);
  l[1].refused = l[2].refused = false;
  l[1].remaining = 4;
  l[2].remaining = 7;
  EXPECT_EQ(binding(l), 1u);
  EXPECT_EQ(format(l).size(), 5u);  // nothing refuses: no Retry-After
}

TEST(RateLimitHeaders, OddNamesAndNumbersStayInTheGrammar) {
  const LimitState s{.name = "caf\xc3\xa9\\\x01",
                     .quota = 1,
                     .window = 1s,
                     .refused = true,
                     .remaining = std::numeric_limits<double>::quiet_NaN(),
                     .reset = Nanos::max()};
  const Fields f = format(std::span(&s, 1));
  EXPECT_EQ(f[1].second, R"("caf??\\?";r=0;t=2147483647)");
  EXPECT_EQ(f.back().second, "2147483647");
  const LimitState big{.name = "x", .quota = 1, .window = 1s, .remaining = 1e20, .reset = -5s};
  EXPECT_EQ(format(std::span(&big, 1))[1].second, R"("x";r=999999999999999;t=0)");
  EXPECT_TRUE(format({}).empty());
}

TEST(RateLimitHeaders, SecondsRoundUpAndCap) {
  EXPECT_EQ(header_seconds(Nanos{0}), 0);
  EXPECT_EQ(header_seconds(Nanos{1}), 1);
  EXPECT_EQ(header_seconds(1s), 1);
  EXPECT_EQ(header_seconds(Nanos{1'000'000'001}), 2);
  EXPECT_EQ(header_seconds(Nanos{2'147'483'647'000'000'000}), 2'147'483'647);
  EXPECT_EQ(header_seconds(Nanos{2'147'483'647'000'000'001}), 2'147'483'647);
  EXPECT_EQ(header_seconds(Nanos::max()), 2'147'483'647);
}

}  // namespace
}  // namespace rk::http_fields
