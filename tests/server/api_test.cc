#include <gtest/gtest.h>

#include <map>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/content_hash.h"
#include "rules/parse.h"
#include "rules/ruleset.h"
#include "server/api/check_json.h"
#include "server/api/forward_auth.h"
#include "server/api/routes.h"
#include "server/http/response_writer.h"

namespace rk::api {
namespace {

service::RequestError bad(std::string_view body) {
  auto v = parse_check_request(body);
  EXPECT_TRUE(std::holds_alternative<service::RequestError>(v)) << body;
  return std::holds_alternative<service::RequestError>(v) ? std::get<service::RequestError>(v)
                                                          : service::RequestError{};
}

TEST(CheckJson, ParsesSnakeAndCamelCase) {
  auto v = parse_check_request(R"({"domain":"edge","hitsAddend":3,"descriptors":[
      {"entries":[{"key":"remote_address","value":"10.0.0.1"},{"key":"path"}],"hits_addend":"7",
       "limit":{"requestsPerUnit":5,"unit":"minute"}}]})");
  ASSERT_TRUE(std::holds_alternative<service::CheckRequest>(v));
  const auto& r = std::get<service::CheckRequest>(v);
  EXPECT_EQ(r.domain, "edge");
  EXPECT_EQ(r.hits_addend, 3u);
  ASSERT_EQ(r.descriptors.size(), 1u);
  EXPECT_EQ(r.descriptors[0].entries[1], (std::pair<std::string, std::string>{"path", ""}));
  EXPECT_EQ(r.descriptors[0].hits_addend, 7u);
  ASSERT_TRUE(r.descriptors[0].limit);
  EXPECT_EQ(r.descriptors[0].limit->requests_per_unit, 5u);
  EXPECT_EQ(r.descriptors[0].limit->unit, rules::Unit::kMinute);
}

TEST(CheckJson, EachKindOfBadBody) {
  EXPECT_EQ(bad("{not json").message, "the body is not valid JSON");
  EXPECT_EQ(bad("").message, "the body is not valid JSON");
  EXPECT_EQ(bad("[1,2]").message, "the body must be a JSON object");
  EXPECT_EQ(bad(R"({"domain":5})").field, "domain");
  EXPECT_EQ(bad(R"({"domain":"d","descriptors":{}})").message, "must be a list");
  EXPECT_EQ(bad(R"({"domain":"d","descriptors":[5]})").field, "descriptors[0]");
  EXPECT_EQ(bad(R"({"domain":"d","descriptors":[{"entries":[{"key":1}]}]})").field, "descriptors[0].entries[0].key");
  EXPECT_EQ(bad(R"({"domain":"d","descriptors":[{"entries":[],"hits_addend":-1}]})").message, "must not be negative");
  EXPECT_EQ(bad(R"({"domain":"d","hits_addend":99999999999})").message, "99999999999 is over the limit of 4294967295");
  EXPECT_EQ(bad(R"({"domain":"d","hits_addend":"12x"})").message, "must be a whole number");
  EXPECT_EQ(bad(R"({"domain":"d","descriptors":[{"entries":[],"limit":{"unit":"SECOND"}}]})").field,
            "descriptors[0].limit.requests_per_unit");
  EXPECT_EQ(
      bad(R"({"domain":"d","descriptors":[{"entries":[],"limit":{"requests_per_unit":1,"unit":"EON"}}]})").message,
      "'EON' is not a unit (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR)");
  const auto unknown = bad(R"({"domain":"d","descriptorz":[]})");
  EXPECT_EQ(unknown.field, "descriptorz");
  EXPECT_EQ(unknown.message, "unknown field");
  EXPECT_EQ(bad("{\"domain\":\"\xff\"}").message, "the body is not valid JSON");  // not UTF-8
}

TEST(CheckJson, ResponseShape) {
  service::CheckResponse r;
  r.overall = service::Code::kOverLimit;
  service::DescriptorStatus st;
  st.code = service::Code::kOverLimit;
  st.has_limit = true;
  st.name = "per_ip";
  st.requests_per_unit = 10;
  st.unit = rules::Unit::kMinute;
  st.window = std::chrono::minutes(1);
  st.duration_until_reset = Nanos{1'500'000'000};
  st.retry_after = Nanos{1'500'000'000};
  r.statuses.push_back(st);
  r.statuses.push_back(service::DescriptorStatus{});
  EXPECT_EQ(check_response_json(r),
            R"({"overall_code":"OVER_LIMIT","statuses":[{"algorithm":"fixed_window","code":"OVER_LIMIT",)"
            R"("current_limit":{"name":"per_ip","requests_per_unit":10,"unit":"MINUTE"},)"
            R"("duration_until_reset":"1.500s","limit_remaining":0,"retry_after_seconds":1.5,"window_seconds":60.0},)"
            R"({"code":"OK","limit_remaining":0}]})");
}

// What the answers and /v1/rules say of a rule never contradicts itself: a blocked rule runs no algorithm (its
// "algorithm" says "blocked", the same in every answer, so that no reader shows a missing one) and never admits; a `window:` rule has no unit; every parameter a rule runs with is shown, defaults
// and a calendar month included.
std::shared_ptr<const rules::RuleSet> rule_set(const std::string& text) {
  rules::DomainConfig d;
  const auto errors = rules::parse_domain("edge.yaml", text, d);
  EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].to_string());
  std::vector<rules::DomainConfig> domains;
  domains.push_back(std::move(d));
  return rules::RuleSet::build(std::move(domains), nullptr, rules::BuildOptions{}, base::content_hash(text));
}

