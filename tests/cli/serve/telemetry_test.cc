// OpenTelemetry's variables under serve's flags, and the endpoint spans go to.
#include "cli/serve/telemetry.h"

#include <gtest/gtest.h>

#include <map>

namespace rk::cli::serve {
namespace {

std::vector<std::string> read_env(ServeFlags& f, std::map<std::string, std::string> env) {
  return read_otel_environment(f, [env = std::move(env)](const char* name) -> const char* {
    static thread_local std::string value;
    const auto it = env.find(name);
    if (it == env.end()) return nullptr;
    value = it->second;
    return value.c_str();
  });
}

TEST(OtelEnvironment, TheStandardVariablesSetTheirFlags) {
  ServeFlags f;
  EXPECT_TRUE(read_env(f, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"},
                           {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%20ecret, x-team = edge"},
                           {"OTEL_SERVICE_NAME", "limits"},
                           {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
                           {"OTEL_TRACES_SAMPLER_ARG", "0.01"}})
                  .empty());
  EXPECT_EQ(otlp_traces_url(f), "http://collector:4318/v1/traces");
  EXPECT_EQ(f.otlp_headers,
            (std::vector<std::pair<std::string, std::string>>{{"api-key", "s ecret"}, {"x-team", "edge"}}));
  EXPECT_EQ(f.service_name, "limits");
  EXPECT_DOUBLE_EQ(f.trace_sample_rate, 0.01);
}

TEST(OtelEnvironment, TheTracesEndpointIsUsedAsGivenAndWinsOverTheBase) {
  ServeFlags f;
  EXPECT_TRUE(read_env(f, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"},
                           {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4318/custom"}})
                  .empty());
  EXPECT_EQ(otlp_traces_url(f), "http://b:4318/custom");
  ServeFlags g;
  EXPECT_TRUE(
      read_env(g, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317"}, {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}).empty());
  EXPECT_EQ(otlp_traces_url(g), "http://a:4317");  // gRPC: no path
}

TEST(OtelEnvironment, BadValuesNameTheirVariable) {
  ServeFlags f;
  const auto errors = read_env(f, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
                                   {"OTEL_TRACES_SAMPLER", "traceidratio"},
                                   {"OTEL_TRACES_SAMPLER_ARG", "2"},
                                   {"OTEL_EXPORTER_OTLP_HEADERS", "novalue"}});
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], "OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' is not http/protobuf or grpc");
  EXPECT_EQ(errors[1], "OTEL_EXPORTER_OTLP_HEADERS: not key=value pairs separated by commas");
  EXPECT_EQ(errors[2], "OTEL_TRACES_SAMPLER_ARG: '2' is not a number from 0 to 1");
}

TEST(OtelEnvironment, AFlagWinsOverAVariable) {
  ::setenv("OTEL_SERVICE_NAME", "from-env", 1);
  ::setenv("OTEL_TRACES_SAMPLER", "always_off", 1);
  ServeFlags f;
  bool help = false;
  const auto errors = read_serve_flags({"--config", "x.yaml", "--service-name", "from-flag"}, f, help);
  ::unsetenv("OTEL_SERVICE_NAME");
  ::unsetenv("OTEL_TRACES_SAMPLER");
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(f.service_name, "from-flag");
  EXPECT_DOUBLE_EQ(f.trace_sample_rate, 0);  // no flag given: the variable's
}

TEST(OtlpUrl, AFlagsUrlGetsTheTracesPathOnlyWithoutOne) {
  ServeFlags f;
  f.otlp_endpoint = "http://c:4318";
  EXPECT_EQ(otlp_traces_url(f), "http://c:4318/v1/traces");
  f.otlp_endpoint = "http://c:4318/otlp/v1/traces";
  EXPECT_EQ(otlp_traces_url(f), "http://c:4318/otlp/v1/traces");
  f.otlp_protocol = "grpc";
  f.otlp_endpoint = "c:4317";
  EXPECT_EQ(otlp_traces_url(f), "c:4317");
}

}  // namespace
}  // namespace rk::cli::serve
