// server/api/admin_session.h: the dashboard's sign-in cookie, a session the server signs rather than the token
// itself, so that a cookie read off a disk, a proxy's log or a shared browser profile neither tells the token nor
// outlives its session.
//
//   AdminSessions sessions;                                // its own secret, drawn at start
//   std::string value = sessions.issue(token, now);        // "1767225600.<32 hex digits>.<64 hex digits>"
//   if (sessions.valid(value, token, now)) ...             // signed here, for this token, not expired
//
// A value is `<expiry, Unix seconds>.<session id: 16 random bytes in hex>.<signature>`, the signature being the
// HMAC-SHA256 of `<expiry>.<session id>` under a key that is itself the HMAC-SHA256 of the token under the
// process's secret (32 random bytes, kept in memory only). So nobody without the secret can make a value; a value
// is refused after its expiry, once the token is rotated (the key was the old token's), and after a restart (a
// new secret: browsers sign in again). Signatures are compared in constant time.
//
// Thread safety: const after construction; every member may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <string>
#include <string_view>

#include "ratekeeper/units.h"

namespace rk::server::api {

class AdminSessions {
 public:
  // Throws std::runtime_error when the system has no random bytes to give.
  explicit AdminSessions(std::chrono::seconds lifetime = std::chrono::hours(12));

  // A new session for whoever showed `token` at `now` (wall time since the Unix epoch).
  std::string issue(std::string_view token, Nanos now) const;
  // `value` is a session this process issued for `token` and it has not expired at `now`.
  bool valid(std::string_view value, std::string_view token, Nanos now) const;
  std::chrono::seconds lifetime() const { return lifetime_; }

 private:
  // The signature of `signed_part` for `token`, in hex.
  std::string sign(std::string_view signed_part, std::string_view token) const;

  const std::chrono::seconds lifetime_;
  std::array<unsigned char, 32> secret_{};
};

}  // namespace rk::server::api
