// One test data file per config error, each checked against its exact message (tests/testdata/config_errors/).
// The first line of each file is "# error: <line>:<column>: <message>" — the error it must produce, alone. A
// directory is one domain split across files, merged (--merge-domains).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rules/parse.h"

namespace rk::rules {
namespace {

const std::string kDir = std::string(RK_TESTDATA) + "/config_errors";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ConfigErrorFile : public ::testing::TestWithParam<std::string> {};

// A directory holds the files of one domain, loaded with merge_domains; the file whose first line is "# error: "
// is the one the error is in.
void expect_merge_error(const std::string& dir) {
  std::string file, expected;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string text = read(e.path().string());
    if (text.rfind("# error: ", 0) == 0) {
      file = e.path().filename().string();
      expected = text.substr(9, text.find('\n') - 9);
    }
  }
  ASSERT_FALSE(file.empty()) << dir << " needs a file starting with '# error: '";
  std::vector<DomainConfig> domains;
  const auto errors = load_rules(dir, domains, {.merge_domains = true});
  std::string all;
  for (const auto& e : errors) all += e.to_string() + "\n";
  ASSERT_EQ(errors.size(), 1u) << all;
  std::string got = errors[0].to_string();
  for (std::size_t at; (at = got.find(dir + "/")) != std::string::npos;) got.erase(at, dir.size() + 1);
  EXPECT_EQ(got, file + ":" + expected);
}

TEST_P(ConfigErrorFile, GivesItsExactMessage) {
  const std::string path = kDir + "/" + GetParam();
  if (std::filesystem::is_directory(path)) return expect_merge_error(path);
  const std::string text = read(path);
  const std::string prefix = "# error: ";
  ASSERT_EQ(text.rfind(prefix, 0), 0u) << path << " must start with '" << prefix << "'";
  const std::string expected = text.substr(prefix.size(), text.find('\n') - prefix.size());
  DomainConfig d;
  const auto errors = parse_domain(GetParam(), text, d);
  std::string all;
  for (const auto& e : errors) all += e.to_string() + "\n";
  ASSERT_EQ(errors.size(), 1u) << all;
  EXPECT_EQ(errors[0].to_string(), GetParam() + ":" + expected);
}

// serve without --redis: `sharing: batched` is an error at its line (the file alone cannot know).
// `metadata:` kept as JSON for gRPC's dynamic_metadata: YAML's plain scalars as JSON's types, quoted ones strings.
TEST(Metadata, KeptAsJsonWithYamlsScalarTypes) {
  DomainConfig d;
  const auto errors = parse_domain("m.yaml", R"(domain: d
descriptors:
  - key: k
    metadata: {name: service_1, weight: 2, ratio: 0.5, on: true, none: null, quoted: "2", list: [a, 1], nested: {x: y}}
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 1}
)",
                                   d);
  ASSERT_TRUE(errors.empty()) << errors[0].to_string();
  EXPECT_EQ(d.descriptors[0].metadata,
            R"({"name":"service_1","weight":2,"ratio":0.5,"on":true,"none":null,"quoted":"2","list":["a",1],)"
            R"("nested":{"x":"y"}})");
  EXPECT_EQ(d.descriptors[1].metadata, "");
}

TEST(ConfigError, BatchedSharingWithoutRedis) {
  const std::string dir = ::testing::TempDir() + "/batched_without_redis";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/edge.yaml") << "domain: edge\n# shared\nsharing: batched\ndescriptors:\n"
                                       "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  std::vector<DomainConfig> domains;
  EXPECT_TRUE(load_rules(dir, domains).empty());
  ASSERT_EQ(domains.size(), 1u);
  EXPECT_EQ(domains[0].sharing, Sharing::kBatched);
  domains.clear();
  const auto errors = load_rules(dir, domains, {.without_redis = true});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string(), dir +
                                       "/edge.yaml:3:10: sharing: batched needs Redis (serve --redis URL); domain "
                                       "'edge' has none to share through");
}

std::vector<std::string> error_files() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kDir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& p) { return p.param.substr(0, p.param.find('.')); }

INSTANTIATE_TEST_SUITE_P(All, ConfigErrorFile, ::testing::ValuesIn(error_files()), test_name);

}  // namespace
}  // namespace rk::rules
