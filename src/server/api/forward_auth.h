// server/api/forward_auth.h: forward-auth for proxies (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth,
// Envoy ext_authz over HTTP): descriptors built from the proxied request as the domain's `forward_auth:` rules say,
// and the answer as status and headers.
//
// Allowed: 200. Refused: the domain's deny_status (default 429; nginx's auth_request only passes 401/403 on, so
// the nginx example maps 403 to 429), with Retry-After, the IETF draft's RateLimit-Policy and RateLimit fields,
// the legacy X-RateLimit-Limit/-Remaining/-Reset, and an application/problem+json body. Both answers carry the
// rate-limit fields, so clients can pace themselves before they are refused.
#pragma once

#include <functional>
#include <string>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "http_fields/rate_limit_headers.h"
#include "rules/config.h"
#include "server/api/client_address.h"
#include "server/api/uri_path.h"
#include "server/http/server.h"
#include "service/service.h"

namespace rk::server::api {

// Which proxy sits in front, and so which headers carry the proxied request (docs/service.md#forward-auth). Each
// kind believes exactly the headers that proxy sets, never another as a fallback: a client's own X-Forwarded-For
// must not stand in for the X-Real-IP its proxy wrote. kNone (the default) believes no header at all.
enum class ProxyKind : std::uint8_t { kNone, kNginx, kTraefik, kCaddy, kEnvoy };
std::optional<ProxyKind> parse_proxy_kind(std::string_view name);  // "none", "nginx", "traefik", "caddy", "envoy"

struct ForwardAuthOptions {
  ProxyKind proxy = ProxyKind::kNone;
  PathOptions path;         // how `path` and `path_prefix` values are normalised (uri_path.h)
  ClientPrefixes prefixes;  // how `client_ip` values are keyed (client_address.h)
};

// The auth request as received. What the proxied request was comes from the headers the proxy kind sets, and only
// when the peer is one of the domain's trusted proxies; otherwise the auth request stands for itself.
struct ProxiedRequest {
  std::string_view peer_ip;                     // the TCP peer (the proxy, or the client when there is none)
  std::string_view method;                      // the auth request's own
  std::string_view uri;                         // the auth request's own target (Envoy: what follows /v1/auth/<domain>)
  std::string_view host;                        // the auth request's Host
  std::span<const server::http::Field> fields;  // the auth request's header fields, in the order received

  // Calls f(value) for each value of the header `name` (case-insensitive), in order; returns how many there were.
  template <class F>
  std::size_t each(std::string_view name, F&& f) const {
    std::size_t n = 0;
    for (const server::http::Field& field : fields) {
      // The lengths first, here: most fields are not the one asked for.
      if (field.name.size() != name.size() || !server::http::is_field(field, name)) continue;
      f(field.value);
      ++n;
    }
    return n;
  }
};

// The client's key (client_key: its address cut to the configured prefix), or an error naming the header when the
// proxy's header is missing, repeated or not an address: never a guess from another header.
std::variant<std::string, service::RequestError> client_ip(const ProxiedRequest& r,
                                                           const std::vector<rules::Cidr>& trusted,
                                                           const ForwardAuthOptions& options);

// Builds one descriptor per `forward_auth.descriptors` item whose every entry has a value (a missing header
// skips that descriptor, as Envoy's request_headers action does); an error when a value the descriptors need is
// in a proxy header that is missing or malformed.
std::variant<service::CheckRequest, service::RequestError> build_descriptors(const rules::DomainConfig& domain,
                                                                             const ProxiedRequest& r,
                                                                             const ForwardAuthOptions& options);

struct AuthAnswer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
};

AuthAnswer auth_answer(const service::CheckResponse& response, int deny_status);
// The same, the header fields written to `fields` rather than to the answer's headers.
AuthAnswer auth_answer(const service::CheckResponse& response, int deny_status, http_fields::FieldSink& fields);

// The header fields as an HTTP answer's own field lines (server::http::Response::field_lines): no allocation per field.
class ResponseFields final : public http_fields::FieldSink {
 public:
  explicit ResponseFields(server::http::Response& res) : res_(res) {}
  std::string& value_of(std::string_view name) override { return res_.begin_field(name); }
  void end_field() override { res_.end_field(); }

 private:
  server::http::Response& res_;
};

}  // namespace rk::server::api
