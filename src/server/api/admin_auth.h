// server/api/admin_auth.h: the admin listener's token (--admin-token-file): which requests carry it, the 401 for
// those that do not, the 429 for an address that sent too many wrong ones, and the dashboard's sign-in, since a
// browser cannot add a header to a page load.
//
//   auto auth = std::make_shared<AdminAuth>(token_file, AdminAuthOptions{.secure_cookie = tls});
//   if (!health_path && auth->check(req, res, dashboard_page) != AdminAuth::kAdmitted) return;  // res: the answer
//
// A request carries the token in `Authorization: Bearer <token>` (scripts, Prometheus' `authorization:` setting),
// or a session in the cookie kAdminCookie; only the first of each is looked at, so that one request is one guess.
// A browser gets the cookie from the sign-in form: GET /ui without either answers 401 with the form, which POSTs
// the token (a form body, the one form POST the admin listener takes) to /ui/login; the right token is answered
// 303 to /ui with a new session (admin_session.h: signed, never the token, expiring, void once the token is
// rotated) in a cookie that is HttpOnly (the page's scripts never see it), SameSite=Strict (no other site's page
// sends it), Path=/, and Secure over TLS. Tokens and signatures are compared in constant time.
//
// Wrong tokens and sessions are counted per client address (admin_throttle.h). An address that has spent its tries
// is answered 429 with Retry-After, whatever it sends and without a look at it, the right token included: while
// guessing is throttled, a guess that comes right is not told so. A request that carries neither a token nor the
// cookie guesses nothing: it gets its 401 (or the form) and spends no try.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include "base/secret_file.h"
#include "ratekeeper/clock.h"
#include "server/api/admin_session.h"
#include "server/api/admin_throttle.h"
#include "server/http/server.h"

namespace rk::server::api {

inline constexpr std::string_view kAdminCookie = "ratekeeper_admin_session";
inline constexpr std::string_view kLoginPath = "/ui/login";
// The shortest token --admin-token-file takes: one that is guessed in fewer tries than a throttled address gets in
// years would protect nothing.
inline constexpr std::size_t kMinAdminTokenBytes = 16;

// Equal or not, in time that depends on `given`'s length only, never on where it differs from `secret`.
bool same_secret(std::string_view given, std::string_view secret);

struct AdminAuthOptions {
  bool secure_cookie = false;  // the listener speaks TLS: the cookie is marked Secure
  AdminThrottleOptions throttle;
  std::chrono::seconds session_lifetime = std::chrono::hours(12);
  std::shared_ptr<const Clock> clock;  // wall time, for the throttle and the sessions; null: the system's
};

class AdminAuth {
 public:
  enum Verdict {
    kAdmitted,      // the request carries the token or a valid session: serve it
    kAnswered,      // the sign-in form or a successful sign-in, in `res`
    kUnauthorized,  // 401 in `res`
    kThrottled,     // 429 in `res`
  };

  // `token`: the file's token as of each request (a rotated file takes effect at once).
  explicit AdminAuth(std::shared_ptr<base::SecretFile> token, AdminAuthOptions options = {});

  // A request to a route behind the token; `dashboard_page`: a browser's page of the dashboard, answered with the
  // sign-in form rather than JSON.
  Verdict check(const server::http::Request& req, server::http::Response& res, bool dashboard_page);

 private:
  Verdict sign_in(const server::http::Request& req, server::http::Response& res, std::string_view token, Nanos now);

  const std::shared_ptr<base::SecretFile> token_;
  const AdminAuthOptions options_;
  const std::shared_ptr<const Clock> clock_;
  const AdminSessions sessions_;
  AdminThrottle throttle_;
};

}  // namespace rk::server::api
