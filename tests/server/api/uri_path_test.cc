// The path normaliser (server/api/uri_path.h): each rule on its own, the bypasses of a /login limit, and
// idempotence over many generated paths.
#include <gtest/gtest.h>

#include <random>

#include "server/api/uri_path.h"

namespace rk::server::api {
namespace {

TEST(NormalizePath, EveryWayOfWritingLoginIsLogin) {
  for (const char* p : {"/login",
                        "//login",
                        "///login",
                        "/%6cogin",
                        "/%6Cogin",
                        "/%6C%6F%67%69%6E",
                        "/./login",
                        "/x/../login",
                        "/x/y/../../login",
                        "/../login",
                        "/../../login",
                        "/login;jsessionid=1",
                        "/login;",
                        "/..;/login",
                        "/x/..;/login",
                        "/%2e/login",
                        "/x/%2E%2e/login",
                        "/x/.%2e/login",
                        "http://example.com/login",
                        "HTTPS://example.com:8443//./login",
                        "login"}) {
    EXPECT_EQ(normalize_path(p), "/login") << p;
  }
}

TEST(NormalizePath, DotSegmentsAsRfc3986SaysAndNeverAboveTheRoot) {
  EXPECT_EQ(normalize_path("/a/b/c/./../../g"), "/a/g");  // RFC 3986 5.2.4's own example
  EXPECT_EQ(normalize_path("/mid/content=5/../6"), "/mid/6");
  EXPECT_EQ(normalize_path("/a/."), "/a/");
  EXPECT_EQ(normalize_path("/a/.."), "/");
  EXPECT_EQ(normalize_path("/.."), "/");
  EXPECT_EQ(normalize_path(""), "/");
  EXPECT_EQ(normalize_path("/a/...b/..c"), "/a/...b/..c");  // not dot segments
  EXPECT_EQ(normalize_path("/a/b/"), "/a/b/");              // a trailing slash is a different resource
  EXPECT_EQ(normalize_path("/a//b//"), "/a/b/");
  EXPECT_EQ(normalize_path("/a//../b"), "/b");  // slashes merged first, as nginx does
}

TEST(NormalizePath, EscapesOfUnreservedDecodedOthersUpperCasedStrayPercentEscaped) {
  EXPECT_EQ(normalize_path("/%41%7a%30%2D%2e%5F%7E"), "/Az0-._~");
  EXPECT_EQ(normalize_path("/a%2fb"), "/a%2Fb");  // an escaped '/' is data, not a separator
  EXPECT_EQ(normalize_path("/a%2Fb/..%2F"), "/a%2Fb/..%2F");
  EXPECT_EQ(normalize_path("/%3b"), "/%3B");  // an escaped ';' is not a parameter
  EXPECT_EQ(normalize_path("/caf%c3%a9"), "/caf%C3%A9");
  EXPECT_EQ(normalize_path("/100%"), "/100%25");
  EXPECT_EQ(normalize_path("/%zz"), "/%25zz");
  EXPECT_EQ(normalize_path("/%%341"), "/%2541");  // never "%41", which a second pass would read as "A"
}

TEST(NormalizePath, ParametersAreCutPerSegmentUnlessKept) {
  EXPECT_EQ(normalize_path("/a;x=1/b;y/c"), "/a/b/c");
  EXPECT_EQ(normalize_path("/;x/login"), "/login");
  const PathOptions keep{.strip_params = false};
  EXPECT_EQ(normalize_path("/login;jsessionid=1", keep), "/login;jsessionid=1");
  EXPECT_EQ(normalize_path("/..;/login", keep), "/..;/login");
}

TEST(NormalizePath, CaseFoldedOnlyWhenAskedAndNeverInsideEscapes) {
  EXPECT_EQ(normalize_path("/LOGIN"), "/LOGIN");
  const PathOptions fold{.fold_case = true};
  EXPECT_EQ(normalize_path("/LOGIN", fold), "/login");
  EXPECT_EQ(normalize_path("/%4cOGIN", fold), "/login");
  EXPECT_EQ(normalize_path("/A%2fB%c3%A9", fold), "/a%2Fb%C3%A9");
}

TEST(NormalizePath, IdempotentOverGeneratedPaths) {
  // The characters every rule above turns on, in random strings: a second pass must find nothing to change.
  constexpr std::string_view kAlphabet = "/./..;%%2e2E6c6CfFzZ3b4aA~-_ xX:";
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    std::string p;
    const std::size_t n = rng() % 24;
    for (std::size_t j = 0; j < n; ++j) p += kAlphabet[rng() % kAlphabet.size()];
    for (const PathOptions o : {PathOptions{}, PathOptions{.strip_params = false, .fold_case = true}}) {
      const std::string once = normalize_path(p, o);
      ASSERT_EQ(normalize_path(once, o), once) << "input: " << p;
      ASSERT_TRUE(once.starts_with('/')) << p;
      ASSERT_EQ(once.find("//"), std::string::npos) << p;
      ASSERT_EQ(once.find("/./"), std::string::npos) << p;
      ASSERT_EQ(once.find("/../"), std::string::npos) << p;
    }
  }
}

}  // namespace
}  // namespace rk::server::api
