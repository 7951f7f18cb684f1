// The admin token (server/api/admin_auth.h) in-process: the comparison, where a request may carry the token, the
// 401 and the dashboard's login form. The real server with --admin-token-file: tests/integration/tls_test.py.
#include "server/api/admin_auth.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace rk::api {
namespace {

const std::string kToken = "t0ken-Secret_42";

// A request with these header fields; Request's views point into it, so it outlives them.
struct Req {
  std::vector<std::pair<std::string, std::string>> owned;
  std::vector<http::Field> fields;
  explicit Req(std::vector<std::pair<std::string, std::string>> f = {}) : owned(std::move(f)) {
    for (const auto& [n, v] : owned) fields.push_back({n, v});
  }
  http::Request request(std::string_view method = "GET", std::string_view path = "/v1/rules",
                        std::string_view body = "") const {
    http::Request r;
    r.method = method;
    r.path = r.target = path;
    r.body = body;
    r.fields = fields;
    return r;
  }
};

std::string header(const http::Response& res, std::string_view name) {
  for (const auto& [n, v] : res.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(AdminAuth, SameSecretIsExactWhateverTheLengths) {
  EXPECT_TRUE(same_secret(kToken, kToken));
  EXPECT_FALSE(same_secret("", kToken));
  EXPECT_FALSE(same_secret(kToken + "x", kToken));
  EXPECT_FALSE(same_secret(kToken.substr(1), kToken));
  EXPECT_FALSE(same_secret("t0ken-Secret_43", kToken));
  EXPECT_FALSE(same_secret(kToken + kToken, kToken));  // the secret repeated is not the secret
  EXPECT_FALSE(same_secret("", ""));                    // no token configured: nothing matches
}

TEST(AdminAuth, TheTokenIsTakenFromABearerHeaderOrTheCookie) {
  const auto ok = [](std::vector<std::pair<std::string, std::string>> fields) {
    const Req req(std::move(fields));
    return admin_authorized(req.request(), kToken);
  };
  EXPECT_TRUE(ok({{"Authorization", "Bearer " + kToken}}));
  EXPECT_TRUE(ok({{"authorization", "  bearer   " + kToken + " "}}));  // the scheme is case-insensitive
  EXPECT_TRUE(ok({{"Authorization", "Basic eDp5"}, {"Authorization", "Bearer " + kToken}}));
  EXPECT_TRUE(ok({{"Cookie", "a=1; ratekeeper_admin_token=" + kToken + "; b=2"}}));
  EXPECT_TRUE(ok({{"Cookie", "a=1"}, {"Cookie", "ratekeeper_admin_token=" + kToken}}));
  EXPECT_FALSE(ok({}));
  EXPECT_FALSE(ok({{"Authorization", kToken}}));
  EXPECT_FALSE(ok({{"Authorization", "Basic " + kToken}}));
  EXPECT_FALSE(ok({{"Authorization", "Bearer"}}));
  EXPECT_FALSE(ok({{"Cookie", "other_token=" + kToken}}));
  EXPECT_FALSE(ok({{"Cookie", "ratekeeper_admin_token=" + kToken + "x"}}));
  EXPECT_FALSE(ok({{"X-Token", kToken}}));
}

TEST(AdminAuth, UnauthorizedIs401WithAChallengeAndTheHouseErrorOrTheLoginPage) {
  http::Response res;
  admin_unauthorized(Req{}.request(), res, false);
  EXPECT_EQ(res.status, 401);
  EXPECT_EQ(header(res, "WWW-Authenticate"), R"(Bearer realm="ratekeeper admin")");
  EXPECT_NE(res.body.find(R"({"error":{"code":401,"reason":"unauthorized","field":"Authorization")"),
            std::string::npos)
      << res.body;
  http::Response page;
  admin_unauthorized(Req{}.request("GET", "/ui"), page, true);
  EXPECT_EQ(page.status, 401);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find(R"(<form method="post" action="/ui/login">)"), std::string::npos);
  EXPECT_NE(header(page, "Content-Security-Policy").find("form-action 'self'"), std::string::npos);
}

TEST(AdminAuth, TheLoginFormSetsAStrictHttpOnlyCookieForTheRightTokenOnly) {
  http::Response wrong;
  admin_login(Req{}.request("POST", "/ui/login", "token=nope"), wrong, kToken, false);
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(header(wrong, "Set-Cookie"), "");
  http::Response right;  // percent-encoded as a browser sends it, among other fields
  admin_login(Req{}.request("POST", "/ui/login", "x=1&token=t0ken%2DSecret_42&y=2"), right, kToken, true);
  EXPECT_EQ(right.status, 303);
  EXPECT_EQ(header(right, "Location"), "/ui");
  EXPECT_EQ(header(right, "Set-Cookie"),
            "ratekeeper_admin_token=" + kToken + "; Path=/; HttpOnly; SameSite=Strict; Secure");
  http::Response form;
  admin_login(Req{}.request("GET", "/ui/login"), form, kToken, false);
  EXPECT_EQ(form.status, 200);
  EXPECT_EQ(header(form, "Set-Cookie"), "");
}

}  // namespace
}  // namespace rk::api
