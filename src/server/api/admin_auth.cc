// server/api/admin_auth.cc: the admin token checked in a header or a cookie, the 401, and the dashboard's login.
#include "server/api/admin_auth.h"

#include <string>

#include "base/percent.h"
#include "server/http/ascii.h"
#include "server/http/response_writer.h"

namespace rk::api {

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

// `Authorization: Bearer <token>` (RFC 6750 2.1; the scheme is case-insensitive).
bool bearer_matches(const http::Request& req, std::string_view token) {
  for (std::string_view value : req.headers("authorization")) {
    value = http::detail::trim_ows(value);
    const auto space = value.find(' ');
    if (space == std::string_view::npos || !http::detail::iequals(value.substr(0, space), "bearer")) continue;
    if (same_secret(http::detail::trim_ows(value.substr(space + 1)), token)) return true;
  }
  return false;
}

// Every `name=value` pair of every Cookie header (RFC 6265 5.4: pairs joined by "; ").
bool cookie_matches(const http::Request& req, std::string_view token) {
  for (std::string_view header : req.headers("cookie")) {
    while (!header.empty()) {
      const auto semi = header.find(';');
      const std::string_view pair = http::detail::trim_ows(header.substr(0, semi));
      header = semi == std::string_view::npos ? std::string_view{} : header.substr(semi + 1);
      const auto eq = pair.find('=');
      if (eq == std::string_view::npos || pair.substr(0, eq) != kAdminCookie) continue;
      if (same_secret(pair.substr(eq + 1), token)) return true;
    }
  }
  return false;
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

void login_page(http::Response& res, int status, std::string_view message) {
  res.status = status;
  res.content_type = "text/html; charset=utf-8";
  res.body = std::string(kLoginPage);
  res.body.replace(res.body.find("MESSAGE"), 7, message);
  res.headers.emplace_back("Content-Security-Policy", std::string(kLoginPolicy));
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Cache-Control", "no-store");
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

bool admin_authorized(const http::Request& req, std::string_view token) {
  return bearer_matches(req, token) || cookie_matches(req, token);
}

void admin_unauthorized(const http::Request& req, http::Response& res, bool dashboard) {
  res.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="ratekeeper admin")");
  if (dashboard && (req.method == "GET" || req.method == "HEAD")) {
    return login_page(res, 401, "This admin listener needs its token (--admin-token-file).");
  }
  res.status = 401;
  res.content_type = "application/json";
  res.body = http::error_json(401, "unauthorized", "this admin listener needs 'Authorization: Bearer <token>' "
                                                   "(the token of --admin-token-file)", "Authorization");
}

void admin_login(const http::Request& req, http::Response& res, std::string_view token, bool secure) {
  if (req.method != "POST") {
    return login_page(res, 200, "This admin listener needs its token (--admin-token-file).");
  }
  if (!same_secret(form_field(req.body, "token"), token)) {
    res.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="ratekeeper admin")");
    return login_page(res, 401, "That is not the token.");
  }
  res.status = 303;
  res.content_type.clear();
  res.headers.emplace_back("Location", "/ui");
  std::string cookie = std::string(kAdminCookie) + "=" + std::string(token) + "; Path=/; HttpOnly; SameSite=Strict";
  if (secure) cookie += "; Secure";
  res.headers.emplace_back("Set-Cookie", std::move(cookie));
  res.headers.emplace_back("Cache-Control", "no-store");
}

}  // namespace rk::api
