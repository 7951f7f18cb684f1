// server/api/admin_auth.h: the admin listener's token (--admin-token-file): which requests carry it, the 401 for
// those that do not, and the dashboard's way in, since a browser cannot add a header to a page load.
//
//   if (!token.empty() && !health_path && !admin_authorized(req, token)) return admin_unauthorized(req, res);
//
// A request carries the token in `Authorization: Bearer <token>` (scripts, Prometheus' `authorization:` setting)
// or in the cookie kAdminCookie. A browser gets the cookie from the login form: GET /ui without the token answers
// 401 with the form, which POSTs the token (a form body, the one form POST the admin listener takes) to
// /ui/login; the right token is answered 303 to /ui with the cookie set HttpOnly (the page's scripts never see
// it) and SameSite=Strict (no other site's page sends it), Secure over TLS. Every comparison takes the same time
// wherever the strings differ.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "server/http/server.h"

namespace rk::api {

inline constexpr std::string_view kAdminCookie = "ratekeeper_admin_token";
inline constexpr std::string_view kLoginPath = "/ui/login";

// Equal or not, in time that depends on `given`'s length only, never on where it differs from `secret`.
bool same_secret(std::string_view given, std::string_view secret);

// The request carries `token` (not empty) in its Authorization header or its cookie.
bool admin_authorized(const http::Request& req, std::string_view token);

// 401 with `WWW-Authenticate: Bearer`: the house error JSON, or for a browser's GET of the dashboard's page, the
// login form.
void admin_unauthorized(const http::Request& req, http::Response& res, bool dashboard);

// POST /ui/login (form field `token`): 303 to /ui with the cookie, or 401 with the form again. `secure`: the
// listener speaks TLS, so the cookie is marked Secure.
void admin_login(const http::Request& req, http::Response& res, std::string_view token, bool secure);

}  // namespace rk::api
