// What a control plane pushes, as rules files: converted (rules/xds/convert.h), then loaded through the reloader as
// a rules file is, each refusal named as the NACK names it.
#include "rules/xds/convert.h"

#include <gtest/gtest.h>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "rules/parse.h"
#include "rules/reloader.h"

namespace rk::rules::xds {
namespace {

namespace rl = ::ratelimit::config::ratelimit::v3;
using ::envoy::service::discovery::v3::DiscoveryResponse;

rl::RateLimitDescriptor* add(rl::RateLimitConfig& c, const std::string& key, const std::string& value,
                             rl::RateLimitUnit unit, std::uint32_t limit) {
  rl::RateLimitDescriptor* d = c.add_descriptors();
  d->set_key(key);
  d->set_value(value);
  d->mutable_rate_limit()->set_unit(unit);
  d->mutable_rate_limit()->set_requests_per_unit(limit);
  return d;
}

// upstream's examples/xds-sotw-config-server "rl" resource, in part: replaces, nesting, blocked, unlimited, shadow.
rl::RateLimitConfig example() {
  rl::RateLimitConfig c;
  c.set_name("rl");
  c.set_domain("rl");
  add(c, "category", "account", rl::MINUTE, 4)->mutable_rate_limit()->add_replaces()->set_name("bkthomps");
  rl::RateLimitDescriptor* foo = add(c, "foo", "", rl::MINUTE, 2);
  rl::RateLimitDescriptor* named = foo->add_descriptors();
  named->set_key("bar");
  named->set_value("bkthomps");
  named->mutable_rate_limit()->set_name("bkthomps");
  named->mutable_rate_limit()->set_unit(rl::MINUTE);
  named->mutable_rate_limit()->set_requests_per_unit(1);
  rl::RateLimitDescriptor* banned = foo->add_descriptors();
  banned->set_key("bar");
  banned->set_value("banned");
  banned->mutable_rate_limit()->set_unit(rl::MINUTE);  // 0 a minute: blocked
  rl::RateLimitDescriptor* shady = foo->add_descriptors();
  shady->set_key("baz");
  shady->set_value("shady");
  shady->mutable_rate_limit()->set_unit(rl::WEEK);
  shady->mutable_rate_limit()->set_requests_per_unit(3);
  shady->set_shadow_mode(true);
  rl::RateLimitDescriptor* qux = c.add_descriptors();
  qux->set_key("qux");
  qux->mutable_rate_limit()->set_unlimited(true);
  return c;
}

DiscoveryResponse response(const std::vector<rl::RateLimitConfig>& configs) {
  DiscoveryResponse r;
  r.set_type_url(kRateLimitConfigType);
  r.set_version_info("1");
  for (const auto& c : configs) r.add_resources()->PackFrom(c);
  return r;
}

// The errors of loading `configs` as one push, joined; "" when it loads.
std::string load(const std::vector<rl::RateLimitConfig>& configs, LoadOptions options = {}) {
  std::vector<RulesFile> files;
  std::string error = response_to_files(response(configs), files);
  if (!error.empty()) return error;
  std::vector<DomainConfig> out;
  for (const ConfigError& e : parse_rules_files(files, out, options)) error += e.to_string() + "\n";
  return error;
}

TEST(XdsConvert, TheExampleReadsAsTheSameRulesFileWouldRead) {
  std::vector<RulesFile> files;
  ASSERT_EQ(response_to_files(response({example()}), files), "");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].name, "xds:rl");
  std::vector<DomainConfig> pushed, written;
  ASSERT_TRUE(parse_rules_files(files, pushed).empty());
  const std::string yaml = R"(domain: rl
descriptors:
  - key: category
    value: account
    rate_limit: {unit: minute, requests_per_unit: 4, replaces: [{name: bkthomps}]}
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 2}
    descriptors:
      - {key: bar, value: bkthomps, rate_limit: {name: bkthomps, unit: minute, requests_per_unit: 1}}
      - {key: bar, value: banned, rate_limit: {unit: minute, requests_per_unit: 0}}
      - {key: baz, value: shady, shadow_mode: true, rate_limit: {unit: week, requests_per_unit: 3}}
  - key: qux
    rate_limit: {unlimited: true}
)";
  ASSERT_TRUE(parse_rules_files({{"rl.yaml", yaml}}, written).empty());
  ASSERT_EQ(pushed.size(), 1u);
  const DomainConfig& p = pushed[0];
  const DomainConfig& w = written[0];
  EXPECT_EQ(p.domain, w.domain);
  ASSERT_EQ(p.descriptors.size(), w.descriptors.size());
  const auto same = [](const Descriptor& a, const Descriptor& b, auto& self) -> void {
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.value, b.value);
    EXPECT_EQ(a.shadow_mode, b.shadow_mode);
    ASSERT_EQ(a.rate_limit.has_value(), b.rate_limit.has_value());
    if (a.rate_limit) {
      EXPECT_EQ(a.rate_limit->name, b.rate_limit->name);
      EXPECT_EQ(a.rate_limit->unlimited, b.rate_limit->unlimited);
      EXPECT_EQ(a.rate_limit->blocked, b.rate_limit->blocked);
      EXPECT_EQ(a.rate_limit->unit, b.rate_limit->unit);
      EXPECT_EQ(a.rate_limit->requests_per_unit, b.rate_limit->requests_per_unit);
      EXPECT_EQ(a.rate_limit->replaces, b.rate_limit->replaces);
    }
    ASSERT_EQ(a.descriptors.size(), b.descriptors.size());
    for (std::size_t i = 0; i < a.descriptors.size(); ++i) self(a.descriptors[i], b.descriptors[i], self);
  };
  for (std::size_t i = 0; i < p.descriptors.size(); ++i) same(p.descriptors[i], w.descriptors[i], same);
  EXPECT_TRUE(p.descriptors[1].descriptors[1].rate_limit->blocked);
  EXPECT_TRUE(p.descriptors[2].rate_limit->unlimited);
}

