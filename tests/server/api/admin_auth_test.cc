// The admin token (server/api/admin_auth.h) in-process, on a manual clock: the comparison, where a request may
// carry the token, the 401, the dashboard's sign-in and its session cookie, and the throttle on wrong tokens per
// address. The real server with --admin-token-file: tests/integration/tls_test.py.
#include "server/api/admin_auth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace rk::server::api {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kToken = "t0ken-Secret_42-0123";

using Fields = std::vector<std::pair<std::string, std::string>>;

// A request with these header fields from `ip`; Request's views point into it, so it outlives them.
struct Req {
  std::vector<std::pair<std::string, std::string>> owned;
  std::vector<server::http::Field> fields;
  std::string ip = "192.0.2.7";
  explicit Req(Fields f = {}) : owned(std::move(f)) {
    for (const auto& [n, v] : owned) fields.push_back({n, v});
  }
  server::http::Request request(std::string_view method = "GET", std::string_view path = "/v1/rules",
                                std::string_view body = "") const {
    server::http::Request r;
    r.method = method;
    r.path = r.target = path;
    r.body = body;
    r.fields = fields;
    r.remote_ip = ip;
    return r;
  }
};

std::string header(const server::http::Response& res, std::string_view name) {
  for (const auto& [n, v] : res.headers) {
    if (n == name) return v;
  }
  return "";
}

