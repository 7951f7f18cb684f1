// upstream's environment as serve's flags (cli/upstream_env.h): defaults, each group of variables, refusals, and
// Envoy Gateway's deployment (tests/testdata/envoy_gateway/ratelimit.env) translated whole.
#include "cli/upstream_env.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

namespace rk::cli {
namespace {

// The flags every helper's branch adds (docs/service.md): the translation is tested against all of them.
bool any_flag(std::string_view) { return true; }

// The value after `flag` in args, or "<absent>"; "<toggle>" for a flag followed by another flag or nothing.
std::string arg(const UpstreamEnv& t, std::string_view flag) {
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    if (t.args[i] != flag) continue;
    if (i + 1 == t.args.size() || t.args[i + 1].starts_with("--")) return "<toggle>";
    return t.args[i + 1];
  }
  return "<absent>";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(UpstreamEnv, NothingSetGivesUpstreamsDefaults) {
  const UpstreamEnv t = translate_upstream_env({}, any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--http"), "0.0.0.0:8080");
  EXPECT_EQ(arg(t, "--grpc"), "0.0.0.0:8081");
  EXPECT_EQ(arg(t, "--debug"), "0.0.0.0:6070");
  EXPECT_EQ(arg(t, "--config"), "/srv/runtime_data/current/config");
  EXPECT_EQ(arg(t, "--grpc-max-connection-age"), "86400000ms");
  EXPECT_EQ(arg(t, "--grpc-max-connection-age-grace"), "3600000ms");
  EXPECT_EQ(arg(t, "--log-level"), "error");  // WARN
  EXPECT_EQ(arg(t, "--log-format"), "text");
  EXPECT_EQ(arg(t, "--near-limit-ratio"), "0.8");
  EXPECT_EQ(arg(t, "--statsd"), "localhost:8125");  // USE_STATSD defaults to true upstream
  EXPECT_EQ(arg(t, "--stats-flush-interval"), "10000ms");
  EXPECT_EQ(arg(t, "--redis"), "<absent>");  // no REDIS_URL: in memory, and a note says so
  EXPECT_NE(joined(t.notes).find("REDIS_URL not set"), std::string::npos);
  EXPECT_EQ(arg(t, "--prometheus"), "<absent>");
  EXPECT_EQ(arg(t, "--otlp-endpoint"), "<absent>");
  EXPECT_EQ(arg(t, "--xds-server"), "<absent>");
  EXPECT_EQ(arg(t, "--grpc-tls-cert"), "<absent>");
}

TEST(UpstreamEnv, ListenersAndTheRulesFolder) {
  const UpstreamEnv t = translate_upstream_env({{"HOST", "127.0.0.1"},
                                                {"PORT", "18080"},
                                                {"GRPC_HOST", "::1"},
                                                {"GRPC_PORT", "18081"},
                                                {"DEBUG_PORT", "16070"},
                                                {"RUNTIME_ROOT", "/data"},
                                                {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                                                {"RUNTIME_APPDIRECTORY", "rules"},
                                                {"GRPC_MAX_CONNECTION_AGE", "1h30m"},
                                                {"GRPC_MAX_CONNECTION_AGE_GRACE", "1.5s"}},
                                               any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--http"), "127.0.0.1:18080");
  EXPECT_EQ(arg(t, "--grpc"), "[::1]:18081");
  EXPECT_EQ(arg(t, "--debug"), "0.0.0.0:16070");
  EXPECT_EQ(arg(t, "--config"), "/data/ratelimit/rules");
  EXPECT_EQ(arg(t, "--grpc-max-connection-age"), "5400000ms");
  EXPECT_EQ(arg(t, "--grpc-max-connection-age-grace"), "1500ms");
}

TEST(UpstreamEnv, GrpcTlsGoesToTheGrpcListenerAloneAndOnlyWithUseTls) {
  const std::map<std::string, std::string> files = {{"GRPC_SERVER_TLS_CERT", "/certs/tls.crt"},
                                                    {"GRPC_SERVER_TLS_KEY", "/certs/tls.key"},
                                                    {"GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt"},
                                                    {"GRPC_CLIENT_TLS_SAN", "envoy"}};
  auto with = files;
  with["GRPC_SERVER_USE_TLS"] = "true";
  const UpstreamEnv t = translate_upstream_env(with, any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--grpc-tls-cert"), "/certs/tls.crt");
  EXPECT_EQ(arg(t, "--grpc-tls-key"), "/certs/tls.key");
  EXPECT_EQ(arg(t, "--grpc-tls-client-ca"), "/certs/ca.crt");
  EXPECT_EQ(arg(t, "--grpc-tls-client-san"), "envoy");
  EXPECT_EQ(arg(t, "--tls-cert"), "<absent>");  // the probe port stays plain
  const UpstreamEnv off = translate_upstream_env(files, any_flag);
  EXPECT_TRUE(off.errors.empty()) << joined(off.errors);
  EXPECT_EQ(arg(off, "--grpc-tls-cert"), "<absent>");
  EXPECT_NE(joined(off.notes).find("GRPC_SERVER_TLS_CERT not read: GRPC_SERVER_USE_TLS is not true"),
            std::string::npos);
}

TEST(UpstreamEnv, TlsAskedForWithoutItsFilesIsRefusedNotServedPlain) {
  const UpstreamEnv t = translate_upstream_env({{"GRPC_SERVER_USE_TLS", "true"}}, any_flag);
  ASSERT_EQ(t.errors.size(), 1u) << joined(t.errors);
  EXPECT_EQ(t.errors[0], "GRPC_SERVER_USE_TLS=true: needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  const UpstreamEnv san = translate_upstream_env({{"GRPC_SERVER_USE_TLS", "true"},
                                                  {"GRPC_SERVER_TLS_CERT", "/c"},
                                                  {"GRPC_SERVER_TLS_KEY", "/k"},
                                                  {"GRPC_CLIENT_TLS_SAN", "envoy"}},
                                                 any_flag);
  ASSERT_EQ(san.errors.size(), 1u) << joined(san.errors);
  EXPECT_TRUE(san.errors[0].starts_with("GRPC_CLIENT_TLS_SAN=envoy: needs GRPC_CLIENT_TLS_CACERT")) << san.errors[0];
}

TEST(UpstreamEnv, RedisUrlsByType) {
  struct Case {
    std::map<std::string, std::string> env;
    std::string url;
  };
  const Case cases[] = {
      {{{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis.redis.svc:6379"}}, "redis://redis.redis.svc:6379"},
      {{{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "r:6379"}, {"REDIS_AUTH", "pa:ss@word"}, {"REDIS_TLS", "true"}},
       "rediss://pa:ss@word@r:6379"},
      {{{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:7000,b:7001"}},
       "redis+cluster://a:7000,b:7001"},
      {{{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_TYPE", "SENTINEL"}, {"REDIS_URL", "mymaster,s1:26379,s2:26379"}},
       "redis+sentinel://s1:26379,s2:26379/mymaster"},
  };
  for (const Case& c : cases) {
    const UpstreamEnv t = translate_upstream_env(c.env, any_flag);
    EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
    EXPECT_EQ(arg(t, "--redis"), c.url);
    EXPECT_EQ(arg(t, "--redis-connections"), "10");
  }
  const UpstreamEnv tls = translate_upstream_env({{"REDIS_SOCKET_TYPE", "tcp"},
                                                  {"REDIS_URL", "r:6379"},
                                                  {"REDIS_TLS", "true"},
                                                  {"REDIS_TLS_CLIENT_CERT", "/redis-certs/tls.crt"},
                                                  {"REDIS_TLS_CLIENT_KEY", "/redis-certs/tls.key"},
                                                  {"REDIS_TLS_CACERT", "/redis-certs/ca.crt"},
                                                  {"REDIS_POOL_SIZE", "500"},
                                                  {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576"}},
                                                 any_flag);
  EXPECT_TRUE(tls.errors.empty()) << joined(tls.errors);
  EXPECT_EQ(arg(tls, "--redis-tls-cert"), "/redis-certs/tls.crt");
  EXPECT_EQ(arg(tls, "--redis-tls-key"), "/redis-certs/tls.key");
  EXPECT_EQ(arg(tls, "--redis-tls-ca"), "/redis-certs/ca.crt");
  EXPECT_EQ(arg(tls, "--redis-connections"), "64");
  EXPECT_EQ(arg(tls, "--redis-near-cache"), "<toggle>");
}

TEST(UpstreamEnv, RulesStatsAndTracing) {
  const UpstreamEnv t = translate_upstream_env({{"SHADOW_MODE", "true"},
                                                {"MERGE_DOMAIN_CONFIG", "1"},
                                                {"NEAR_LIMIT_RATIO", "0.9"},
                                                {"LIMIT_RESPONSE_HEADERS_ENABLED", "True"},
                                                {"LOG_LEVEL", "debug"},
                                                {"LOG_FORMAT", "json"},
                                                {"USE_STATSD", "true"},
                                                {"STATSD_HOST", "exporter"},
                                                {"STATSD_PORT", "9125"},
                                                {"EXTRA_TAGS", "cluster:a,zone:b"},
                                                {"STATS_FLUSH_INTERVAL", "1s"},
                                                {"USE_PROMETHEUS", "true"},
                                                {"PROMETHEUS_ADDR", ":19001"},
                                                {"TRACING_ENABLED", "true"},
                                                {"TRACING_SERVICE_NAME", "envoy-ratelimit"},
                                                {"TRACING_SAMPLING_RATE", "0.5"},
                                                {"TRACING_EXPORTER_PROTOCOL", "grpc"},
                                                {"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}},
                                               any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--shadow-mode"), "<toggle>");
  EXPECT_EQ(arg(t, "--merge-domains"), "<toggle>");
  EXPECT_EQ(arg(t, "--near-limit-ratio"), "0.9");
  EXPECT_EQ(arg(t, "--grpc-response-headers"), "<toggle>");
  EXPECT_EQ(arg(t, "--log-level"), "debug");
  EXPECT_EQ(arg(t, "--log-format"), "json");
  EXPECT_EQ(arg(t, "--statsd"), "exporter:9125");
  EXPECT_EQ(arg(t, "--statsd-tags"), "cluster:a,zone:b");
  EXPECT_EQ(arg(t, "--stats-flush-interval"), "1000ms");
  EXPECT_EQ(arg(t, "--prometheus"), "0.0.0.0:19001");
  EXPECT_EQ(arg(t, "--prometheus-path"), "/metrics");
  EXPECT_EQ(arg(t, "--admin"), "<absent>");  // 19001 is not the admin listener's 9090
  EXPECT_EQ(arg(t, "--otlp-endpoint"), "http://collector:4317");
  EXPECT_EQ(arg(t, "--otlp-protocol"), "grpc");
  EXPECT_EQ(arg(t, "--trace-sample-rate"), "0.5");
  EXPECT_EQ(arg(t, "--service-name"), "envoy-ratelimit");
}

TEST(UpstreamEnv, PrometheusOnPort9090MovesTheAdminListenerOutOfItsWay) {
  const UpstreamEnv t = translate_upstream_env({{"USE_PROMETHEUS", "true"}}, any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--prometheus"), "0.0.0.0:9090");
  EXPECT_EQ(arg(t, "--admin"), "127.0.0.1:9091");
  const UpstreamEnv off = translate_upstream_env({{"USE_PROMETHEUS", "true"}, {"DISABLE_STATS", "true"}}, any_flag);
  EXPECT_EQ(arg(off, "--prometheus"), "<absent>");
  EXPECT_EQ(arg(off, "--statsd"), "<absent>");
}

TEST(UpstreamEnv, XdsWithUpstreamsDefaults) {
  const UpstreamEnv t = translate_upstream_env({{"CONFIG_TYPE", "GRPC_XDS_SOTW"},
                                                {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "a:1,b:2"},
                                                {"CONFIG_GRPC_XDS_NODE_METADATA", "zone=eu-1,note=say \"hi\""},
                                                {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
                                                {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"},
                                                {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "envoy-gateway"},
                                                {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"}},
                                               any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--config"), "<absent>");
  EXPECT_EQ(arg(t, "--xds-server"), "localhost:18000");
  EXPECT_EQ(arg(t, "--xds-node-id"), "default");
  EXPECT_EQ(arg(t, "--xds-headers"), "a=1,b=2");
  EXPECT_EQ(arg(t, "--xds-node-metadata"), R"({"zone":"eu-1","note":"say \"hi\""})");
  EXPECT_EQ(arg(t, "--xds-retry-interval"), "3000ms");
  EXPECT_EQ(arg(t, "--xds-tls"), "<toggle>");
  EXPECT_EQ(arg(t, "--xds-tls-ca"), "/certs/ca.crt");
  EXPECT_EQ(arg(t, "--xds-tls-san"), "envoy-gateway");
  EXPECT_EQ(arg(t, "--xds-backoff-initial"), "10000ms");
  EXPECT_EQ(arg(t, "--xds-backoff-max"), "60000ms");
  EXPECT_EQ(arg(t, "--xds-backoff-random-factor"), "0.5");
  EXPECT_EQ(arg(t, "--xds-backoff-jitter"), "on");
  EXPECT_EQ(arg(t, "--ready-without-rules"), "<toggle>");
}

// CONFIG_GRPC_XDS_NODE_METADATA as upstream's provider reads it: entries split at ',', each at its first '=', a key
// given twice keeping its last value, empty entries nothing; an entry without '=' (which upstream drops) refused.
TEST(UpstreamEnv, NodeMetadataInUpstreamsForm) {
  const auto metadata = [](const std::string& value) {
    const UpstreamEnv t =
        translate_upstream_env({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"CONFIG_GRPC_XDS_NODE_METADATA", value}}, any_flag);
    return t.errors.empty() ? arg(t, "--xds-node-metadata") : "error: " + t.errors[0];
  };
  EXPECT_EQ(metadata("zone=a,url=http://x/?q=1,zone=b,"), R"({"zone":"b","url":"http://x/?q=1"})");
  EXPECT_EQ(metadata(",,"), "<absent>");
  EXPECT_EQ(metadata("=v"), R"({"":"v"})");
  EXPECT_EQ(metadata("zone=a,team:edge"),
            "error: CONFIG_GRPC_XDS_NODE_METADATA=zone=a,team:edge: 'team:edge' is not key=value (the entries are "
            "k1=v1,k2=v2; upstream drops one without '=')");
}

TEST(UpstreamEnv, VariablesWhoseFlagsLandedAreHonoured) {
  const UpstreamEnv t = translate_upstream_env({{"RESPONSE_DYNAMIC_METADATA", "true"},
                                                {"RUNTIME_IGNOREDOTFILES", "true"},
                                                {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "16777216"}},
                                               any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--grpc-response-metadata"), "<toggle>");
  EXPECT_EQ(arg(t, "--skip-dotfiles"), "<toggle>");
  EXPECT_EQ(arg(t, "--config"), "/srv/runtime_data/current/config");
  EXPECT_NE(joined(t.notes).find("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: the xDS client takes pushes of up to 64 MiB"),
            std::string::npos);
  // Over the xDS client's 64 MiB: refused, not silently smaller.
  const UpstreamEnv big = translate_upstream_env({{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "134217728"}}, any_flag);
  ASSERT_EQ(big.errors.size(), 1u) << joined(big.errors);
  EXPECT_TRUE(big.errors[0].starts_with("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=134217728: ")) << big.errors[0];
  // Over xDS the rules folder is not read: the RUNTIME_ variables say so, and no --skip-dotfiles.
  const UpstreamEnv xds =
      translate_upstream_env({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"RUNTIME_IGNOREDOTFILES", "true"}}, any_flag);
  EXPECT_TRUE(xds.errors.empty()) << joined(xds.errors);
  EXPECT_EQ(arg(xds, "--skip-dotfiles"), "<absent>");
  EXPECT_NE(joined(xds.notes).find("RUNTIME_IGNOREDOTFILES not used: the rules come over xDS"), std::string::npos);
}

// Upstream's switch to its old milliseconds in a histogram named _seconds: --prometheus has no such series.
TEST(UpstreamEnv, ResponseTimeInMillisecondsIsRefusedWherePrometheusIsServed) {
  const UpstreamEnv t = translate_upstream_env(
      {{"USE_PROMETHEUS", "true"}, {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"}}, any_flag);
  ASSERT_EQ(t.errors.size(), 1u) << joined(t.errors);
  EXPECT_EQ(t.errors[0],
            "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true: --prometheus serves the gRPC decision time as "
            "ratekeeper_decision_duration_seconds{protocol=\"grpc\"}, in seconds only (there is no "
            "ratelimit_service_response_time_seconds to keep in milliseconds)");
  const UpstreamEnv off = translate_upstream_env({{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"}}, any_flag);
  EXPECT_TRUE(off.errors.empty()) << joined(off.errors);
  EXPECT_NE(joined(off.notes).find("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS not used"), std::string::npos);
}

// Bad input: each stops the start naming the variable and its value.
TEST(UpstreamEnv, UnparsableValuesNameTheVariableAndValue) {
  const std::pair<std::string, std::string> bad[] = {
      {"PORT", "abc"},
      {"GRPC_PORT", "70000"},
      {"GRPC_MAX_CONNECTION_AGE", "soon"},
      {"SHADOW_MODE", "yes"},
      {"NEAR_LIMIT_RATIO", "1.5"},
      {"LOG_LEVEL", "loud"},
      {"REDIS_POOL_SIZE", "x"},
      {"STATS_FLUSH_INTERVAL", "-1s"},
      {"EXTRA_TAGS", "novalue"},
      {"CONFIG_TYPE", "REST"},
      {"CONFIG_GRPC_XDS_NODE_METADATA", "novalue"},
      {"TRACING_SAMPLING_RATE", "2"},
      {"XDS_CLIENT_BACKOFF_JITTER", "maybe"},
      {"REDIS_USE_EXPLICIT_PIPELINE", "maybe"},
  };
  for (const auto& [name, value] : bad) {
    const UpstreamEnv t = translate_upstream_env({{name, value}}, any_flag);
    ASSERT_EQ(t.errors.size(), 1u) << name << "\n" << joined(t.errors);
    EXPECT_TRUE(t.errors[0].starts_with(name + "=" + value + ": ")) << t.errors[0];
  }
}

TEST(UpstreamEnv, WhatCannotMeanAnythingHereIsRefusedByName) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"BACKEND_TYPE", "memcache"},
                                                        {"MEMCACHE_HOST_PORT", "m:11211"},
                                                        {"REDIS_PERSECOND", "true"},
                                                        {"GRPC_UDS", "/tmp/rl.sock"},
                                                        {"USE_DOG_STATSD", "true"},
                                                        {"CACHE_KEY_PREFIX", "rl_"},
                                                        {"LIMIT_REMAINING_HEADER", "X-Left"},
                                                        {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"},
                                                        {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true"},
                                                        {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"}}) {
    const UpstreamEnv t = translate_upstream_env({{name, value}}, any_flag);
    ASSERT_FALSE(t.errors.empty()) << name;
    EXPECT_TRUE(t.errors[0].starts_with(name + "=" + value + ": ")) << t.errors[0];
  }
  const UpstreamEnv unix_socket = translate_upstream_env({{"REDIS_URL", "/var/run/redis.sock"}}, any_flag);
  ASSERT_EQ(unix_socket.errors.size(), 1u);
  EXPECT_TRUE(unix_socket.errors[0].starts_with("REDIS_SOCKET_TYPE=unix: ")) << unix_socket.errors[0];
}

TEST(UpstreamEnv, AFlagThisBuildLacksIsAnErrorWhenAskedForAndANoteWhenOnlyADefault) {
  const auto no_statsd = [](std::string_view f) { return f != "--statsd"; };
  const UpstreamEnv defaulted = translate_upstream_env({}, no_statsd);
  EXPECT_TRUE(defaulted.errors.empty()) << joined(defaulted.errors);
  EXPECT_NE(joined(defaulted.notes)
                .find("USE_STATSD: upstream's default (USE_STATSD=true) not applied: this build "
                      "has no --statsd"),
            std::string::npos)
      << joined(defaulted.notes);
  const UpstreamEnv asked = translate_upstream_env({{"STATSD_PORT", "9125"}}, no_statsd);
  ASSERT_EQ(asked.errors.size(), 1u);
  EXPECT_EQ(asked.errors[0], "STATSD_PORT=9125: this build has no --statsd, which it needs");
}

TEST(UpstreamEnv, EveryVariableOfTheTableIsRead) {
  std::map<std::string, std::string> all;
  for (const UpstreamVariable& v : upstream_variables()) all[std::string(v.name)] = std::string(v.upstream_default);
  all["REDIS_URL"] = "r:6379";
  all["REDIS_SOCKET_TYPE"] = "tcp";
  for (auto& [name, value] : all) {
    if (name.starts_with("MEMCACHE_")) value = "";
  }
  const UpstreamEnv t = translate_upstream_env(all, any_flag);
  for (const std::string& e : t.errors) {
    EXPECT_EQ(e.find("not by this translation"), std::string::npos) << e;
  }
  EXPECT_EQ(upstream_variables().size(), 116u);  // settings.go's envconfig tags
}

// docs/envoy-gateway.md's table (in its section "Upstream's environment") has a row for each variable, in the
// table's order, with its default.
TEST(UpstreamEnv, TheDocsTableListsEveryVariable) {
  std::ifstream in(std::string(RK_TESTDATA) + "/../../docs/envoy-gateway.md");
  ASSERT_TRUE(in);
  // The section "Upstream's environment" only: the doc's other tables (xDS's flags, the statistics) have rows too.
  std::vector<std::string> rows;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) in_section = line == "## Upstream's environment";
    if (in_section && line.starts_with("| `")) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), upstream_variables().size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const UpstreamVariable& v = upstream_variables()[i];
    const std::string def = v.upstream_default.empty() ? "" : "`" + std::string(v.upstream_default) + "`";
    EXPECT_TRUE(rows[i].starts_with("| `" + std::string(v.name) + "` | " + def + " |")) << rows[i];
  }
}

TEST(UpstreamEnv, GoDurations) {
  long long ns = -1;
  EXPECT_TRUE(parse_go_duration("0", ns));
  EXPECT_EQ(ns, 0);
  EXPECT_TRUE(parse_go_duration("1h30m", ns));
  EXPECT_EQ(ns, 5'400'000'000'000);
  EXPECT_TRUE(parse_go_duration("1.5s", ns));
  EXPECT_EQ(ns, 1'500'000'000);
  EXPECT_TRUE(parse_go_duration("300ms", ns));
  EXPECT_EQ(ns, 300'000'000);
  EXPECT_TRUE(parse_go_duration("2m3s4ms", ns));
  EXPECT_EQ(ns, 123'004'000'000);
  for (const char* bad : {"", "soon", "10", "-1s", "1d", "s", "1.2.3s"})
    EXPECT_FALSE(parse_go_duration(bad, ns)) << bad;
}

// Envoy Gateway's deployment, every variable as it sets them (tests/testdata/envoy_gateway/ratelimit.env).
TEST(UpstreamEnv, EnvoyGatewaysDeploymentTranslatesWhole) {
  std::ifstream in(std::string(RK_TESTDATA) + "/envoy_gateway/ratelimit.env");
  ASSERT_TRUE(in) << "tests/testdata/envoy_gateway/ratelimit.env";
  std::map<std::string, std::string> env;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  ASSERT_GE(env.size(), 30u);
  const UpstreamEnv t = translate_upstream_env(env, any_flag);
  EXPECT_TRUE(t.errors.empty()) << joined(t.errors);
  EXPECT_EQ(arg(t, "--xds-server"), "envoy-gateway:18001");
  EXPECT_EQ(arg(t, "--xds-node-id"), "envoy-ratelimit");
  EXPECT_EQ(arg(t, "--xds-tls-cert"), "/certs/tls.crt");
  EXPECT_EQ(arg(t, "--xds-tls-ca"), "/certs/ca.crt");
  EXPECT_EQ(arg(t, "--ready-without-rules"), "<toggle>");
  EXPECT_EQ(arg(t, "--grpc-tls-cert"), "/certs/tls.crt");
  EXPECT_EQ(arg(t, "--grpc-tls-key"), "/certs/tls.key");
  EXPECT_EQ(arg(t, "--grpc-tls-client-ca"), "<absent>");  // EG's GRPC_SERVER_TLS_CA_CERT is no variable upstream reads
  EXPECT_NE(joined(t.notes).find("GRPC_SERVER_TLS_CA_CERT not read"), std::string::npos);
  EXPECT_NE(joined(t.notes).find("RUNTIME_IGNOREDOTFILES not used: the rules come over xDS"), std::string::npos);
  EXPECT_EQ(arg(t, "--skip-dotfiles"), "<absent>");
  EXPECT_EQ(arg(t, "--tls-cert"), "<absent>");
  EXPECT_EQ(arg(t, "--redis"), "rediss://redis_auth_password@redis.redis.svc:6379");
  EXPECT_EQ(arg(t, "--redis-tls-cert"), "/redis-certs/tls.crt");
  EXPECT_EQ(arg(t, "--statsd"), "<absent>");  // USE_STATSD=false
  EXPECT_EQ(arg(t, "--prometheus"), "0.0.0.0:19001");
  EXPECT_EQ(arg(t, "--log-level"), "info");
  EXPECT_EQ(arg(t, "--http"), "0.0.0.0:8080");
  EXPECT_EQ(arg(t, "--grpc"), "0.0.0.0:8081");
  EXPECT_EQ(arg(t, "--otlp-endpoint"), "http://trace-collector.envoy-gateway-system.svc.cluster.local:4318");
  EXPECT_EQ(arg(t, "--otlp-protocol"), "http/protobuf");
  EXPECT_EQ(arg(t, "--trace-sample-rate"), "1");
}

}  // namespace
}  // namespace rk::cli
