// serve's flags (cli/serve/flags.h), the xDS client's part: upstream's defaults, each flag's checks, and the same
// names in a settings file. The client's behaviour, through the real binary: tests/integration/xds_test.py.
#include "cli/serve/flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace rk::cli::serve {
namespace {

std::vector<std::string> read(const std::vector<std::string>& args, ServeFlags& flags) {
  bool help = false;
  return read_serve_flags(args, flags, help);
}

TEST(XdsFlags, TheDefaultsAreUpstreams) {
  ServeFlags f;
  ASSERT_TRUE(read({"--config", "rules.yaml"}, f).empty());
  EXPECT_TRUE(f.xds.server.empty());
  EXPECT_EQ(f.xds.node_id, "default");
  EXPECT_EQ(f.xds.retry_interval, std::chrono::seconds(3));
  EXPECT_EQ(f.xds.backoff_initial, std::chrono::seconds(10));
  EXPECT_EQ(f.xds.backoff_max, std::chrono::seconds(60));
  EXPECT_EQ(f.xds.backoff_random_factor, 0.5);
  EXPECT_TRUE(f.xds.backoff_jitter);
  EXPECT_FALSE(f.xds.tls);
  EXPECT_FALSE(f.ready_without_rules);
}

TEST(XdsFlags, EachFlagIsRead) {
  ServeFlags f;
  ASSERT_TRUE(read({"--xds-server",
                    "envoy-gateway:18001",
                    "--xds-node-id",
                    "envoy-ratelimit",
                    "--xds-node-metadata",
                    R"({"zone":"a"})",
                    "--xds-headers",
                    "Authorization=Bearer a=b,x-team=edge",
                    "--xds-tls",
                    "--xds-tls-ca",
                    "ca.crt",
                    "--xds-tls-cert",
                    "tls.crt",
                    "--xds-tls-key",
                    "tls.key",
                    "--xds-tls-san",
                    "envoy-gateway",
                    "--xds-retry-interval",
                    "1s",
                    "--xds-backoff-initial",
                    "2s",
                    "--xds-backoff-max",
                    "30s",
                    "--xds-backoff-random-factor",
                    "0.25",
                    "--xds-backoff-jitter",
                    "off",
                    "--ready-without-rules"},
                   f)
                  .empty());
  EXPECT_EQ(f.xds.server, "envoy-gateway:18001");
  EXPECT_EQ(f.xds.node_id, "envoy-ratelimit");
  EXPECT_EQ(f.xds.node_metadata, R"({"zone":"a"})");
  const std::vector<std::pair<std::string, std::string>> headers = {{"authorization", "Bearer a=b"},
                                                                    {"x-team", "edge"}};
  EXPECT_EQ(f.xds.headers, headers);
  EXPECT_TRUE(f.xds.tls);
  EXPECT_EQ(f.xds.tls_ca, "ca.crt");
  EXPECT_EQ(f.xds.tls_cert, "tls.crt");
  EXPECT_EQ(f.xds.tls_key, "tls.key");
  EXPECT_EQ(f.xds.tls_san, "envoy-gateway");
  EXPECT_EQ(f.xds.retry_interval, std::chrono::seconds(1));
  EXPECT_EQ(f.xds.backoff_initial, std::chrono::seconds(2));
  EXPECT_EQ(f.xds.backoff_max, std::chrono::seconds(30));
  EXPECT_EQ(f.xds.backoff_random_factor, 0.25);
  EXPECT_FALSE(f.xds.backoff_jitter);
  EXPECT_TRUE(f.ready_without_rules);
}

TEST(XdsFlags, ABadValueIsNamed) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--xds-headers", "bad header=1"}, "--xds-headers: 'bad header=1' is not a header name=value"},
      {{"--xds-headers", "novalue"}, "--xds-headers: 'novalue' is not a header name=value"},
      {{"--xds-headers", "k=\x01"}, "--xds-headers: 'k=\x01' is not a header name=value"},
      {{"--xds-backoff-jitter", "maybe"}, "--xds-backoff-jitter: 'maybe' is not on or off"},
      {{"--xds-backoff-random-factor", "2"}, "--xds-backoff-random-factor: '2' is not a number from 0 to 1"},
      {{"--xds-retry-interval", "soon"}, "--xds-retry-interval: 'soon' is not a duration from 1ms to 24h"},
  };
  for (const auto& [args, message] : cases) {
    ServeFlags f;
    const auto errors = read(args, f);
    ASSERT_EQ(errors.size(), 1u) << message;
    EXPECT_EQ(errors[0].substr(0, message.size()), message);
  }
}

TEST(XdsFlags, ASettingsFileGivesThemByTheSameNames) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rk-xds-settings-" + std::to_string(::getpid()) + ".yaml")).string();
  std::ofstream(path) << "xds-server: envoy-gateway:18001\nxds-backoff-jitter: \"off\"\nready-without-rules: true\n"
                         "xds-headers: x-a=1\n";
  ServeFlags f;
  const auto errors = read({"--settings", path}, f);
  std::filesystem::remove(path);
  ASSERT_TRUE(errors.empty()) << errors[0];
  EXPECT_EQ(f.xds.server, "envoy-gateway:18001");
  EXPECT_FALSE(f.xds.backoff_jitter);
  EXPECT_TRUE(f.ready_without_rules);
  EXPECT_EQ(f.xds.headers.size(), 1u);
}

}  // namespace
}  // namespace rk::cli::serve
