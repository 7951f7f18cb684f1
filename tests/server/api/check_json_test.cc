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
  EXPECT_EQ(windowed["burst"], 0.0);            // gcra's default, shown though the file does not say it
  EXPECT_EQ(windowed["count_refused"], false);  // gcra's default: a refused charge is not owed
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
  const auto api =
      nlohmann::json::parse(server::http::error_json(400, "invalid_request", "must not be empty", "domain"));
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

namespace rk::server::api {
namespace {

TEST(LeaseJson, ReadsAcquireAndReleaseAndNamesWhatIsWrong) {
  auto v = parse_lease_request(R"({"domain":"llm","entries":[{"key":"user","value":"42"}]})", false);
  ASSERT_TRUE(std::holds_alternative<service::LeaseRequest>(v));
  EXPECT_EQ(std::get<service::LeaseRequest>(v).entries.at(0).second, "42");
  v = parse_lease_request(R"({"domain":"llm","entries":[{"key":"user","value":"42"}],"lease":"ab"})", true);
  ASSERT_TRUE(std::holds_alternative<service::LeaseRequest>(v));
  EXPECT_EQ(std::get<service::LeaseRequest>(v).lease, "ab");
  const auto field = [](std::string_view body, bool release) {
    auto r = parse_lease_request(body, release);
    return std::holds_alternative<service::RequestError>(r) ? std::get<service::RequestError>(r).field : "(none)";
  };
  EXPECT_EQ(field(R"({"domain":"llm","lease":"ab"})", false), "lease");  // acquire takes no lease
  EXPECT_EQ(field(R"({"domain":"llm","lease":7})", true), "lease");
  EXPECT_EQ(field(R"({"domain":"llm","entries":[{"key":1}]})", true), "entries[0].key");
  EXPECT_EQ(field(R"({"domain":"llm","entries":{}})", false), "entries");
  EXPECT_EQ(field("[", false), "");
}

TEST(LeaseJson, AnswersSayWhatHappened) {
  service::LeaseAnswer a{.done = true,
                         .lease = "0123",
                         .name = "user",
                         .max_in_flight = 2,
                         .in_flight = 1,
                         .lease_ttl = std::chrono::seconds(30)};
  auto j = nlohmann::json::parse(lease_answer_json(a, false));
  EXPECT_EQ(j["acquired"], true);
  EXPECT_EQ(j["lease"], "0123");
  EXPECT_EQ(j["lease_ttl_seconds"], 30.0);
  a.done = false;
  a.retry_after = std::chrono::milliseconds(1500);
  j = nlohmann::json::parse(lease_answer_json(a, false));
  EXPECT_FALSE(j.contains("lease"));
  EXPECT_EQ(j["retry_after_seconds"], 1.5);
  j = nlohmann::json::parse(lease_answer_json(a, true));
  EXPECT_EQ(j["released"], false);
}

}  // namespace
}  // namespace rk::server::api

namespace rk::server::api {
namespace {

// estimate and actual: whole numbers from 0 to 2^53; anything else is a 400 naming the field.
TEST(ReserveJson, ReadsReserveAndSettleAndNamesWhatIsWrong) {
  auto v = parse_reserve_request(
      R"({"domain":"ai","entries":[{"key":"api_key","value":"k1"}],"estimate":500,"ttl_seconds":2.5})", false);
  ASSERT_TRUE(std::holds_alternative<service::ReserveRequest>(v));
  EXPECT_EQ(std::get<service::ReserveRequest>(v).amount, 500u);
  EXPECT_EQ(std::get<service::ReserveRequest>(v).ttl, std::chrono::milliseconds(2500));
  v = parse_reserve_request(R"({"domain":"ai","reservation":"ab","actual":9007199254740992})", true);
  ASSERT_TRUE(std::holds_alternative<service::ReserveRequest>(v));
  EXPECT_EQ(std::get<service::ReserveRequest>(v).amount, std::uint64_t{1} << 53);
  const auto error = [](std::string_view body, bool settle) {
    auto r = parse_reserve_request(body, settle);
    if (!std::holds_alternative<service::RequestError>(r)) return std::string("(none)");
    const auto& e = std::get<service::RequestError>(r);
    return e.field + ": " + e.message;
  };
  EXPECT_EQ(error(R"({"domain":"ai","estimate":-1})", false), "estimate: must not be negative");
  EXPECT_EQ(error(R"({"domain":"ai","estimate":1.5})", false), "estimate: must be a whole number");
  EXPECT_EQ(error(R"({"domain":"ai","estimate":"x"})", false), "estimate: must be a whole number");
  EXPECT_EQ(error(R"({"domain":"ai","estimate":9007199254740993})", false),
            "estimate: 9007199254740993 is over the limit of 9007199254740992");
  EXPECT_EQ(error(R"({"domain":"ai","estimate":1e300})", false), "estimate: must be a whole number");
  EXPECT_EQ(error(R"({"domain":"ai"})", false), "estimate: missing");
  EXPECT_EQ(error(R"({"domain":"ai","estimate":1,"ttl_seconds":0})", false),
            "ttl_seconds: must be from 0.001 to 86400");
  EXPECT_EQ(error(R"({"domain":"ai","estimate":1,"reservation":"ab"})", false), "reservation: unknown field");
  EXPECT_EQ(error(R"({"domain":"ai","reservation":"ab","actual":-5})", true), "actual: must not be negative");
  EXPECT_EQ(error(R"({"domain":"ai","reservation":"ab","actual":18446744073709551615})", true),
            "actual: 18446744073709551615 is over the limit of 9007199254740992");
  EXPECT_EQ(error(R"({"domain":"ai","reservation":7,"actual":1})", true).substr(0, 12), "reservation:");
}

TEST(ReserveJson, AnswersSayWhatHappened) {
  service::ReserveAnswer a{.done = true, .reservation = "0123", .name = "tokens", .ttl = std::chrono::seconds(60)};
  a.decision = Decision{.allowed = true, .limit = 10000, .remaining = 6000};
  auto j = nlohmann::json::parse(reserve_answer_json(a, false, 4000));
  EXPECT_EQ(j["reserved"], true);
  EXPECT_EQ(j["reservation"], "0123");
  EXPECT_EQ(j["remaining"], 6000.0);
  EXPECT_FALSE(j.contains("retry_after_seconds"));
  a.reserved = 4000;
  a.decision = Decision{.allowed = false, .limit = 10000, .remaining = 0, .retry_after = std::chrono::seconds(12)};
  j = nlohmann::json::parse(reserve_answer_json(a, true, 12000));
  EXPECT_EQ(j["settled"], true);
  EXPECT_EQ(j["overdrew"], true);
  EXPECT_EQ(j["reserved"], 4000);
  EXPECT_EQ(j["actual"], 12000);
  EXPECT_EQ(j["retry_after_seconds"], 12.0);
}

}  // namespace
}  // namespace rk::server::api