constexpr const char* kSelfConsistentRules = R"(domain: edge
descriptors:
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: windowed
    rate_limit: {requests_per_unit: 7, window: 10s, algorithm: gcra}
  - key: monthly
    rate_limit: {unit: month, requests_per_unit: 1000, algorithm: fixed_window, align: calendar}
  - key: abuser
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: earrrl, half_life: 2s}
)";

nlohmann::json rule_named(const nlohmann::json& rules, const std::string& path) {
  for (const auto& r : rules["domains"][0]["rules"]) {
    if (r["path"] == path) return r;
  }
  ADD_FAILURE() << "no rule " << path << " in " << rules.dump();
  return {};
}

TEST(RulesJson, EveryParameterARuleRunsWithAndNothingItDoesNot) {
  const auto set = rule_set(kSelfConsistentRules);
  const auto j = nlohmann::json::parse(rules_json(set.get()));
  const auto blocked = rule_named(j, "blocked");
  EXPECT_EQ(blocked["blocked"], true);
  EXPECT_EQ(blocked["algorithm"], "blocked") << blocked.dump();
  EXPECT_EQ(blocked["window_seconds"], 1.0) << blocked.dump();
  EXPECT_FALSE(blocked.contains("count_refused")) << blocked.dump();
  const auto windowed = rule_named(j, "windowed");
  EXPECT_FALSE(windowed.contains("unit")) << windowed.dump();
  EXPECT_EQ(windowed["window_seconds"], 10.0);
  EXPECT_EQ(windowed["burst"], 0.0);  // gcra's default, shown though the file does not say it
  EXPECT_FALSE(windowed.contains("count_refused")) << "gcra takes no count_refused";
  const auto monthly = rule_named(j, "monthly");
  EXPECT_EQ(monthly["align"], "calendar");
  EXPECT_EQ(monthly["calendar_period"], "month");
  EXPECT_FALSE(monthly.contains("window_seconds")) << "a calendar month has no fixed length: " << monthly.dump();
  EXPECT_EQ(monthly["count_refused"], true);  // in rules files, as envoyproxy/ratelimit counts every hit
  EXPECT_EQ(rule_named(j, "abuser")["count_refused"], true);  // earrrl's default
}

TEST(CheckJson, ABlockedRuleAndAWindowRuleSayNothingThatIsNotSo) {
  const auto set = rule_set(kSelfConsistentRules);
  const auto status_of = [&](const std::string& key) {
    const rules::Match m = set->match("edge", std::vector<rules::Entry>{{key, "x"}});
    EXPECT_TRUE(m.rule) << key;
    service::DescriptorStatus st;
    st.rule = m.rule;
    st.has_limit = true;
    st.requests_per_unit = m.rule->limit->requests_per_unit;
    st.unit = m.rule->limit->unit;
    st.window = m.rule->limit->spec.window;
    st.algorithm = m.rule->limit->spec.algorithm;
    st.code = service::Code::kOverLimit;
    st.retry_after = kNever;
    service::CheckResponse r;
    r.statuses.push_back(st);
    return nlohmann::json::parse(check_response_json(r))["statuses"][0];
  };
  const auto blocked = status_of("blocked");
  EXPECT_EQ(blocked["blocked"], true);
  EXPECT_EQ(blocked["algorithm"], "blocked") << blocked.dump();
  EXPECT_EQ(blocked["retry_after_seconds"], -1.0);
  const auto windowed = status_of("windowed");
  EXPECT_FALSE(windowed["current_limit"].contains("unit")) << windowed.dump();
  EXPECT_EQ(windowed["window_seconds"], 10.0);
  EXPECT_EQ(windowed["algorithm"], "gcra");
}

// One shape for every error answer, the HTTP server's own (a malformed request) and the API's (a bad field).
TEST(ErrorJson, OneShapeWithTheFieldWhenOneIsAtFault) {
  const auto api = nlohmann::json::parse(http::error_json(400, "invalid_request", "must not be empty", "domain"));
  EXPECT_EQ(api,
            nlohmann::json::parse(
                R"({"error":{"code":400,"reason":"invalid_request","field":"domain","message":"must not be empty"}})"));
  const auto server = nlohmann::json::parse(http::error_json(400, "malformed", "bad request line"));
  EXPECT_EQ(server,
            nlohmann::json::parse(R"({"error":{"code":400,"reason":"malformed","message":"bad request line"}})"));
}

TEST(ProtoDuration, Format) {
  EXPECT_EQ(proto_duration(Nanos{0}), "0s");
  EXPECT_EQ(proto_duration(Nanos{40'000'000'000}), "40s");
  EXPECT_EQ(proto_duration(Nanos{1'500'000'000}), "1.500s");
  EXPECT_EQ(proto_duration(Nanos{1'000'001}), "0.001000001s");
  EXPECT_EQ(proto_duration(Nanos{-5}), "0s");
}

struct FakeRequest {
  std::multimap<std::string, std::string> headers;
  ProxiedRequest view(std::string_view peer, std::string_view uri = "/", std::string_view method = "GET") const {
    fields.clear();
    for (const auto& [name, value] : headers) fields.push_back({name, value});
    return {peer, method, uri, "example.com", fields};
  }
  mutable std::vector<http::Field> fields;  // the view's
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

// The attack of issue 19: behind nginx, which sets X-Real-IP and passes the client's own headers on, a client
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

// The attack of issue 19: with /login limited, other spellings of /login were other keys.
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
}  // namespace rk::api
