// server/api/routes.h: the HTTP endpoints, public and admin, as handlers for rk::server::http::Server
// (public_routes.cc, admin_routes.cc, rules_json.cc; what every route answers with: respond.h; the admin listener's
// own-page checks: own_page.h).
//
// Public listener:  POST /v1/check (JSON decision API), POST /v1/acquire and /v1/release (concurrency leases), ANY
// /v1/auth/<domain> (forward-auth; with --proxy envoy,
//                   /v1/auth/<domain>/<the proxied path>), GET /healthz, /readyz; envoyproxy/ratelimit's
//                   POST /json and GET /healthcheck (server/api/envoy_json.h)
// Admin listener:   GET /metrics, GET /v1/rules, POST /v1/admin/peek (state and matched rule, nothing charged),
//                   POST /v1/admin/reset, GET /healthz, /readyz; and the routes of the layers above it
//                   (AdminOptions::routes: the dashboard's, dashboard/routes.h, added where serve wires the service)
// Errors are JSON: {"error": {"code": 400, "field": "descriptors[0].entries", "message": "must not be empty"}}.
//
// With a token (--admin-token-file), the admin listener answers only requests that carry it, /healthz and /readyz
// aside (server/api/admin_auth.h: a header, or the session cookie of the dashboard's login form at /ui/login).
// The admin listener answers browsers' requests only when they are its own (docs/security.md): a Host that is an IP
// literal, a localhost name or a configured name (else 403: DNS rebinding), an Origin that is the Host itself or a
// configured name (else 403: cross-site requests), and POST bodies only as application/json (else 415: a form or
// text/plain POST needs no CORS preflight).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/admin_auth.h"
#include "server/api/forward_auth.h"
#include "service/service.h"
#include "server/http/server.h"

namespace rk::server::api {

struct Hooks {
  // After every decision (protocol "http" or "auth"), with how long it took.
  std::function<void(std::string_view protocol, std::string_view domain, const service::CheckResponse&, Nanos took)>
      decided;
  // A request refused as malformed, with a short reason ("invalid_json", "invalid_request", "not_found", ...).
  std::function<void(std::string_view protocol, std::string_view reason)> bad_request;
  // Whether the service should receive traffic (rules loaded, not draining).
  std::function<bool()> ready;
  // The Prometheus exposition, for GET /metrics.
  std::function<std::string()> metrics;
};

// Routes that a layer above adds to the admin listener (the dashboard's: dashboard/routes.h). They are asked in
// order after the own-page checks and the token, exactly as the admin listener's own routes, before the health
// probes and the 404.
struct AdminRoute {
  // Answers the request and returns true, or returns false and leaves it to the next route.
  std::function<bool(const server::http::Request&, server::http::Response&)> handle;
  // Whether the path is a page a browser loads (AdminAuth::check's dashboard_page: answered with the sign-in form
  // rather than JSON). Null: none is.
  std::function<bool(std::string_view path)> page;
};

struct AdminOptions {
  // Host names, besides IP literals and localhost names, that the admin listener is reached by (--admin-hosts):
  // the name a reverse proxy or a scraper uses. Compared without port, case-insensitively.
  std::vector<std::string> hosts;
  // Not null: every request but /healthz and /readyz needs the token as of that request, or a session it signed
  // in (server/api/admin_auth.h; a rotated file takes effect at once, and signs out the old token's sessions).
  std::shared_ptr<AdminAuth> auth;
  // The routes of the layers above (AdminRoute).
  std::vector<AdminRoute> routes;
};

server::http::Handler public_routes(service::Service& service, Hooks hooks, ForwardAuthOptions forward = {});
server::http::Handler admin_routes(service::Service& service, Hooks hooks, AdminOptions admin = {});

// The metrics alone at `path` (--prometheus's listener: no token, no other route), as the admin listener's /metrics
// answers; 404 elsewhere.
server::http::Handler metrics_routes(Hooks hooks, std::string path);

// GET /v1/rules: the active rules as JSON (version, load time, every rule and its parameters).
std::string rules_json(const rules::RuleSet* set);

}  // namespace rk::server::api
