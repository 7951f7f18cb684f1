// server/api/own_page.h: whether a request to the admin listener comes from its own page, for a browser may be made
// to send one on another site's behalf (docs/security.md): its Host must be an IP literal, a localhost name or a
// configured name (else 403: DNS rebinding), its Origin the Host itself or a configured name (else 403: a
// cross-site request), and a POST body application/json (else 415: a form or text/plain POST needs no CORS
// preflight).
//
//   for (std::string& h : admin.hosts) h = base::ascii_lower(h);  // once: names are compared lower-case
//   if (!from_own_page(req, res, hooks, admin)) return;           // refused, and answered
#pragma once

#include "server/api/routes.h"
#include "server/http/server.h"

namespace rk::server::api {

// Refuses what a browser sends on behalf of another site's page: a foreign Host (DNS rebinding reads hot keys and
// rules), a foreign Origin (a cross-site POST resets limits), and a POST body a form or a "simple" fetch can send
// without a CORS preflight (only application/json needs one).
bool from_own_page(const server::http::Request& req, server::http::Response& res, const Hooks& hooks,
                   const AdminOptions& admin);

}  // namespace rk::server::api
