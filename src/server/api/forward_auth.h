// server/api/forward_auth.h: forward-auth for proxies (nginx auth_request, Traefik ForwardAuth, Envoy ext_authz
// over HTTP): descriptors built from the proxied request as the domain's `forward_auth:` rules say, and the answer
// as status and headers.
//
// Allowed: 200. Refused: the domain's deny_status (default 429; nginx's auth_request only passes 401/403 on, so
// the nginx example maps 403 to 429), with Retry-After, the IETF draft's RateLimit-Policy and RateLimit fields,
// the legacy X-RateLimit-Limit/-Remaining/-Reset, and an application/problem+json body. Both answers carry the
// rate-limit fields, so clients can pace themselves before they are refused.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/config.h"
#include "server/app/service.h"

namespace rk::api {

// What forward-auth reads of the proxied request.
struct ProxiedRequest {
  std::string_view peer_ip;  // the TCP peer (the proxy, or the client when there is none)
  std::string_view method;   // X-Original-Method / X-Forwarded-Method, else the auth request's own
  std::string_view uri;      // X-Original-URI / X-Forwarded-Uri, else the auth request's own
  std::string_view host;     // X-Forwarded-Host, else Host
  std::function<std::vector<std::string_view>(std::string_view name)> headers;  // all values of a header
};

// The client's address: X-Forwarded-For read right to left past trusted proxies, or X-Real-IP, but only when the
// peer itself is a trusted proxy; otherwise the peer. Returns a normalised textual address.
std::string client_ip(const ProxiedRequest& r, const std::vector<rules::Cidr>& trusted);

// Builds one descriptor per `forward_auth.descriptors` item whose every entry has a value (a missing header
// skips that descriptor, as Envoy's request_headers action does).
app::CheckRequest build_descriptors(const rules::DomainConfig& domain, const ProxiedRequest& r);

struct AuthAnswer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
};

AuthAnswer auth_answer(const app::CheckResponse& response, int deny_status);

// The rate-limit header fields alone, for any answer (the JSON API adds them too).
std::vector<std::pair<std::string, std::string>> rate_limit_headers(const app::CheckResponse& response);

}  // namespace rk::api
