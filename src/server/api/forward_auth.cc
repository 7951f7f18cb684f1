#include "server/api/forward_auth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "http_fields/rate_limit_headers.h"
#include "service/response_headers.h"

namespace rk::server::api {

namespace {

std::string_view path_of(std::string_view uri) { return uri.substr(0, uri.find_first_of("?#")); }

std::string path_prefix(std::string_view path, std::uint32_t segments) {
  std::size_t end = 0;
  for (std::uint32_t i = 0; i < segments; ++i) {
    const std::size_t next = path.find('/', end + 1);
    if (next == std::string_view::npos) return std::string(path);
    end = next;
  }
  return std::string(path.substr(0, end));
}

std::optional<std::string> query_param(std::string_view uri, std::string_view name) {
  const auto q = uri.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = uri.substr(q + 1);
  rest = rest.substr(0, rest.find('#'));
  while (!rest.empty()) {
    const std::string_view pair = rest.substr(0, rest.find('&'));
    rest.remove_prefix(std::min(rest.size(), pair.size() + 1));
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
  }
  return std::nullopt;
}

}  // namespace

namespace {

// The headers each kind of proxy sets on its auth request, named as that proxy's documentation names them; ""
// where the auth request's own value is the proxied request's (Envoy forwards the method, Host and path).
struct KindHeaders {
  std::string_view name;
  std::string_view address;  // the client's address
  bool address_chain;        // a list (X-Forwarded-For), read right to left past trusted proxies
  std::string_view method, uri, host;
};
constexpr KindHeaders kKinds[] = {
    {"none", "", false, "", "", ""},
    {"nginx", "X-Real-IP", false, "X-Original-Method", "X-Original-URI", "X-Forwarded-Host"},
    {"traefik", "X-Forwarded-For", true, "X-Forwarded-Method", "X-Forwarded-Uri", "X-Forwarded-Host"},
    {"caddy", "X-Forwarded-For", true, "X-Forwarded-Method", "X-Forwarded-Uri", "X-Forwarded-Host"},
    {"envoy", "X-Forwarded-For", true, "", "", ""},
};

const KindHeaders& headers_of(ProxyKind k) { return kKinds[static_cast<std::size_t>(k)]; }

std::string shown(std::string_view v) { return "'" + std::string(v.substr(0, 64)) + (v.size() > 64 ? "...'" : "'"); }

service::RequestError not_an_address(std::string_view header, std::string_view value) {
  return {std::string(header), shown(value) + " is not an IP address; the client is not guessed from anything else"};
}

bool is_trusted(const IpAddress& a, const std::vector<rules::Cidr>& trusted) {
  return std::any_of(trusted.begin(), trusted.end(), [&](const rules::Cidr& c) { return in_cidr(a, c); });
}

// The one value of a header the proxy sets. Missing means the proxy is not the kind configured; repeated means a
// client's copy got past it: either way, nothing in it can be believed.
std::variant<std::string_view, service::RequestError> proxy_header(const ProxiedRequest& r, std::string_view name,
                                                                   const KindHeaders& kind) {
  std::string_view only;
  const std::size_t n = r.each(name, [&](std::string_view v) { only = v; });
  if (n == 1) return only;
  return service::RequestError{
      std::string(name), n == 0
                             ? "missing, though the " + std::string(kind.name) + " proxy sets it"
                             : std::to_string(n) + " values, though the " + std::string(kind.name) + " proxy sets one"};
}

// Right to left: the first address a trusted proxy did not add is the client; when all are trusted, the first.
std::variant<IpAddress, service::RequestError> from_chain(const ProxiedRequest& r, std::string_view header,
                                                          const std::vector<rules::Cidr>& trusted) {
  std::vector<std::string_view> hops;
  r.each(header, [&](std::string_view value) {
    while (true) {
      const auto comma = value.find(',');
      hops.push_back(value.substr(0, comma));
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  });
  if (hops.empty()) return service::RequestError{std::string(header), "missing, though the proxy sets it"};
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    const auto a = parse_ip(*it);
    if (!a) return not_an_address(header, *it);
    if (!is_trusted(*a, trusted) || it + 1 == hops.rend()) return *a;
  }
  return not_an_address(header, "");  // not reached: the loop returns on its last hop
}

// The proxied request's method, URI or host: from the proxy's header when the peer is a trusted proxy of a kind
// that sets one, else the auth request's own.
std::variant<std::string_view, service::RequestError> original(const ProxiedRequest& r, bool trusted_peer,
                                                               const KindHeaders& kind, std::string_view header,
                                                               std::string_view own) {
  if (!trusted_peer || header.empty()) return own;
  return proxy_header(r, header, kind);
}

}  // namespace

std::optional<ProxyKind> parse_proxy_kind(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kKinds); ++i) {
    if (kKinds[i].name == name) return static_cast<ProxyKind>(i);
  }
  return std::nullopt;
}

std::variant<std::string, service::RequestError> client_ip(const ProxiedRequest& r,
                                                           const std::vector<rules::Cidr>& trusted_proxies,
                                                           const ForwardAuthOptions& options) {
  const auto peer = parse_ip(r.peer_ip);
  if (!peer) return not_an_address("peer", r.peer_ip);
  const KindHeaders& kind = headers_of(options.proxy);
  if (kind.address.empty() || !is_trusted(*peer, trusted_proxies)) return client_key(*peer, options.prefixes);
  if (kind.address_chain) {
    auto a = from_chain(r, kind.address, trusted_proxies);
    if (auto* e = std::get_if<service::RequestError>(&a)) return std::move(*e);
    return client_key(std::get<IpAddress>(a), options.prefixes);
  }
  auto value = proxy_header(r, kind.address, kind);
  if (auto* e = std::get_if<service::RequestError>(&value)) return std::move(*e);
  const auto a = parse_ip(std::get<std::string_view>(value));
  if (!a) return not_an_address(kind.address, std::get<std::string_view>(value));
  return client_key(*a, options.prefixes);
}