TEST(XdsConvert, AValueIsTakenAsItIsWhateverItHolds) {
  rl::RateLimitConfig c;
  c.set_domain("d: \"x\"\n# not a comment");
  add(c, "k", "a \"quoted\"\nline\\ and: more", rl::SECOND, 1);
  std::vector<RulesFile> files;
  ASSERT_EQ(response_to_files(response({c}), files), "");
  std::vector<DomainConfig> out;
  ASSERT_TRUE(parse_rules_files(files, out).empty()) << files[0].text;
  EXPECT_EQ(out[0].domain, c.domain());
  EXPECT_EQ(out[0].descriptors[0].value, c.descriptors(0).value());
  EXPECT_EQ(files[0].name, "xds:#0");  // no name: its place in the push
}

TEST(XdsConvert, AnEmptyDomainIsRefused) {
  rl::RateLimitConfig c;
  c.set_name("blank");
  add(c, "k", "", rl::SECOND, 1);
  EXPECT_EQ(load({c}), "xds:blank:1:9: domain: must not be empty\n");
}

TEST(XdsConvert, AUnitTheSchemaDoesNotKnowIsRefusedByName) {
  rl::RateLimitConfig c;
  c.set_name("rl");
  c.set_domain("rl");
  add(c, "k", "", static_cast<rl::RateLimitUnit>(42), 1);
  EXPECT_EQ(load({c}),
            "xds:rl:5:13: descriptors[0] (k).rate_limit.unit: '42' is not a unit (second, minute, hour, day, week, "
            "month, year)\n");
  c.mutable_descriptors(0)->mutable_rate_limit()->set_unit(rl::UNKNOWN);
  EXPECT_EQ(load({c}), "xds:rl:5:7: descriptors[0] (k).rate_limit: needs a unit (or a window)\n");
}

TEST(XdsConvert, UnlimitedWithAUnitIsRefusedAsInAFile) {
  rl::RateLimitConfig c;
  c.set_name("rl");
  c.set_domain("rl");
  add(c, "k", "", rl::SECOND, 0)->mutable_rate_limit()->set_unlimited(true);
  EXPECT_NE(load({c}).find("'unit' makes no sense with unlimited: true"), std::string::npos);
}

TEST(XdsConvert, ADomainTwiceIsRefusedUnlessMerged) {
  rl::RateLimitConfig a, b;
  a.set_name("a");
  a.set_domain("rl");
  add(a, "x", "", rl::SECOND, 1);
  b.set_name("b");
  b.set_domain("rl");
  add(b, "y", "", rl::SECOND, 1);
  EXPECT_EQ(load({a, b}),
            "xds:b:1:1: domain 'rl' is already defined in xds:a (--merge-domains merges the files of one domain)\n");
  EXPECT_EQ(load({a, b}, {.merge_domains = true}), "");
  add(b, "x", "", rl::MINUTE, 2);
  EXPECT_NE(load({a, b}, {.merge_domains = true}).find("the descriptor x of domain 'rl' is already defined at xds:a"),
            std::string::npos);
}

TEST(XdsConvert, AnotherTypeIsRefused) {
  DiscoveryResponse r = response({example()});
  r.set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  std::vector<RulesFile> files;
  EXPECT_EQ(response_to_files(r, files),
            "type_url 'type.googleapis.com/envoy.config.cluster.v3.Cluster' is not "
            "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig (the only type subscribed to)");
  r = response({example()});
  r.mutable_resources(0)->set_type_url("type.googleapis.com/google.protobuf.Empty");
  EXPECT_EQ(response_to_files(r, files),
            "resources[0]: type_url 'type.googleapis.com/google.protobuf.Empty' is not "
            "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig");
  r = response({example()});
  r.mutable_resources(0)->set_value("\xff\xff\xff");
  EXPECT_EQ(response_to_files(r, files), "resources[0]: not a RateLimitConfig (it does not decode)");
}

// Through the reloader, as the client applies a push: an unchanged rule keeps its limiter (its counters), a push
// that cannot load changes nothing.
TEST(XdsConvert, APushKeepsAnUnchangedRulesCountersAndABadOneChangesNothing) {
  Reloader reloader("", BuildOptions{});
  rl::RateLimitConfig c;
  c.set_name("rl");
  c.set_domain("rl");
  add(c, "keep", "", rl::MINUTE, 5);
  add(c, "change", "", rl::MINUTE, 5);
  std::vector<RulesFile> files;
  ASSERT_EQ(response_to_files(response({c}), files), "");
  ASSERT_TRUE(reloader.load_files(files).empty());
  const auto first = reloader.current();
  c.mutable_descriptors(1)->mutable_rate_limit()->set_requests_per_unit(6);
  files.clear();
  ASSERT_EQ(response_to_files(response({c}), files), "");
  ASSERT_TRUE(reloader.load_files(files).empty());
  const auto second = reloader.current();
  ASSERT_NE(first, second);
  EXPECT_EQ(first->rules()[0]->limiter, second->rules()[0]->limiter);  // "keep"
  EXPECT_NE(first->rules()[1]->limiter, second->rules()[1]->limiter);  // "change"
  c.set_domain("");
  files.clear();
  ASSERT_EQ(response_to_files(response({c}), files), "");
  EXPECT_FALSE(reloader.load_files(files).empty());
  EXPECT_EQ(reloader.current(), second);
}

}  // namespace
}  // namespace rk::rules::xds
