// The HTTP API's JSON (server/api/check_json.h): check requests read in snake and camel case, every kind of bad
// body, the answer's shape, the rules as /v1/rules lists them (rules_json.cc), and the one shape of every error.
#include "server/api/check_json.h"

#include <gtest/gtest.h>

#include <variant>

#include <nlohmann/json.hpp>

#include "base/content_hash.h"
#include "rules/parse.h"
#include "rules/ruleset.h"
#include "server/api/routes.h"
#include "server/http/response_writer.h"

namespace rk::server::api {
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
// "algorithm" says "blocked", the same in every answer, so that no reader shows a missing one) and never admits; a
// `window:` rule has no unit; every parameter a rule runs with is shown, defaults and a calendar month included.
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
  const auto api = nlohmann::json::parse(server::http::error_json(400, "invalid_request", "must not be empty", "domain"));
  EXPECT_EQ(api,
            nlohmann::json::parse(
                R"({"error":{"code":400,"reason":"invalid_request","field":"domain","message":"must not be empty"}})"));
  const auto server = nlohmann::json::parse(server::http::error_json(400, "malformed", "bad request line"));
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

}  // namespace
}  // namespace rk::server::api