std::variant<service::CheckRequest, service::RequestError> build_descriptors(const rules::DomainConfig& domain,
                                                                             const ProxiedRequest& r,
                                                                             const ForwardAuthOptions& options) {
  service::CheckRequest req;
  req.domain = domain.domain;
  const KindHeaders& kind = headers_of(options.proxy);
  // Whether the peer is a trusted proxy: asked only by entries that read the proxied request's method, URI or host
  // (parsing the peer's address for every request was a few percent of a forward-auth request's user time).
  std::optional<bool> trusted;
  const auto trusted_peer = [&] {
    if (!trusted) {
      const auto peer = parse_ip(r.peer_ip);
      trusted = peer && is_trusted(*peer, domain.forward_auth.trusted_proxies);
    }
    return *trusted;
  };
  std::optional<std::string> ip, path;
  for (const auto& entries : domain.forward_auth.descriptors) {
    service::CheckDescriptor d;
    bool complete = true;
    for (const rules::EntrySource& e : entries) {
      std::optional<std::string> value;
      std::variant<std::string_view, service::RequestError> from_proxy;
      switch (e.source) {
        case rules::Source::kClientIp:
          if (!ip) {
            auto found = client_ip(r, domain.forward_auth.trusted_proxies, options);
            if (auto* err = std::get_if<service::RequestError>(&found)) return std::move(*err);
            ip = std::get<std::string>(std::move(found));
          }
          value = ip;
          break;
        case rules::Source::kHeader: {
          r.each(e.name, [&](std::string_view v) {
            if (!value) value = std::string(v);
          });
          break;
        }
        case rules::Source::kMethod: from_proxy = original(r, trusted_peer(), kind, kind.method, r.method); break;
        case rules::Source::kPath:
        case rules::Source::kPathPrefix:
        case rules::Source::kQuery: from_proxy = original(r, trusted_peer(), kind, kind.uri, r.uri); break;
        case rules::Source::kHost: from_proxy = original(r, trusted_peer(), kind, kind.host, r.host); break;
        case rules::Source::kValue: value = e.name; break;
      }
      if (auto* err = std::get_if<service::RequestError>(&from_proxy)) return std::move(*err);
      const std::string_view found = std::get<std::string_view>(from_proxy);
      if (e.source == rules::Source::kPath || e.source == rules::Source::kPathPrefix) {
        // As the proxy routes it: the variants of one path must share its limit (uri_path.h).
        if (!path) path = normalize_path(path_of(found), options.path);
        value = e.source == rules::Source::kPath ? *path : path_prefix(*path, e.segments);
      } else if (e.source == rules::Source::kQuery) {
        value = query_param(found, e.name);
      } else if (e.source == rules::Source::kMethod || e.source == rules::Source::kHost) {
        value = std::string(found);
      }
      if (!value) {
        complete = false;
        break;
      }
      d.entries.emplace_back(e.key, std::move(*value));
    }
    if (complete) req.descriptors.push_back(std::move(d));
  }
  return req;
}

namespace {

// Passes the fields on to `inner`, keeping Retry-After's value, so that the body says the same wait.
class KeepRetryAfter final : public http_fields::FieldSink {
 public:
  explicit KeepRetryAfter(http_fields::FieldSink& inner) : inner_(inner) {}
  std::string& value_of(std::string_view name) override {
    std::string& v = inner_.value_of(name);
    if (name == http_fields::kRetryAfter) {
      at_ = &v;
      from_ = v.size();
    }
    return v;
  }
  void end_field() override {
    if (at_) wait.assign(*at_, from_);
    at_ = nullptr;
    inner_.end_field();
  }
  std::string wait = "1";  // the binding limit's Retry-After, so body and field agree

 private:
  http_fields::FieldSink& inner_;
  std::string* at_ = nullptr;
  std::size_t from_ = 0;
};

}  // namespace

AuthAnswer auth_answer(const service::CheckResponse& r, int deny_status, http_fields::FieldSink& fields) {
  AuthAnswer a;
  if (r.overall != service::Code::kOverLimit) {
    service::rate_limit_headers(r, fields);
    return a;
  }
  KeepRetryAfter kept(fields);
  service::rate_limit_headers(r, kept);
  const std::string& wait = kept.wait;
  a.status = deny_status;
  a.content_type = "application/problem+json";
  nlohmann::json violated = nlohmann::json::array();
  for (const auto& st : r.statuses) {
    if (st.code == service::Code::kOverLimit) violated.push_back(st.name);
  }
  nlohmann::json body = {{"type", "https://iana.org/assignments/http-problem-types#quota-exceeded"},
                         {"title", "Too Many Requests"},
                         {"status", deny_status},
                         {"detail", wait == std::to_string(http_fields::kMaxSeconds)
                                        ? std::string("Rate limit exceeded; no wait lets this request through.")
                                        : "Rate limit exceeded; retry in " + wait + " s."},
                         {"violated-policies", std::move(violated)}};
  a.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return a;
}

AuthAnswer auth_answer(const service::CheckResponse& r, int deny_status) {
  http_fields::FieldPairs fields;
  AuthAnswer a = auth_answer(r, deny_status, fields);
  a.headers = std::move(fields.fields);
  return a;
}

}  // namespace rk::server::api
