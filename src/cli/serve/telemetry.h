// cli/serve/telemetry.h: serve's traces and logs: OpenTelemetry's standard variables read under the flags, the
// OTLP exporter and the tracer the service traces with, and the access log.
//
//   for (auto& e : read_otel_environment(flags, std::getenv)) ...;   // before the settings files and flags
//   Telemetry t;
//   if (!make_telemetry(flags, t, error)) ...;   // t.tracer null without --otlp-endpoint
//
// The variables (docs/service.md, "Traces"): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as given), or
// OTEL_EXPORTER_OTLP_ENDPOINT (/v1/traces added for http/protobuf); OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL,
// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS (values percent-decoded), OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG. A flag or setting given wins over a variable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "logging/access_log.h"
#include "cli/serve/flags.h"
#include "tracing/tracer.h"

namespace rk::cli::serve {

// "k=v,k2=v2" (spaces around each trimmed); `decode`: values percent-decoded (%XX), as the variable is written.
bool parse_otlp_headers(std::string_view text, bool decode, std::vector<std::pair<std::string, std::string>>& out);

// The OTEL_* variables into `f`; each problem names its variable ("OTEL_TRACES_SAMPLER_ARG: '2' is not ...").
std::vector<std::string> read_otel_environment(ServeFlags& f, const std::function<const char*(const char*)>& getenv);

// The endpoint spans go to, as the exporter takes it: http/protobuf's gets /v1/traces when it has no path.
std::string otlp_traces_url(const ServeFlags& f);

struct Telemetry {
  std::shared_ptr<tracing::Tracer> tracer;                       // null: no tracing
  std::shared_ptr<logging::AccessLog> access_log;                // null: none
  std::function<std::uint64_t()> spans_exported, spans_dropped;  // null without tracing
  std::shared_ptr<void> exporter;  // kept until the end: its destructor sends what is queued
};

// False with `error` (naming its flag) for an endpoint or access log file that cannot be used.
bool make_telemetry(const ServeFlags& f, Telemetry& out, std::string& error);

}  // namespace rk::cli::serve
