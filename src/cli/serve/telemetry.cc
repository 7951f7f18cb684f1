// cli/serve/telemetry.cc: OTEL_* variables, the exporter, the tracer and the access log (see telemetry.h).
#include "cli/serve/telemetry.h"

#include <charconv>
#include <stdexcept>

#include "base/hex.h"
#ifdef RK_HAVE_GRPC
#include "tracing/otlp_exporter.h"
#endif

namespace rk::cli::serve {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = base::hex_value(in[i + 1]), lo = base::hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace

bool parse_otlp_headers(std::string_view text, bool decode, std::vector<std::pair<std::string, std::string>>& out) {
  out.clear();
  if (trim(text).empty()) return true;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view pair = text.substr(at, comma - at);
    at = comma + 1;
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view key = trim(pair.substr(0, eq));
    std::string value(trim(pair.substr(eq + 1)));
    if (key.empty()) return false;
    if (decode) {
      std::string decoded;
      if (!percent_decode(value, decoded)) return false;
      value = std::move(decoded);
    }
    for (const char c : value) {
      if (c == '\r' || c == '\n' || c == '\0') return false;
    }
    for (const char c : key) {
      if (c <= ' ' || c >= 0x7f || c == ':') return false;
    }
    out.emplace_back(std::string(key), std::move(value));
  }
  return true;
}

std::vector<std::string> read_otel_environment(ServeFlags& f, const std::function<const char*(const char*)>& getenv) {
  std::vector<std::string> errors;
  const auto var = [&getenv](const char* name) -> std::optional<std::string> {
    const char* v = getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  const auto first = [&var](const char* a, const char* b) -> std::pair<const char*, std::optional<std::string>> {
    if (auto v = var(a)) return {a, v};
    return {b, var(b)};
  };
  if (auto [name, v] = first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); v) {
    if (*v == "http/protobuf" || *v == "grpc") f.otlp_protocol = *v;
    else errors.push_back(std::string(name) + ": '" + *v + "' is not http/protobuf or grpc");
  }
  if (auto v = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
    f.otlp_endpoint = *v;
    f.otlp_endpoint_exact = true;
  } else if (auto base = var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
    f.otlp_endpoint = *base;
    f.otlp_endpoint_exact = false;
    if (f.otlp_protocol == "http/protobuf") {  // the signal's path is added to the base URL
      while (f.otlp_endpoint.ends_with('/')) f.otlp_endpoint.pop_back();
      f.otlp_endpoint += "/v1/traces";
      f.otlp_endpoint_exact = true;
    }
  }
  if (auto [name, v] = first("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); v) {
    if (!parse_otlp_headers(*v, true, f.otlp_headers)) {
      errors.push_back(std::string(name) + ": not key=value pairs separated by commas");
    }
  }
  if (auto v = var("OTEL_SERVICE_NAME")) f.service_name = *v;
  const auto arg = var("OTEL_TRACES_SAMPLER_ARG");
  if (auto v = var("OTEL_TRACES_SAMPLER")) {
    if (*v == "always_on" || *v == "parentbased_always_on") {
      f.trace_sample_rate = 1;
    } else if (*v == "always_off" || *v == "parentbased_always_off") {
      f.trace_sample_rate = 0;
    } else if (*v == "traceidratio" || *v == "parentbased_traceidratio") {
      double r = 1;  // the specification's default when the argument is absent
      if (arg) {
        const auto [end, ec] = std::from_chars(arg->data(), arg->data() + arg->size(), r);
        if (ec != std::errc{} || end != arg->data() + arg->size() || !(r >= 0 && r <= 1)) {
          errors.push_back("OTEL_TRACES_SAMPLER_ARG: '" + *arg + "' is not a number from 0 to 1");
        }
      }
      f.trace_sample_rate = r;
    } else {
      errors.push_back("OTEL_TRACES_SAMPLER: '" + *v +
                       "' is not always_on, always_off, traceidratio or their parentbased_ forms");
    }
  }
  return errors;
}

std::string otlp_traces_url(const ServeFlags& f) {
  std::string url = f.otlp_endpoint;
  if (f.otlp_protocol != "http/protobuf" || f.otlp_endpoint_exact) return url;
  const std::size_t scheme = url.find("://");
  const std::size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path == std::string::npos) return url + "/v1/traces";
  if (path == url.size() - 1) return url + "v1/traces";
  return url;
}

bool make_telemetry(const ServeFlags& f, Telemetry& out, std::string& error) {
  if (!f.access_log.empty()) {
    try {
      out.access_log = std::make_shared<logging::AccessLog>(f.access_log, logging::AccessLog::Options{});
    } catch (const std::invalid_argument& e) {
      error = std::string("--access-log: ") + e.what();
      return false;
    }
  }
  if (f.otlp_endpoint.empty()) return true;
#ifdef RK_HAVE_GRPC
  tracing::OtlpOptions options{
      .endpoint = otlp_traces_url(f),
      .protocol = f.otlp_protocol == "grpc" ? tracing::OtlpProtocol::kGrpc : tracing::OtlpProtocol::kHttpProtobuf,
      .headers = f.otlp_headers,
      .service_name = f.service_name};
  if (std::string problem = tracing::check_otlp_options(options); !problem.empty()) {
    error = "--otlp-endpoint: " + problem;
    return false;
  }
  auto exporter = std::make_shared<tracing::OtlpExporter>(std::move(options));
  out.tracer = std::make_shared<tracing::Tracer>(tracing::TracerOptions{.sample_rate = f.trace_sample_rate}, exporter);
  out.spans_exported = [e = exporter.get()] { return e->stats().exported; };
  out.spans_dropped = [e = exporter.get()] { return e->stats().dropped; };
  out.exporter = std::move(exporter);
  return true;
#else
  error = "--otlp-endpoint: this build has no gRPC and protobuf, which the OTLP exporter needs";
  return false;
#endif
}

}  // namespace rk::cli::serve
