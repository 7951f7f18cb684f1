// Regression (found by fuzz_forward_auth, docs/reliability.md): an algorithm that saturates its wait to
// Nanos::max() (EARRRL with a half-life of years and a huge hits_addend reports "never" that way) made the
// rate-limit header fields overflow while rounding up to whole seconds. Said now as the largest 32-bit count of
// seconds, as every wait past it is (src/http_fields/rate_limit_headers.h).
#include <gtest/gtest.h>

#include <string>

#include "server/api/forward_auth.h"

namespace rk::server::api {
namespace {

std::string header(const AuthAnswer& a, const std::string& name) {
  for (const auto& [n, v] : a.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

TEST(SaturatedReset, RoundsUpToWholeSecondsWithoutOverflow) {
  service::CheckResponse r;
  r.overall = service::Code::kOverLimit;
  service::DescriptorStatus st;
  st.code = service::Code::kOverLimit;
  st.has_limit = true;
  st.name = "per_client";
  st.requests_per_unit = 5;
  st.window = Nanos{1'000'000'000};
  st.duration_until_reset = Nanos::max();  // 9223372036.854775807 s
  r.statuses.push_back(st);
  const AuthAnswer a = auth_answer(r, 429);
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(header(a, "Retry-After"), "2147483647");
  EXPECT_EQ(header(a, "X-RateLimit-Reset"), "2147483647");
  EXPECT_EQ(header(a, "RateLimit"), "\"per_client\";r=0;t=2147483647");

  r.statuses[0].duration_until_reset = Nanos{1'000'000'001};  // just over a second: 2
  EXPECT_EQ(header(auth_answer(r, 429), "Retry-After"), "2");
  r.statuses[0].duration_until_reset = Nanos{1'000'000'000};  // exactly a second: 1
  EXPECT_EQ(header(auth_answer(r, 429), "Retry-After"), "1");
}

// A blocked rule (requests_per_unit 0) never passes: every field says never, whatever reset the status carries (a
// client reading t or X-RateLimit-Reset as the window's end would retry then, and be refused again, for ever).
TEST(SaturatedReset, BlockedRuleSaysNeverInEveryField) {
  service::CheckResponse r;
  r.overall = service::Code::kOverLimit;
  service::DescriptorStatus st;
  st.code = service::Code::kOverLimit;
  st.has_limit = true;
  st.name = "blocked";
  st.window = Nanos{60'000'000'000};
  st.retry_after = kNever;
  st.duration_until_reset = Nanos{40'000'000'000};
  r.statuses.push_back(st);
  const AuthAnswer a = auth_answer(r, 429);
  EXPECT_EQ(header(a, "RateLimit-Policy"), "\"blocked\";q=0;w=60");
  EXPECT_EQ(header(a, "RateLimit"), "\"blocked\";r=0;t=2147483647");
  EXPECT_EQ(header(a, "X-RateLimit-Reset"), "2147483647");
  EXPECT_EQ(header(a, "Retry-After"), "2147483647");
  EXPECT_NE(a.body.find("no wait lets this request through"), std::string::npos) << a.body;
}

}  // namespace
}  // namespace rk::server::api
