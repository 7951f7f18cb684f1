// server/api/admin_auth.cc: the admin token checked in a header or a session cookie, the 401 and 429, and the
// dashboard's sign-in.
#include "server/api/admin_auth.h"

#include <optional>
#include <string>
#include <utility>

#include "base/percent.h"
#include "http_fields/rate_limit_headers.h"
#include "server/http/ascii.h"
#include "server/http/response_writer.h"

namespace rk::server::api {

namespace {

// The dashboard's sign-in page: a form and nothing else (no script, no style), under a policy that lets it post
// only to this listener.
constexpr std::string_view kLoginPolicy =
    "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

constexpr std::string_view kLoginPage = R"(<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>ratekeeper: sign in</title></head>
<body>
<h1>ratekeeper</h1>
<p>MESSAGE</p>
<form method="post" action="/ui/login">
<label>Admin token <input type="password" name="token" autocomplete="current-password" autofocus required></label>
<button type="submit">Sign in</button>
</form>
</body>
</html>
)";

// The credentials a request carries: the first `Authorization: Bearer` value (RFC 6750 2.1; the scheme is
// case-insensitive) and the first kAdminCookie of its Cookie headers (RFC 6265 5.4: pairs joined by "; ").
struct Credentials {
  std::optional<std::string_view> bearer, session;
  bool any = false;  // an Authorization header of any scheme, or the cookie: a try at the token
};

Credentials credentials(const server::http::Request& req) {
  Credentials c;
  for (std::string_view value : req.headers("authorization")) {
    c.any = true;
    value = server::http::detail::trim_ows(value);
    const auto space = value.find(' ');
    if (space == std::string_view::npos || !server::http::detail::iequals(value.substr(0, space), "bearer")) continue;
    c.bearer = server::http::detail::trim_ows(value.substr(space + 1));
    break;
  }
  for (std::string_view header : req.headers("cookie")) {
    while (!header.empty() && !c.session) {
      const auto semi = header.find(';');
      const std::string_view pair = server::http::detail::trim_ows(header.substr(0, semi));
      header = semi == std::string_view::npos ? std::string_view{} : header.substr(semi + 1);
      const auto eq = pair.find('=');
      if (eq != std::string_view::npos && pair.substr(0, eq) == kAdminCookie) c.session = pair.substr(eq + 1);
    }
  }
  c.any = c.any || c.session.has_value();
  return c;
}

// A field of an application/x-www-form-urlencoded body, decoded ('+' is a space, %XX a byte); "" if absent.
std::string form_field(std::string_view body, std::string_view name) {
  while (!body.empty()) {
    const auto amp = body.find('&');
    const std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view{} : body.substr(amp + 1);
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string out;
    base::form_decode(pair.substr(eq + 1), out);  // a stray '%' is taken as written
    return out;
  }
  return {};
}

void login_page(server::http::Response& res, int status, std::string_view message) {
  res.status = status;
  res.content_type = "text/html; charset=utf-8";
  res.body = std::string(kLoginPage);
  res.body.replace(res.body.find("MESSAGE"), 7, message);
  res.headers.emplace_back("Content-Security-Policy", std::string(kLoginPolicy));
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Cache-Control", "no-store");
}

constexpr std::string_view kAsk = "This admin listener needs its token (--admin-token-file).";

void unauthorized(server::http::Response& res, bool dashboard_page) {
  res.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="ratekeeper admin")");
  if (dashboard_page) return login_page(res, 401, kAsk);
  res.status = 401;
  res.content_type = "application/json";
  res.body = server::http::error_json(401, "unauthorized",
                                      "this admin listener needs 'Authorization: Bearer <token>' "
                                      "(the token of --admin-token-file)",
                                      "Authorization");
}

void throttled(server::http::Response& res, bool page, Nanos wait) {
  const std::string seconds = std::to_string(http_fields::header_seconds(wait));
  if (page) {
    login_page(res, 429, "Too many wrong tokens from this address: try again in " + seconds + " s.");
  } else {
    res.status = 429;
    res.content_type = "application/json";
    res.body = server::http::error_json(429, "throttled",
                                        "too many wrong admin tokens from this address; try again in " + seconds + " s",
                                        "Authorization");
  }
  res.headers.emplace_back(http_fields::kRetryAfter, seconds);
}

}  // namespace

bool same_secret(std::string_view given, std::string_view secret) {
  if (secret.empty()) return false;
  volatile unsigned char diff = given.size() != secret.size() ? 1 : 0;  // volatile: no early exit compiled in
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff = static_cast<unsigned char>(diff | static_cast<unsigned char>(given[i] ^ secret[i % secret.size()]));
  }
  return diff == 0;
}

AdminAuth::AdminAuth(std::shared_ptr<base::SecretFile> token, AdminAuthOptions options)
    : token_(std::move(token)),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : std::make_shared<SystemClock>()),
      sessions_(options_.session_lifetime),
      throttle_(options_.throttle) {}

AdminAuth::Verdict AdminAuth::check(const server::http::Request& req, server::http::Response& res,
                                    bool dashboard_page) {
  const bool page = dashboard_page && (req.method == "GET" || req.method == "HEAD");
  const bool login = req.path == kLoginPath;
  if (login && req.method != "POST") {
    login_page(res, 200, kAsk);
    return kAnswered;
  }
  const Credentials given = credentials(req);
  const Nanos now = clock_->now();
  if (login || given.any) {  // a try at the token: not even looked at from an address out of tries
    if (const Nanos wait = throttle_.wait(req.remote_ip, now); wait > Nanos{0}) {
      throttled(res, page || login, wait);
      return kThrottled;
    }
  }
  const std::shared_ptr<const std::string> token = token_->current();
  if (login) return sign_in(req, res, *token, now);
  // Both looked at whichever matches, so that the time taken does not tell which one did.
  const bool bearer = given.bearer && same_secret(*given.bearer, *token);
  const bool session = given.session && sessions_.valid(*given.session, *token, now);
  if (bearer || session) return kAdmitted;
  if (given.any) throttle_.failed(req.remote_ip, now);
  unauthorized(res, page);
  return kUnauthorized;
}

AdminAuth::Verdict AdminAuth::sign_in(const server::http::Request& req, server::http::Response& res,
                                      std::string_view token, Nanos now) {
  if (!same_secret(form_field(req.body, "token"), token)) {
    throttle_.failed(req.remote_ip, now);
    res.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="ratekeeper admin")");
    login_page(res, 401, "That is not the token.");
    return kUnauthorized;
  }
  res.status = 303;
  res.content_type.clear();
  res.headers.emplace_back("Location", "/ui");
  std::string cookie = std::string(kAdminCookie) + "=" + sessions_.issue(token, now) +
                       "; Path=/; Max-Age=" + std::to_string(sessions_.lifetime().count()) +
                       "; HttpOnly; SameSite=Strict";
  if (options_.secure_cookie) cookie += "; Secure";
  res.headers.emplace_back("Set-Cookie", std::move(cookie));
  res.headers.emplace_back("Cache-Control", "no-store");
  return kAnswered;
}

}  // namespace rk::server::api
