// The JSON decision API as a compatibility promise (docs/upgrading.md): every field name a released version
// answered (POST /v1/check, /v1/acquire, /v1/release), recorded in tests/testdata/compat/http_fields.txt, is still
// answered, and a request it read (check_request.json) is still read alike. A field added passes; one renamed or
// removed fails.
#include "server/api/check_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/content_hash.h"
#include "rules/parse.h"
#include "support/compat_data.h"

namespace rk::server::api {
namespace {

using json = nlohmann::json;

// Every path of `j`'s object keys, "what.statuses[].current_limit.name", into `out`.
void paths(const json& j, const std::string& at, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out.insert(at + "." + k);
      paths(v, at + "." + k, out);
    }
  } else if (j.is_array()) {
    for (const json& v : j) paths(v, at + "[]", out);
  }
}

std::shared_ptr<const rules::RuleSet> rule_set() {
  const std::string text =
      "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
      "requests_per_unit: 5, algorithm: earrrl, half_life: 10s}\n";
  rules::DomainConfig d;
  EXPECT_TRUE(rules::parse_domain("edge.yaml", text, d).empty());
  std::vector<rules::DomainConfig> domains;
  domains.push_back(std::move(d));
  return rules::RuleSet::build(std::move(domains), nullptr, rules::BuildOptions{}, base::content_hash(text));
}

// Answers with every field this version can answer: a limited status with each optional field set, a status without
// a limit, an acquired, a refused and a released lease.
std::set<std::string> answered_fields() {
  service::CheckResponse r;
  r.rules = rule_set();
  service::DescriptorStatus full{.code = service::Code::kOverLimit,
                                 .rule = r.rules->rules().at(0).get(),
                                 .has_limit = true,
                                 .name = "user",
                                 .requests_per_unit = 5,
                                 .unit = rules::Unit::kMinute,
                                 .window = std::chrono::minutes(1),
                                 .algorithm = Algorithm::kEarrrl,
                                 .limit_remaining = 0,
                                 .duration_until_reset = std::chrono::seconds(3),
                                 .retry_after = std::chrono::seconds(3),
                                 .estimate = 5.5,
                                 .shadowed = true,
                                 .unlimited = false,
                                 .charged = true,
                                 .hits = 1,
                                 .fallback = rules::FailurePolicy::kFailOpen,
                                 .store_error = "timeout"};
  service::DescriptorStatus unlimited{.code = service::Code::kOk, .unlimited = true};
  r.statuses = {full, unlimited};
  std::set<std::string> out;
  paths(json::parse(check_response_json(r)), "check", out);
  service::LeaseAnswer acquired{.done = true,
                                .lease = std::string(32, 'a'),
                                .name = "llm",
                                .max_in_flight = 2,
                                .in_flight = 1,
                                .lease_ttl = std::chrono::seconds(60)};
  service::LeaseAnswer refused = acquired;
  refused.done = false;
  refused.retry_after = std::chrono::seconds(5);
  paths(json::parse(lease_answer_json(acquired, false)), "acquire", out);
  paths(json::parse(lease_answer_json(refused, false)), "acquire", out);
  paths(json::parse(lease_answer_json(acquired, true)), "release", out);
  return out;
}

TEST(CheckJsonCompat, EveryRecordedFieldIsStillAnswered) {
  const std::set<std::string> answered = answered_fields();
  ASSERT_TRUE(answered.count("check.statuses[].current_limit.requests_per_unit"));
  if (compat::recording()) {
    return compat::record("http_fields.txt", compat::join(answered,
                                                          "# The JSON API's answers' fields, as recorded "
                                                          "(tests/server/api/check_json_compat_test.cc)\n"));
  }
  const std::set<std::string> recorded = compat::lines(compat::read("http_fields.txt"));
  ASSERT_FALSE(recorded.empty());
  for (const std::string& field : recorded) {
    EXPECT_TRUE(answered.count(field)) << field << " is no longer answered: a minor version may not remove or "
                                       << "rename a field (docs/upgrading.md)";
  }
}

// A request a released version read, with every field it took, is read alike.
TEST(CheckJsonCompat, ARecordedRequestIsStillRead) {
  const std::string body = compat::read("check_request.json");
  const auto parsed = parse_check_request(body);
  ASSERT_TRUE(std::holds_alternative<service::CheckRequest>(parsed))
      << std::get<service::RequestError>(parsed).field << ": " << std::get<service::RequestError>(parsed).message;
  const auto& r = std::get<service::CheckRequest>(parsed);
  EXPECT_EQ(r.domain, "edge");
  ASSERT_EQ(r.descriptors.size(), 2u);
  ASSERT_EQ(r.descriptors[0].entries.size(), 2u);
  EXPECT_EQ(r.descriptors[0].entries[0].first, "remote_address");
  EXPECT_EQ(r.descriptors[0].entries[0].second, "10.0.0.1");
  EXPECT_EQ(r.descriptors[0].entries[1].first, "path");
  EXPECT_EQ(r.descriptors[0].hits_addend, std::optional<std::uint64_t>(3));
  EXPECT_EQ(r.hits_addend, 1u);
  ASSERT_TRUE(r.descriptors[1].limit.has_value());
  EXPECT_EQ(r.descriptors[1].limit->requests_per_unit, 5u);
  EXPECT_EQ(r.descriptors[1].limit->unit, rules::Unit::kMinute);
}

}  // namespace
}  // namespace rk::server::api
