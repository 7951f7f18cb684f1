// Forward-auth (server/api/forward_auth.h): the client's address from the headers of a trusted proxy only, the
// descriptors a domain's forward_auth rules build from a request, and the answer's headers and problem body.
#include "server/api/forward_auth.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <variant>
#include <vector>

namespace rk::server::api {
namespace {

struct FakeRequest {
  std::multimap<std::string, std::string> headers;
  ProxiedRequest view(std::string_view peer, std::string_view uri = "/", std::string_view method = "GET") const {
    fields.clear();
    for (const auto& [name, value] : headers) fields.push_back({name, value});
    return {peer, method, uri, "example.com", fields};
  }
  mutable std::vector<server::http::Field> fields;  // the view's
};

rules::Cidr cidr(const std::uint8_t v4[4], int prefix) {
  rules::Cidr c;
  c.bytes[10] = c.bytes[11] = 0xff;
  for (int i = 0; i < 4; ++i) c.bytes[12 + i] = v4[i];
  c.prefix = 96 + prefix;
  return c;
}

std::string ip_or_error(const ProxiedRequest& r, const std::vector<rules::Cidr>& trusted, ProxyKind kind,
                        ClientPrefixes prefixes = {}) {
  auto v = client_ip(r, trusted, {.proxy = kind, .prefixes = prefixes});
  if (auto* e = std::get_if<service::RequestError>(&v)) return "error " + e->field + ": " + e->message;
  return std::get<std::string>(v);
}

const std::uint8_t kLo[4] = {127, 0, 0, 0}, kTen[4] = {10, 0, 0, 0};

TEST(ForwardAuth, XForwardedForReadRightToLeftPastTrustedProxiesOnlyFromATrustedPeer) {
  const std::vector<rules::Cidr> trusted = {cidr(kLo, 8), cidr(kTen, 8)};
  FakeRequest r;
  r.headers.emplace("X-Forwarded-For", "203.0.113.9, 198.51.100.7, 10.1.1.1");
  for (ProxyKind k : {ProxyKind::kTraefik, ProxyKind::kCaddy, ProxyKind::kEnvoy}) {
    EXPECT_EQ(ip_or_error(r.view("127.0.0.1"), trusted, k), "198.51.100.7");  // 10.1.1.1 is our own proxy
    EXPECT_EQ(ip_or_error(r.view("192.0.2.1"), trusted, k), "192.0.2.1");     // untrusted peer: headers ignored
  }
  FakeRequest all_trusted;
  all_trusted.headers.emplace("X-Forwarded-For", "10.0.0.7");
  EXPECT_EQ(ip_or_error(all_trusted.view("127.0.0.1"), trusted, ProxyKind::kTraefik), "10.0.0.7");
}

TEST(ForwardAuth, NoProxyKindBelievesNoHeader) {
  const std::vector<rules::Cidr> trusted = {cidr(kLo, 8)};
  FakeRequest r;
  r.headers.emplace("X-Forwarded-For", "203.0.113.9");
  r.headers.emplace("X-Real-IP", "203.0.113.10");
  EXPECT_EQ(ip_or_error(r.view("127.0.0.1"), trusted, ProxyKind::kNone), "127.0.0.1");
}

// An attack: behind nginx, which sets X-Real-IP and passes the client's own headers on, a client
// that sends X-Forwarded-For chose its key (and could have someone else refused).
TEST(ForwardAuth, ClientSentForwardedForDoesNotChangeTheKeyBehindAnXRealIpProxy) {
  const std::vector<rules::Cidr> trusted = {cidr(kLo, 8)};
  FakeRequest honest, spoof;
  honest.headers.emplace("X-Real-IP", "198.51.100.7");
  spoof.headers.emplace("X-Real-IP", "198.51.100.7");
  spoof.headers.emplace("X-Forwarded-For", "203.0.113.99");
  EXPECT_EQ(ip_or_error(honest.view("127.0.0.1"), trusted, ProxyKind::kNginx), "198.51.100.7");
  EXPECT_EQ(ip_or_error(spoof.view("127.0.0.1"), trusted, ProxyKind::kNginx), "198.51.100.7");
}

TEST(ForwardAuth, UnparsableMissingOrRepeatedAddressIsRefusedNeverGuessed) {
  const std::vector<rules::Cidr> trusted = {cidr(kLo, 8)};
  FakeRequest garbage_chain;  // the entry a trusted proxy vouches for is garbage: no fallback to X-Real-IP
  garbage_chain.headers.emplace("X-Forwarded-For", "1.1.1.1, garbage");
  garbage_chain.headers.emplace("X-Real-IP", "203.0.113.5");
  EXPECT_EQ(ip_or_error(garbage_chain.view("127.0.0.1"), trusted, ProxyKind::kTraefik),
            "error X-Forwarded-For: ' garbage' is not an IP address; the client is not guessed from anything else");
  FakeRequest garbage_real;  // nginx's X-Real-IP is garbage: no fallback to X-Forwarded-For or the peer
  garbage_real.headers.emplace("X-Real-IP", "unknown");
  garbage_real.headers.emplace("X-Forwarded-For", "203.0.113.5");
  EXPECT_EQ(ip_or_error(garbage_real.view("127.0.0.1"), trusted, ProxyKind::kNginx),
            "error X-Real-IP: 'unknown' is not an IP address; the client is not guessed from anything else");
  FakeRequest missing;
  missing.headers.emplace("X-Forwarded-For", "203.0.113.5");
  EXPECT_EQ(ip_or_error(missing.view("127.0.0.1"), trusted, ProxyKind::kNginx),
            "error X-Real-IP: missing, though the nginx proxy sets it");
  FakeRequest repeated;  // the client's own copy got past the proxy
  repeated.headers.emplace("X-Real-IP", "203.0.113.5");
  repeated.headers.emplace("X-Real-IP", "198.51.100.7");
  EXPECT_EQ(ip_or_error(repeated.view("127.0.0.1"), trusted, ProxyKind::kNginx),
            "error X-Real-IP: 2 values, though the nginx proxy sets one");
  EXPECT_EQ(ip_or_error(FakeRequest{}.view("127.0.0.1"), trusted, ProxyKind::kCaddy),
            "error X-Forwarded-For: missing, though the proxy sets it");
}

TEST(ForwardAuth, ClientKeyedByPrefixAndMappedIpv4IsIpv4) {
  const std::vector<rules::Cidr> trusted = {cidr(kLo, 8)};
  FakeRequest r;
  r.headers.emplace("X-Real-IP", " 2001:db8:7:8:9::1 ");
  EXPECT_EQ(ip_or_error(r.view("127.0.0.1"), trusted, ProxyKind::kNginx), "2001:db8:7:8::/64");
  EXPECT_EQ(ip_or_error(r.view("::ffff:127.0.0.1"), trusted, ProxyKind::kNginx), "2001:db8:7:8::/64");
  EXPECT_EQ(ip_or_error(r.view("127.0.0.1"), trusted, ProxyKind::kNginx, {.ipv6 = 128}), "2001:db8:7:8:9::1");
  EXPECT_EQ(ip_or_error(r.view("2001:db8:7:8::2"), trusted, ProxyKind::kNginx), "2001:db8:7:8::/64");
  EXPECT_EQ(ip_or_error(r.view("::ffff:192.0.2.9"), trusted, ProxyKind::kNginx, {.ipv4 = 24}), "192.0.2.0/24");
}

rules::DomainConfig edge_domain() {
  rules::DomainConfig d;
  d.domain = "edge";
  d.forward_auth.enabled = true;
  d.forward_auth.descriptors = {
      {{.key = "remote_address", .source = rules::Source::kClientIp}},
      {{.key = "api_key", .source = rules::Source::kHeader, .name = "x-api-key"},
       {.key = "path", .source = rules::Source::kPathPrefix, .segments = 2}},
      {{.key = "method", .source = rules::Source::kMethod},
       {.key = "page", .source = rules::Source::kQuery, .name = "page"},
       {.key = "tier", .source = rules::Source::kValue, .name = "gold"}},
  };
  return d;
}

service::CheckRequest built(const rules::DomainConfig& d, const ProxiedRequest& r, ForwardAuthOptions o = {}) {
  auto v = build_descriptors(d, r, o);
  EXPECT_TRUE(std::holds_alternative<service::CheckRequest>(v))
      << std::get<service::RequestError>(v).field << ": " << std::get<service::RequestError>(v).message;
  return std::holds_alternative<service::CheckRequest>(v) ? std::get<service::CheckRequest>(v)
                                                          : service::CheckRequest{};
}

TEST(ForwardAuth, BuildsDescriptorsFromTheRequest) {
  const rules::DomainConfig d = edge_domain();
  FakeRequest r;
  r.headers.emplace("x-api-key", "k-123");
  service::CheckRequest req = built(d, r.view("192.0.2.4", "/v1/users/42?page=3&x=1", "POST"));
  ASSERT_EQ(req.descriptors.size(), 3u);
  EXPECT_EQ(req.descriptors[0].entries[0].second, "192.0.2.4");
  EXPECT_EQ(req.descriptors[1].entries[0].second, "k-123");
  EXPECT_EQ(req.descriptors[1].entries[1].second, "/v1/users");
  EXPECT_EQ(req.descriptors[2].entries[0].second, "POST");
  EXPECT_EQ(req.descriptors[2].entries[1].second, "3");
  EXPECT_EQ(req.descriptors[2].entries[2].second, "gold");
  // Without the header, the API-key descriptor is skipped; without ?page= the third is.
  FakeRequest bare;
  req = built(d, bare.view("192.0.2.4", "/v1/users/42"));
  ASSERT_EQ(req.descriptors.size(), 1u);
  EXPECT_EQ(req.descriptors[0].entries[0].first, "remote_address");
}

TEST(ForwardAuth, EachProxyKindsUriAndMethodHeadersAndOnlyThose) {
  rules::DomainConfig d = edge_domain();
  d.forward_auth.trusted_proxies = {cidr(kLo, 8)};
  d.forward_auth.descriptors = {{{.key = "method", .source = rules::Source::kMethod},
                                 {.key = "path", .source = rules::Source::kPath},
                                 {.key = "host", .source = rules::Source::kHost}}};
  FakeRequest r;  // what each proxy sets, and the other proxies' names as a client could add them
  r.headers.emplace("X-Original-URI", "/nginx/x");
  r.headers.emplace("X-Original-Method", "PUT");
  r.headers.emplace("X-Forwarded-Uri", "/traefik/x");
  r.headers.emplace("X-Forwarded-Method", "DELETE");
  r.headers.emplace("X-Forwarded-Host", "fwd.example");
  auto entries = [&](ProxyKind k, std::string_view peer) {
    const auto req = built(d, r.view(peer, "/v1/auth/edge", "GET"), {.proxy = k});
    return req.descriptors.empty() ? std::string("none")
                                   : req.descriptors[0].entries[0].second + " " + req.descriptors[0].entries[1].second +
                                         " " + req.descriptors[0].entries[2].second;
  };
  EXPECT_EQ(entries(ProxyKind::kNginx, "127.0.0.1"), "PUT /nginx/x fwd.example");
  EXPECT_EQ(entries(ProxyKind::kTraefik, "127.0.0.1"), "DELETE /traefik/x fwd.example");
  EXPECT_EQ(entries(ProxyKind::kCaddy, "127.0.0.1"), "DELETE /traefik/x fwd.example");
  EXPECT_EQ(entries(ProxyKind::kEnvoy, "127.0.0.1"), "GET /v1/auth/edge example.com");
  EXPECT_EQ(entries(ProxyKind::kNone, "127.0.0.1"), "GET /v1/auth/edge example.com");
  EXPECT_EQ(entries(ProxyKind::kNginx, "192.0.2.1"), "GET /v1/auth/edge example.com");  // not a trusted proxy
  // Behind Traefik, a client's X-Original-URI is just a header: it never overrides X-Forwarded-Uri.
  FakeRequest only_client;
  only_client.headers.emplace("X-Original-URI", "/elsewhere");
  only_client.headers.emplace("X-Forwarded-Method", "GET");
  only_client.headers.emplace("X-Forwarded-Host", "h");
  auto v = build_descriptors(d, only_client.view("127.0.0.1"), {.proxy = ProxyKind::kTraefik});
  ASSERT_TRUE(std::holds_alternative<service::RequestError>(v));
  EXPECT_EQ(std::get<service::RequestError>(v).field, "X-Forwarded-Uri");
}

// An attack: with /login limited, other spellings of /login were other keys.
TEST(ForwardAuth, PathVariantsGiveThePathsOwnValue) {
  rules::DomainConfig d = edge_domain();
  d.forward_auth.descriptors = {{{.key = "path", .source = rules::Source::kPath}},
                                {{.key = "prefix", .source = rules::Source::kPathPrefix, .segments = 1}}};
  for (const char* uri : {"/login", "//login", "/%6cogin", "/./login", "/x/../login", "/login;jsessionid=1",
                          "/login?next=/x/../y", "/..;/login"}) {
    const auto req = built(d, FakeRequest{}.view("192.0.2.1", uri));
    ASSERT_EQ(req.descriptors.size(), 2u);
    EXPECT_EQ(req.descriptors[0].entries[0].second, "/login") << uri;
    EXPECT_EQ(req.descriptors[1].entries[0].second, "/login") << uri;
  }
  const auto folded = built(d, FakeRequest{}.view("192.0.2.1", "/LOGIN/x"), {.path = {.fold_case = true}});
  EXPECT_EQ(folded.descriptors[0].entries[0].second, "/login/x");
  EXPECT_EQ(folded.descriptors[1].entries[0].second, "/login");
}

TEST(ForwardAuth, AnswerHeadersAndProblemBody) {
  service::CheckResponse r;
  r.overall = service::Code::kOverLimit;
  service::DescriptorStatus over;
  over.code = service::Code::kOverLimit;
  over.has_limit = true;
  over.name = "per \"ip\"";
  over.requests_per_unit = 10;
  over.window = std::chrono::minutes(1);
  over.duration_until_reset = Nanos{2'100'000'000};
  service::DescriptorStatus ok = over;
  ok.code = service::Code::kOk;
  ok.name = "daily";
  ok.requests_per_unit = 1000;
  ok.window = std::chrono::hours(24);
  ok.limit_remaining = 900;
  r.statuses = {ok, over};
  const AuthAnswer a = auth_answer(r, 429);
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.content_type, "application/problem+json");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"RateLimit-Policy", R"("daily";q=1000;w=86400, "per \"ip\"";q=10;w=60)"},
      {"RateLimit", R"("per \"ip\"";r=0;t=3)"},
      {"X-RateLimit-Limit", "10"},
      {"X-RateLimit-Remaining", "0"},
      {"X-RateLimit-Reset", "3"},
      {"Retry-After", "3"},
  };
  EXPECT_EQ(a.headers, expected);
  EXPECT_EQ(
      a.body,
      R"({"detail":"Rate limit exceeded; retry in 3 s.","status":429,"title":"Too Many Requests",)"
      R"("type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["per \"ip\""]})");
  r.overall = service::Code::kOk;
  r.statuses = {ok};
  const AuthAnswer allowed = auth_answer(r, 429);
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.body, "");
  EXPECT_EQ(allowed.headers[1].second, R"("daily";r=900;t=3)");
}

}  // namespace
}  // namespace rk::server::api