// An AdminAuth over a token file in a directory of its own, on a manual clock at a wall time.
class AdminAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rk-admin-auth-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "admin.token").string();
    write(kToken + "\n");
    auth_ = std::make_unique<AdminAuth>(std::make_shared<base::SecretFile>("--admin-token-file", path_),
                                        AdminAuthOptions{.clock = clock_});
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& text) {
    std::ofstream(path_ + ".new", std::ios::binary) << text;
    fs::rename(path_ + ".new", path_);
  }
  AdminAuth::Verdict check(const Req& req, server::http::Response& res, std::string_view method = "GET",
                           std::string_view path = "/v1/rules", std::string_view body = "") {
    return auth_->check(req.request(method, path, body), res, path == "/ui");
  }
  AdminAuth::Verdict check(const Req& req) {
    server::http::Response res;
    return check(req, res);
  }
  // Signs in through the form and returns the cookie's value.
  std::string sign_in() {
    server::http::Response res;
    EXPECT_EQ(check(Req{}, res, "POST", "/ui/login", "token=" + kToken), AdminAuth::kAnswered);
    const std::string set = header(res, "Set-Cookie");
    const std::string prefix = std::string(kAdminCookie) + "=";
    EXPECT_TRUE(set.starts_with(prefix)) << set;
    return set.substr(prefix.size(), set.find(';') - prefix.size());
  }
  Req with_cookie(const std::string& value) const {
    return Req(Fields{{"Cookie", std::string(kAdminCookie) + "=" + value}});
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(seconds(1'767'225'600));
  fs::path dir_;
  std::string path_;
  std::unique_ptr<AdminAuth> auth_;
};

TEST(AdminAuth, SameSecretIsExactWhateverTheLengths) {
  EXPECT_TRUE(same_secret(kToken, kToken));
  EXPECT_FALSE(same_secret("", kToken));
  EXPECT_FALSE(same_secret(kToken + "x", kToken));
  EXPECT_FALSE(same_secret(kToken.substr(1), kToken));
  EXPECT_FALSE(same_secret("t0ken-Secret_42-0124", kToken));
  EXPECT_FALSE(same_secret(kToken + kToken, kToken));  // the secret repeated is not the secret
  EXPECT_FALSE(same_secret("", ""));                   // no token configured: nothing matches
}

TEST_F(AdminAuthTest, TheTokenIsTakenFromABearerHeader) {
  const auto ok = [this](Fields fields) { return check(Req(std::move(fields))) == AdminAuth::kAdmitted; };
  EXPECT_TRUE(ok({{"Authorization", "Bearer " + kToken}}));
  EXPECT_TRUE(ok({{"authorization", "  bearer   " + kToken + " "}}));  // the scheme is case-insensitive
  EXPECT_TRUE(ok({{"Authorization", "Basic eDp5"}, {"Authorization", "Bearer " + kToken}}));
  EXPECT_FALSE(ok({}));
  EXPECT_FALSE(ok({{"Authorization", kToken}}));
  EXPECT_FALSE(ok({{"Authorization", "Basic " + kToken}}));
  EXPECT_FALSE(ok({{"Authorization", "Bearer"}}));
  // One request is one guess: only the first Bearer value is looked at.
  EXPECT_FALSE(ok({{"Authorization", "Bearer wrong"}, {"Authorization", "Bearer " + kToken}}));
  EXPECT_FALSE(ok({{"X-Token", kToken}}));
}

TEST_F(AdminAuthTest, UnauthorizedIs401WithAChallengeAndTheHouseErrorOrTheLoginPage) {
  server::http::Response res;
  EXPECT_EQ(check(Req{}, res), AdminAuth::kUnauthorized);
  EXPECT_EQ(res.status, 401);
  EXPECT_EQ(header(res, "WWW-Authenticate"), R"(Bearer realm="ratekeeper admin")");
  EXPECT_NE(res.body.find(R"({"error":{"code":401,"reason":"unauthorized","field":"Authorization")"), std::string::npos)
      << res.body;
  server::http::Response page;
  EXPECT_EQ(check(Req{}, page, "GET", "/ui"), AdminAuth::kUnauthorized);
  EXPECT_EQ(page.status, 401);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find(R"(<form method="post" action="/ui/login">)"), std::string::npos);
  EXPECT_NE(header(page, "Content-Security-Policy").find("form-action 'self'"), std::string::npos);
}

TEST_F(AdminAuthTest, TheLoginFormSetsAStrictHttpOnlySessionCookieThatIsNotTheToken) {
  server::http::Response wrong;
  EXPECT_EQ(check(Req{}, wrong, "POST", "/ui/login", "token=nope"), AdminAuth::kUnauthorized);
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(header(wrong, "Set-Cookie"), "");
  server::http::Response right;  // percent-encoded as a browser sends it, among other fields
  EXPECT_EQ(check(Req{}, right, "POST", "/ui/login", "x=1&token=t0ken%2DSecret_42-0123&y=2"), AdminAuth::kAnswered);
  EXPECT_EQ(right.status, 303);
  EXPECT_EQ(header(right, "Location"), "/ui");
  const std::string set = header(right, "Set-Cookie");
  EXPECT_TRUE(set.starts_with("ratekeeper_admin_session=")) << set;
  EXPECT_TRUE(set.ends_with("; Path=/; Max-Age=43200; HttpOnly; SameSite=Strict")) << set;
  EXPECT_EQ(set.find(kToken), std::string::npos) << set;
  server::http::Response form;
  EXPECT_EQ(check(Req{}, form, "GET", "/ui/login"), AdminAuth::kAnswered);
  EXPECT_EQ(form.status, 200);
  EXPECT_EQ(header(form, "Set-Cookie"), "");

  AdminAuth tls(std::make_shared<base::SecretFile>("--admin-token-file", path_), {.secure_cookie = true});
  server::http::Response secure;
  EXPECT_EQ(tls.check(Req{}.request("POST", "/ui/login", "token=" + kToken), secure, false), AdminAuth::kAnswered);
  EXPECT_TRUE(header(secure, "Set-Cookie").ends_with("; HttpOnly; SameSite=Strict; Secure"));
}

TEST_F(AdminAuthTest, ASessionIsAdmittedUntilItExpiresAndAForgedOneNever) {
  const std::string session = sign_in();
  EXPECT_NE(session, kToken);
  EXPECT_NE(session, sign_in());  // each sign-in is a session of its own
  EXPECT_EQ(check(with_cookie(session)), AdminAuth::kAdmitted);
  EXPECT_EQ(check(Req(Fields{{"Cookie", "a=1; " + std::string(kAdminCookie) + "=" + session + "; b=2"}})),
            AdminAuth::kAdmitted);
  // Neither the token itself, nor the old cookie that held it, nor a session with a changed expiry, id or
  // signature, nor a session of another process (another secret) is a session.
  std::string later_expiry = session, other_id = session, other_signature = session;
  later_expiry[0] = later_expiry[0] == '9' ? '8' : static_cast<char>(later_expiry[0] + 1);
  char& id = other_id[session.find('.') + 1];
  id = id == '0' ? '1' : '0';
  other_signature.back() = other_signature.back() == '0' ? '1' : '0';
  AdminAuth other_process(std::make_shared<base::SecretFile>("--admin-token-file", path_), {.clock = clock_});
  server::http::Response res;
  ASSERT_EQ(other_process.check(Req{}.request("POST", "/ui/login", "token=" + kToken), res, false),
            AdminAuth::kAnswered);
  const std::string set = header(res, "Set-Cookie");
  const std::string foreign = set.substr(set.find('=') + 1, set.find(';') - set.find('=') - 1);
  for (const std::string& forged :
       {kToken, later_expiry, other_id, other_signature, foreign, std::string("1.2.3"), session + "0", std::string()}) {
    EXPECT_EQ(check(with_cookie(forged)), AdminAuth::kUnauthorized) << forged;
  }
  EXPECT_EQ(check(Req(Fields{{"Cookie", "ratekeeper_admin_token=" + kToken}})), AdminAuth::kUnauthorized);
  // Twelve hours on, the session is over.
  clock_->advance(std::chrono::hours(12) - seconds(1));
  EXPECT_EQ(check(with_cookie(session)), AdminAuth::kAdmitted);
  clock_->advance(seconds(1));
  EXPECT_EQ(check(with_cookie(session)), AdminAuth::kUnauthorized);
}

TEST_F(AdminAuthTest, RotatingTheTokenEndsItsSessions) {
  const std::string session = sign_in();
  write(kToken + "-rotated\n");
  EXPECT_EQ(check(with_cookie(session)), AdminAuth::kUnauthorized);
  EXPECT_EQ(check(Req(Fields{{"Authorization", "Bearer " + kToken}})), AdminAuth::kUnauthorized);
  EXPECT_EQ(check(Req(Fields{{"Authorization", "Bearer " + kToken + "-rotated"}})), AdminAuth::kAdmitted);
  write(kToken + "\n");  // back to the old token: its sessions are its own again, until they expire
  EXPECT_EQ(check(with_cookie(session)), AdminAuth::kAdmitted);
}

TEST_F(AdminAuthTest, ThreeHundredWrongTokensFromOneAddressAreThrottledAfterTenAndAnotherAddressIsNot) {
  const Req attacker(Fields{{"Authorization", "Bearer wrong-guess"}});
  std::vector<int> statuses;
  std::string retry_after;
  for (int i = 0; i < 300; ++i) {  // all at once: the clock does not move
    server::http::Response res;
    check(attacker, res);
    statuses.push_back(res.status);
    if (res.status == 429) retry_after = header(res, "Retry-After");
  }
  EXPECT_EQ(std::count(statuses.begin(), statuses.begin() + 10, 401), 10);
  EXPECT_EQ(std::count(statuses.begin() + 10, statuses.end(), 429), 290);
  EXPECT_EQ(retry_after, "6");
  // The right token from the throttled address is not looked at either: a lucky guess is not told so.
  Req right(Fields{{"Authorization", "Bearer " + kToken}});
  server::http::Response res;
  EXPECT_EQ(check(right, res), AdminAuth::kThrottled);
  EXPECT_EQ(res.status, 429);
  EXPECT_NE(res.body.find(R"("reason":"throttled")"), std::string::npos) << res.body;
  // Nor a sign-in: the form again, with the wait.
  server::http::Response form;
  EXPECT_EQ(check(attacker, form, "POST", "/ui/login", "token=" + kToken), AdminAuth::kThrottled);
  EXPECT_EQ(form.status, 429);
  EXPECT_EQ(header(form, "Set-Cookie"), "");
  EXPECT_EQ(header(form, "Retry-After"), "6");
  // Another address is served as ever; so is a request that tries no token (probes, the sign-in page).
  right.ip = "192.0.2.8";
  EXPECT_EQ(check(right), AdminAuth::kAdmitted);
  EXPECT_EQ(check(Req{}), AdminAuth::kUnauthorized);
  // Six seconds on, the attacker has one more try; a right one is then admitted.
  clock_->advance(seconds(5));
  EXPECT_EQ(check(attacker), AdminAuth::kThrottled);
  clock_->advance(seconds(1));
  EXPECT_EQ(check(attacker), AdminAuth::kUnauthorized);
  EXPECT_EQ(check(attacker), AdminAuth::kThrottled);
  clock_->advance(seconds(6));
  right.ip = attacker.ip;
  EXPECT_EQ(check(right), AdminAuth::kAdmitted);
}

TEST_F(AdminAuthTest, ForgedSessionsAreGuessesToo) {
  const std::string session = sign_in();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(check(with_cookie(session + "0")), AdminAuth::kUnauthorized);
  EXPECT_EQ(check(with_cookie(session)), AdminAuth::kThrottled);  // signed in before the address was throttled
}

}  // namespace
}  // namespace rk::server::api
