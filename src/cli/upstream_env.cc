// cli/upstream_env.cc: upstream's environment, variable by variable, as serve's flags (upstream_env.h).
#include "cli/upstream_env.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "base/ascii.h"
#include "base/json_string.h"

namespace rk::cli {

namespace {

// settings.go's variables in its order, with its defaults; `here` is what docs/envoy-gateway.md says of each.
constexpr UpstreamVariable kVariables[] = {
    {"HOST", "0.0.0.0", "with PORT: --http HOST:PORT (the decision API and /healthcheck)"},
    {"PORT", "8080", "with HOST: --http"},
    {"DEBUG_HOST", "0.0.0.0", "with DEBUG_PORT: --debug HOST:PORT (/rlconfig, /stats)"},
    {"DEBUG_PORT", "6070", "with DEBUG_HOST: --debug"},
    {"GRPC_UDS", "", "refused when set: gRPC listens on TCP only"},
    {"GRPC_HOST", "0.0.0.0", "with GRPC_PORT: --grpc HOST:PORT"},
    {"GRPC_PORT", "8081", "with GRPC_HOST: --grpc"},
    {"GRPC_MAX_CONNECTION_AGE", "24h", "--grpc-max-connection-age (±10% jitter)"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", "1h", "--grpc-max-connection-age-grace"},
    {"GRPC_SERVER_USE_TLS", "false", "true: the gRPC listener alone speaks TLS with the three below"},
    {"GRPC_SERVER_TLS_CERT", "", "--grpc-tls-cert (with GRPC_SERVER_USE_TLS)"},
    {"GRPC_SERVER_TLS_KEY", "", "--grpc-tls-key (with GRPC_SERVER_USE_TLS)"},
    {"GRPC_CLIENT_TLS_CACERT", "", "--grpc-tls-client-ca: client certificates required (with GRPC_SERVER_USE_TLS)"},
    {"GRPC_CLIENT_TLS_SAN", "", "--grpc-tls-client-san (with GRPC_CLIENT_TLS_CACERT)"},
    {"LOG_LEVEL", "WARN", "--log-level: trace and debug are debug, info is info, warn and above are error"},
    {"LOG_FORMAT", "text", "--log-format json or text"},
    {"CONFIG_TYPE", "FILE", "FILE: --config from the RUNTIME_ variables; GRPC_XDS_SOTW: --xds-server and the rest"},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", "false", "true: --ready-without-rules"},
    {"CONFIG_GRPC_XDS_NODE_ID", "default", "--xds-node-id (with GRPC_XDS_SOTW)"},
    {"CONFIG_GRPC_XDS_NODE_METADATA", "",
     "--xds-node-metadata: k1=v1,k2=v2 (split at the first =; a key given twice keeps its last value) as a JSON "
     "object of strings; an entry without = refused"},
    {"CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000", "--xds-server (with GRPC_XDS_SOTW)"},
    {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s", "--xds-retry-interval (with GRPC_XDS_SOTW)"},
    {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", "--xds-headers, k1:v1,k2:v2 as k1=v1,k2=v2"},
    {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "false", "true: --xds-tls and the three below"},
    {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "", "--xds-tls-cert (with CONFIG_GRPC_XDS_SERVER_USE_TLS)"},
    {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "", "--xds-tls-key (with CONFIG_GRPC_XDS_SERVER_USE_TLS)"},
    {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "", "--xds-tls-ca (with CONFIG_GRPC_XDS_SERVER_USE_TLS)"},
    {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "", "--xds-tls-san (with CONFIG_GRPC_XDS_SERVER_USE_TLS)"},
    {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s", "--xds-backoff-initial (with GRPC_XDS_SOTW)"},
    {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s", "--xds-backoff-max (with GRPC_XDS_SOTW)"},
    {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.5", "--xds-backoff-random-factor (with GRPC_XDS_SOTW)"},
    {"XDS_CLIENT_BACKOFF_JITTER", "true", "--xds-backoff-jitter on or off (with GRPC_XDS_SOTW)"},
    {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "", "accepted up to 67108864: the xDS client takes pushes up to 64 MiB"},
    {"USE_DOG_STATSD", "false", "refused when true: statsd's plain format only"},
    {"USE_DOG_STATSD_MOGRIFIERS", "", "refused when set (DogStatsD's)"},
    {"USE_STATSD", "true", "true: --statsd STATSD_HOST:STATSD_PORT"},
    {"STATSD_HOST", "localhost", "with STATSD_PORT: --statsd"},
    {"STATSD_PORT", "8125", "with STATSD_HOST: --statsd"},
    {"EXTRA_TAGS", "", "--statsd-tags"},
    {"STATS_FLUSH_INTERVAL", "10s", "--stats-flush-interval"},
    {"DISABLE_STATS", "false", "true: neither --statsd nor --prometheus"},
    {"USE_PROMETHEUS", "false", "true: --prometheus PROMETHEUS_ADDR (\":9090\" is 0.0.0.0:9090)"},
    {"PROMETHEUS_ADDR", ":9090", "--prometheus"},
    {"PROMETHEUS_PATH", "/metrics", "--prometheus-path"},
    {"PROMETHEUS_MAPPER_YAML", "", "accepted, not read: the series carry upstream's default mapping's names"},
    {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "false",
     "refused when true with USE_PROMETHEUS: the decision time is served in seconds only"},
    {"RUNTIME_ROOT", "/srv/runtime_data/current", "--config RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY"},
    {"RUNTIME_SUBDIRECTORY", "", "see RUNTIME_ROOT"},
    {"RUNTIME_APPDIRECTORY", "config", "see RUNTIME_ROOT"},
    {"RUNTIME_IGNOREDOTFILES", "false", "true: --skip-dotfiles (files named with a dot are not read)"},
    {"RUNTIME_WATCH_ROOT", "true", "accepted either way: the files are polled, a swapped link is seen too"},
    {"EXPIRATION_JITTER_MAX_SECONDS", "300", "accepted: Redis keys expire when their state is fresh again"},
    {"LOCAL_CACHE_SIZE_IN_BYTES", "0", "above 0, with Redis: --redis-near-cache (refused keys answered here)"},
    {"NEAR_LIMIT_RATIO", "0.8", "--near-limit-ratio"},
    {"CACHE_KEY_PREFIX", "", "refused when set: Redis keys are named by their rule"},
    {"BACKEND_TYPE", "redis", "redis; memcache refused"},
    {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "refused when true: the algorithm decides what counts"},
    {"LIMIT_RESPONSE_HEADERS_ENABLED", "false", "true: --grpc-response-headers (RateLimit, RateLimit-Policy, ...)"},
    {"LIMIT_LIMIT_HEADER", "RateLimit-Limit", "refused when set: the field names are the RateLimit draft's"},
    {"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "refused when set, likewise"},
    {"LIMIT_RESET_HEADER", "RateLimit-Reset", "refused when set, likewise"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false",
     "accepted: /healthcheck answers 200 once rules are loaded (or with --ready-without-rules)"},
    {"REDIS_SOCKET_TYPE", "unix", "tcp; unix refused with REDIS_URL set (TCP only)"},
    {"REDIS_TYPE", "SINGLE", "SINGLE, SENTINEL or CLUSTER: the --redis URL's kind"},
    {"REDIS_URL", "/var/run/nutcracker/ratelimit.sock",
     "--redis: host:port; h1:p1,h2:p2 (CLUSTER); primary,h1:p1,... (SENTINEL); unset: limits kept in memory"},
    {"REDIS_POOL_SIZE", "10", "--redis-connections (at most 64)"},
    {"REDIS_AUTH", "", "password or user:password, into the --redis URL"},
    {"REDIS_TLS", "false", "true: rediss"},
    {"REDIS_TLS_CLIENT_CERT", "", "--redis-tls-cert"},
    {"REDIS_TLS_CLIENT_KEY", "", "--redis-tls-key"},
    {"REDIS_TLS_CACERT", "", "--redis-tls-ca"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "refused when true: Redis's certificate name is checked"},
    {"REDIS_PIPELINE_WINDOW", "0", "accepted: commands are always pipelined"},
    {"REDIS_PIPELINE_LIMIT", "0", "accepted: commands are always pipelined"},
    {"REDIS_USE_EXPLICIT_PIPELINE", "false", "accepted: commands are always pipelined"},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", "1", "accepted: each Cluster node's commands go out together"},
    {"REDIS_PERSECOND", "false", "refused when true: one Redis for every limit"},
    {"REDIS_PERSECOND_SOCKET_TYPE", "unix", "read with REDIS_PERSECOND only, as upstream"},
    {"REDIS_PERSECOND_TYPE", "SINGLE", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_URL", "/var/run/nutcracker/ratelimitpersecond.sock", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_POOL_SIZE", "10", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_AUTH", "", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_TLS", "false", "read with REDIS_PERSECOND only"},
    {"REDIS_SENTINEL_AUTH", "", "refused when set: sentinels are reached without a password"},
    {"REDIS_PERSECOND_SENTINEL_AUTH", "", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_PIPELINE_WINDOW", "0", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_PIPELINE_LIMIT", "0", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_USE_EXPLICIT_PIPELINE", "false", "read with REDIS_PERSECOND only"},
    {"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "1", "read with REDIS_PERSECOND only"},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false",
     "refused when true: without Redis the domain's failure policy answers, healthy"},
    {"REDIS_TIMEOUT", "10s", "--redis-timeout (at most 60s)"},
    {"REDIS_PERSECOND_TIMEOUT", "10s", "read with REDIS_PERSECOND only"},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "WAIT: decisions queue on the connections; others refused"},
    {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "read with REDIS_PERSECOND only"},
    {"REDIS_STARTUP_INITIAL_INTERVAL", "1s",
     "accepted: serve starts without Redis, the failure policy answers, and it reconnects with backoff"},
    {"REDIS_STARTUP_MAX_INTERVAL", "30s", "accepted, likewise"},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", "0", "accepted, likewise"},
    {"MEMCACHE_HOST_PORT", "", "refused when set: no memcache store"},
    {"MEMCACHE_MAX_IDLE_CONNS", "2", "refused when set"},
    {"MEMCACHE_SRV", "", "refused when set"},
    {"MEMCACHE_SRV_REFRESH", "0", "refused when set"},
    {"MEMCACHE_TLS", "false", "refused when set"},
    {"MEMCACHE_TLS_CLIENT_CERT", "", "refused when set"},
    {"MEMCACHE_TLS_CLIENT_KEY", "", "refused when set"},
    {"MEMCACHE_TLS_CACERT", "", "refused when set"},
    {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "refused when set"},
    {"SHADOW_MODE", "false", "--shadow-mode"},
    {"QUOTA_MODE", "false", "refused when true: quota_mode is per descriptor in the rules"},
    {"RESPONSE_DYNAMIC_METADATA", "false", "true: --grpc-response-metadata"},
    {"MERGE_DOMAIN_CONFIG", "false", "--merge-domains"},
    {"TRACING_ENABLED", "false", "true: --otlp-endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) and the four below"},
    {"TRACING_SERVICE_NAME", "RateLimit", "--service-name"},
    {"TRACING_SERVICE_NAMESPACE", "", "accepted, not sent: serve has no flag for it"},
    {"TRACING_SERVICE_INSTANCE_ID", "", "accepted, not sent: serve has no flag for it"},
    {"TRACING_EXPORTER_PROTOCOL", "http", "--otlp-protocol: http is http/protobuf, grpc is grpc"},
    {"TRACING_SAMPLING_RATE", "1", "--trace-sample-rate"},
};

// One translation: the environment, the build's flags, what has been read.
class Env {
 public:
  Env(const std::map<std::string, std::string>& env, const std::function<bool(std::string_view)>& has_flag,
      UpstreamEnv& out)
      : env_(env), has_flag_(has_flag), out_(out) {}

  bool given(std::string_view name) { return read(name) != nullptr; }

  // The value set, or upstream's default.
  std::string text(std::string_view name) {
    if (const std::string* v = read(name)) return *v;
    return std::string(default_of(name));
  }

  bool boolean(std::string_view name) {
    const std::string v = text(name);
    for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
      if (v == t) return true;
    }
    for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
      if (v == f) return false;
    }
    bad(name, v, "not a boolean (true or false)");
    return false;
  }

  long long integer(std::string_view name, long long lo, long long hi, std::string_view what) {
    const std::string v = text(name);
    long long n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || end != v.data() + v.size() || v.empty() || n < lo || n > hi) {
      bad(name, v,
          std::string(what) + " (a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ")");
      return lo;
    }
    return n;
  }

  double number(std::string_view name, double lo, double hi) {
    const std::string v = text(name);
    double d = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (ec != std::errc{} || end != v.data() + v.size() || v.empty() || !(d >= lo && d <= hi)) {
      bad(name, v, "not a number from " + shortest(lo) + " to " + shortest(hi));
      return lo;
    }
    return d;
  }

  // A Go duration as serve's flags take it ("90000ms"); "" when it is 0.
  std::string duration(std::string_view name) {
    const std::string v = text(name);
    long long ns = 0;
    if (!parse_go_duration(v, ns)) {
      bad(name, v, "not a duration (like 24h, 1h30m, 500ms)");
      return "";
    }
    if (ns == 0) return "";
    if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
    return std::to_string(ns) + "ns";
  }

  // `k1:v1,k2:v2` (envconfig's map), as pairs; "" is none.
  std::vector<std::pair<std::string, std::string>> pairs(std::string_view name) {
    std::vector<std::pair<std::string, std::string>> out;
    const std::string v = text(name);
    if (v.empty()) return out;
    for (std::size_t at = 0; at <= v.size();) {
      const std::size_t comma = std::min(v.find(',', at), v.size());
      const std::string item = v.substr(at, comma - at);
      const std::size_t colon = item.find(':');
      if (colon == std::string::npos || colon == 0) {
        bad(name, v, "not a list of key:value pairs (like k1:v1,k2:v2)");
        return {};
      }
      out.emplace_back(item.substr(0, colon), item.substr(colon + 1));
      at = comma + 1;
    }
    return out;
  }

  // A set variable refused: it cannot mean here what it means upstream.
  void refuse(std::string_view name, std::string_view why) {
    out_.errors.push_back(std::string(name) + "=" + text(name) + ": " + std::string(why));
  }
  void bad(std::string_view name, const std::string& value, std::string_view why) {
    out_.errors.push_back(std::string(name) + "=" + value + ": " + std::string(why));
  }
  void note(std::string note) { out_.notes.push_back(std::move(note)); }

  // `flag value` (or the toggle `flag` alone when value is empty and toggle is set), from `vars`: given to serve
  // when this build has the flag; else an error if one of them is set, or a note that upstream's default is not
  // applied.
  void flag(std::initializer_list<std::string_view> vars, std::string_view flag, std::string value,
            bool toggle = false) {
    if (has_flag_(flag)) {
      out_.args.emplace_back(flag);
      if (!toggle) out_.args.push_back(std::move(value));
      return;
    }
    for (std::string_view v : vars) {
      if (given(v)) {
        refuse(v, "this build has no " + std::string(flag) + ", which it needs");
        return;
      }
    }
    note(std::string(*vars.begin()) + ": upstream's default (" + std::string(*vars.begin()) + "=" +
         std::string(default_of(*vars.begin())) + ") not applied: this build has no " + std::string(flag));
  }

  // Variables of the table that are set and were never read: a gap in this file, which a test looks for.
  std::vector<std::string> unread() const {
    std::vector<std::string> names;
    for (const auto& v : kVariables) {
      if (env_.contains(std::string(v.name)) && !read_.contains(v.name)) names.emplace_back(v.name);
    }
    return names;
  }

 private:
  static std::string shortest(double d) {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, end);
  }
  static std::string_view default_of(std::string_view name) {
    for (const auto& v : kVariables) {
      if (v.name == name) return v.upstream_default;
    }
    return "";
  }
  const std::string* read(std::string_view name) {
    read_.insert(name);
    const auto it = env_.find(std::string(name));
    return it == env_.end() ? nullptr : &it->second;
  }

  const std::map<std::string, std::string>& env_;
  const std::function<bool(std::string_view)>& has_flag_;
  UpstreamEnv& out_;
  std::set<std::string_view> read_;
};

// HOST and PORT as ADDR:PORT; an IPv6 address in brackets; "" as 0.0.0.0 (Go listens on every address).
std::string address(Env& e, std::string_view host_var, std::string_view port_var) {
  std::string host = e.text(host_var);
  const long long port = e.integer(port_var, 0, 65535, "not a port");
  if (host.empty()) host = "0.0.0.0";
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return host + ":" + std::to_string(port);
}

void listeners(Env& e) {
  e.flag({"HOST", "PORT"}, "--http", address(e, "HOST", "PORT"));
  e.flag({"DEBUG_HOST", "DEBUG_PORT"}, "--debug", address(e, "DEBUG_HOST", "DEBUG_PORT"));
  if (!e.text("GRPC_UDS").empty()) e.refuse("GRPC_UDS", "gRPC listens on TCP only here (GRPC_HOST, GRPC_PORT)");
  e.flag({"GRPC_HOST", "GRPC_PORT"}, "--grpc", address(e, "GRPC_HOST", "GRPC_PORT"));
  if (std::string age = e.duration("GRPC_MAX_CONNECTION_AGE"); !age.empty()) {
    e.flag({"GRPC_MAX_CONNECTION_AGE"}, "--grpc-max-connection-age", age);
  }
  if (std::string grace = e.duration("GRPC_MAX_CONNECTION_AGE_GRACE"); !grace.empty()) {
    e.flag({"GRPC_MAX_CONNECTION_AGE_GRACE"}, "--grpc-max-connection-age-grace", grace);
  }
  // The gRPC listener's own TLS: upstream reads the files only with GRPC_SERVER_USE_TLS.
  const char* const files[][2] = {{"GRPC_SERVER_TLS_CERT", "--grpc-tls-cert"},
                                  {"GRPC_SERVER_TLS_KEY", "--grpc-tls-key"},
                                  {"GRPC_CLIENT_TLS_CACERT", "--grpc-tls-client-ca"},
                                  {"GRPC_CLIENT_TLS_SAN", "--grpc-tls-client-san"}};
  if (e.boolean("GRPC_SERVER_USE_TLS")) {
    // Never plaintext where TLS was asked for.
    if (e.text("GRPC_SERVER_TLS_CERT").empty() || e.text("GRPC_SERVER_TLS_KEY").empty()) {
      e.refuse("GRPC_SERVER_USE_TLS", "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
    }
    if (!e.text("GRPC_CLIENT_TLS_SAN").empty() && e.text("GRPC_CLIENT_TLS_CACERT").empty()) {
      e.refuse("GRPC_CLIENT_TLS_SAN", "needs GRPC_CLIENT_TLS_CACERT, the CAs a client certificate is verified by");
    }
    for (const auto& [var, flag] : files) {
      if (std::string v = e.text(var); !v.empty()) e.flag({var}, flag, v);
    }
  } else {
    for (const auto& [var, flag] : files) {
      if (!e.text(var).empty()) e.note(std::string(var) + " not read: GRPC_SERVER_USE_TLS is not true (as upstream)");
    }
  }
  if (e.given("GRPC_SERVER_TLS_CA_CERT")) {
    e.note(
        "GRPC_SERVER_TLS_CA_CERT not read: upstream reads no variable of that name (its client CAs are "
        "GRPC_CLIENT_TLS_CACERT's)");
  }
}

// logrus's levels onto ours: debug, info, error.
void logs(Env& e) {
  const std::string level = base::ascii_lower(e.text("LOG_LEVEL"));
  std::string ours;
  if (level == "trace" || level == "debug") ours = "debug";
  else if (level == "info") ours = "info";
  else if (level == "warn" || level == "warning" || level == "error" || level == "fatal" || level == "panic") {
    ours = "error";
  } else {
    e.bad("LOG_LEVEL", e.text("LOG_LEVEL"), "not a level (trace, debug, info, warn, error, fatal or panic)");
  }
  if (!ours.empty()) e.flag({"LOG_LEVEL"}, "--log-level", ours);
  const std::string format = base::ascii_lower(e.text("LOG_FORMAT"));
  if (format != "json" && format != "text") {
    e.bad("LOG_FORMAT", e.text("LOG_FORMAT"), "not json or text");
  } else {
    e.flag({"LOG_FORMAT"}, "--log-format", format);
  }
}

// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY: the folder upstream's file provider reads (its runtime
// loader's keys "<appdirectory>.<file>" under root/subdirectory).
std::string rules_folder(Env& e) {
  std::string path = e.text("RUNTIME_ROOT");
  for (const char* part : {"RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}) {
    const std::string p = e.text(part);
    if (p.empty()) continue;
    if (!path.empty() && path.back() != '/') path += '/';
    path += p;
  }
  return path;
}

void xds(Env& e, bool used) {
  // Read (and so checked) either way; given to serve only when the rules come over xDS.
  const std::string node = e.text("CONFIG_GRPC_XDS_NODE_ID"), server = e.text("CONFIG_GRPC_XDS_SERVER_URL");
  // upstream's form: entries split at ',', each split at its first '=' into a key and a string value, a key given
  // twice keeping its last value (a Go map). Upstream drops an entry without '=' (its comment's "key1:val1" too);
  // here that entry is refused, naming it. Empty entries (a trailing comma) carry nothing.
  std::string metadata;
  if (const std::string m = e.text("CONFIG_GRPC_XDS_NODE_METADATA"); !m.empty()) {
    std::vector<std::pair<std::string, std::string>> fields;
    bool ok = true;
    for (std::size_t at = 0; at <= m.size();) {
      const std::size_t comma = std::min(m.find(',', at), m.size());
      const std::string item = m.substr(at, comma - at);
      at = comma + 1;
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      if (eq == std::string::npos) {
        e.bad("CONFIG_GRPC_XDS_NODE_METADATA", m,
              "'" + item + "' is not key=value (the entries are k1=v1,k2=v2; upstream drops one without '=')");
        ok = false;
        break;
      }
      std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      const auto same = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; });
      if (same != fields.end()) same->second = std::move(value);
      else fields.emplace_back(std::move(key), std::move(value));
    }
    if (ok && !fields.empty()) {
      metadata = "{";
      for (const auto& [key, value] : fields) {
        if (metadata.size() > 1) metadata += ',';
        base::append_json_string(metadata, key);
        metadata += ':';
        base::append_json_string(metadata, value);
      }
      metadata += '}';
    }
  }
  const std::string retry = e.duration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL");
  std::string headers;
  for (const auto& [k, v] : e.pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS")) {
    headers += (headers.empty() ? "" : ",") + k + "=" + v;
  }
  const bool tls = e.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS");
  const char* const files[][2] = {{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "--xds-tls-cert"},
                                  {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "--xds-tls-key"},
                                  {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "--xds-tls-ca"},
                                  {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "--xds-tls-san"}};
  const std::string initial = e.duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL");
  const std::string max = e.duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL");
  const double factor = e.number("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", 0, 1e9);
  const bool jitter = e.boolean("XDS_CLIENT_BACKOFF_JITTER");
  // Upstream's largest push the client takes (gRPC's 4 MiB when unset); here it is always 64 MiB, so a size up to
  // that is taken as asked, and a larger one cannot be.
  if (!e.text("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES").empty()) {
    const long long most = 64LL << 20;
    if (e.integer("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", 1, 1LL << 31, "not a size in bytes") > most) {
      e.refuse("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "the xDS client takes pushes of up to 67108864 bytes (64 MiB)");
    } else {
      e.note("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: the xDS client takes pushes of up to 64 MiB, that size included");
    }
  }
  for (const auto& [var, flag] : files) (void)e.text(var);  // read either way
  if (!used) {
    for (const auto& v : kVariables) {
      if ((v.name.starts_with("CONFIG_GRPC_XDS_") || v.name.starts_with("XDS_CLIENT_")) && e.given(v.name)) {
        e.note(std::string(v.name) + " not used: CONFIG_TYPE is FILE (as upstream)");
      }
    }
    return;
  }
  e.flag({"CONFIG_GRPC_XDS_SERVER_URL"}, "--xds-server", server);
  e.flag({"CONFIG_GRPC_XDS_NODE_ID"}, "--xds-node-id", node);
  if (!metadata.empty()) e.flag({"CONFIG_GRPC_XDS_NODE_METADATA"}, "--xds-node-metadata", metadata);
  if (!headers.empty()) e.flag({"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}, "--xds-headers", headers);
  if (!retry.empty()) e.flag({"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"}, "--xds-retry-interval", retry);
  if (tls) {
    e.flag({"CONFIG_GRPC_XDS_SERVER_USE_TLS"}, "--xds-tls", "", true);
    for (const auto& [var, flag] : files) {
      if (std::string v = e.text(var); !v.empty()) e.flag({var}, flag, v);
    }
  } else {
    for (const auto& [var, flag] : files) {
      if (!e.text(var).empty()) {
        e.note(std::string(var) + " not read: CONFIG_GRPC_XDS_SERVER_USE_TLS is not true (as upstream)");
      }
    }
  }
  if (!initial.empty()) e.flag({"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"}, "--xds-backoff-initial", initial);
  if (!max.empty()) e.flag({"XDS_CLIENT_BACKOFF_MAX_INTERVAL"}, "--xds-backoff-max", max);
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, factor);
  e.flag({"XDS_CLIENT_BACKOFF_RANDOM_FACTOR"}, "--xds-backoff-random-factor", std::string(buf, end));
  e.flag({"XDS_CLIENT_BACKOFF_JITTER"}, "--xds-backoff-jitter", jitter ? "on" : "off");
}

void rules(Env& e) {
  const std::string type = e.text("CONFIG_TYPE");
  const std::string folder = rules_folder(e);
  (void)e.boolean("RUNTIME_WATCH_ROOT");  // either way: the files are polled, through a swapped link too
  const bool skip_dotfiles = e.boolean("RUNTIME_IGNOREDOTFILES");
  if (type == "FILE") {
    e.flag({"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, "--config", folder);
    if (skip_dotfiles) e.flag({"RUNTIME_IGNOREDOTFILES"}, "--skip-dotfiles", "", true);
  } else if (type == "GRPC_XDS_SOTW") {
    for (const char* v : {"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES",
                          "RUNTIME_WATCH_ROOT"}) {
      if (e.given(v)) e.note(std::string(v) + " not used: the rules come over xDS (CONFIG_TYPE=GRPC_XDS_SOTW)");
    }
  } else {
    e.refuse("CONFIG_TYPE", "not FILE or GRPC_XDS_SOTW");
  }
  xds(e, type == "GRPC_XDS_SOTW");
  if (e.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG")) {
    e.flag({"FORCE_START_WITHOUT_INITIAL_CONFIG"}, "--ready-without-rules", "", true);
  }
  (void)e.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED");  // /healthcheck is 200 once rules are in, either way
  if (e.boolean("SHADOW_MODE")) e.flag({"SHADOW_MODE"}, "--shadow-mode", "", true);
  if (e.boolean("QUOTA_MODE")) {
    e.refuse("QUOTA_MODE", "quota mode is set per descriptor here (quota_mode: true in the rules: docs/rules.md)");
  }
  if (e.boolean("RESPONSE_DYNAMIC_METADATA")) {
    e.flag({"RESPONSE_DYNAMIC_METADATA"}, "--grpc-response-metadata", "", true);
  }
  if (e.boolean("MERGE_DOMAIN_CONFIG")) e.flag({"MERGE_DOMAIN_CONFIG"}, "--merge-domains", "", true);
  char buf[32];
  const double ratio = e.number("NEAR_LIMIT_RATIO", 0, 1);
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, ratio);
  e.flag({"NEAR_LIMIT_RATIO"}, "--near-limit-ratio", std::string(buf, end));
  if (e.boolean("LIMIT_RESPONSE_HEADERS_ENABLED")) {
    e.flag({"LIMIT_RESPONSE_HEADERS_ENABLED"}, "--grpc-response-headers", "", true);
  }
  for (const char* header : {"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"}) {
    if (e.given(header)) {
      e.refuse(header,
               "the answer's field names are fixed here (RateLimit, RateLimit-Policy, X-RateLimit-*: "
               "docs/service.md)");
    }
  }
  if (e.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")) {
    e.refuse("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
             "whether a refused hit counts is the rule's algorithm's to say here (docs/algorithms.md)");
  }
}

// REDIS_URL's forms by REDIS_TYPE as a --redis URL, REDIS_AUTH and REDIS_TLS in it.
std::string redis_url(Env& e) {
  const std::string url = e.text("REDIS_URL");
  const std::string type = base::ascii_lower(e.text("REDIS_TYPE"));
  const bool tls = e.boolean("REDIS_TLS");
  // "password" or "user:password", as the URL's userinfo takes it (store/redis/url.h: up to its last '@').
  std::string auth = e.text("REDIS_AUTH");
  if (!auth.empty()) auth += "@";
  const std::string s = tls ? "rediss" : "redis";
  if (url.find("://") != std::string::npos) {
    if (!auth.empty() || tls) e.note("REDIS_URL is a URL: REDIS_AUTH and REDIS_TLS are what it says");
    return url;
  }
  if (type == "single") return s + "://" + auth + url;
  if (type == "cluster") return s + "+cluster://" + auth + url;
  if (type == "sentinel") {
    const std::size_t comma = url.find(',');
    if (comma == std::string::npos || comma == 0) {
      e.bad("REDIS_URL", url, "with REDIS_TYPE=SENTINEL, not primary-name,host:port[,host:port...]");
      return "";
    }
    return s + "+sentinel://" + auth + url.substr(comma + 1) + "/" + url.substr(0, comma);
  }
  e.bad("REDIS_TYPE", e.text("REDIS_TYPE"), "not SINGLE, SENTINEL or CLUSTER");
  return "";
}

void store(Env& e) {
  const std::string backend = base::ascii_lower(e.text("BACKEND_TYPE"));
  for (const auto& v : kVariables) {
    if (v.name.starts_with("MEMCACHE_") && e.given(v.name)) e.refuse(v.name, "ratekeeper has no memcache store");
  }
  if (backend == "memcache") e.refuse("BACKEND_TYPE", "ratekeeper has no memcache store (redis, or none: memory)");
  else if (backend != "redis") e.refuse("BACKEND_TYPE", "not redis");
  if (!e.text("CACHE_KEY_PREFIX").empty()) {
    e.refuse("CACHE_KEY_PREFIX", "Redis keys are named by their rule here (docs/redis.md)");
  }
  (void)e.integer("EXPIRATION_JITTER_MAX_SECONDS", 0, 1LL << 40, "not a number of seconds");
  if (e.boolean("REDIS_PERSECOND")) {
    e.refuse("REDIS_PERSECOND", "one Redis holds every limit here; a second one for per-second limits is not kept");
  }
  for (const char* v :
       {"REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE",
        "REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_PIPELINE_WINDOW",
        "REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_USE_EXPLICIT_PIPELINE", "REDIS_PERSECOND_SENTINEL_AUTH",
        "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND_TIMEOUT",
        "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR"}) {
    if (e.given(v)) e.note(std::string(v) + " not read: REDIS_PERSECOND is not true (as upstream)");
  }
  if (e.boolean("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")) {
    e.refuse("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
             "without Redis each domain's failure policy answers here and the server stays healthy (docs/redis.md)");
  }
  if (e.boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")) {
    e.refuse("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
             "Redis's certificate is always checked here; --redis-tls-server-name names what it must carry");
  }
  (void)e.duration("REDIS_PIPELINE_WINDOW");  // commands are always pipelined here
  (void)e.boolean("REDIS_USE_EXPLICIT_PIPELINE");
  (void)e.integer("REDIS_CLUSTER_PIPELINE_PARALLELISM", 0, 1 << 20, "not a number of groups");
  for (const char* v :
       {"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"}) {
    (void)e.duration(v);  // serve starts without Redis and reconnects with a backoff of its own
  }
  if (!e.text("REDIS_SENTINEL_AUTH").empty()) {
    e.refuse("REDIS_SENTINEL_AUTH", "sentinels are reached without a password here (docs/redis.md)");
  }
  if (const std::string b = e.text("REDIS_POOL_ON_EMPTY_BEHAVIOR"); base::ascii_lower(b) != "wait") {
    e.refuse("REDIS_POOL_ON_EMPTY_BEHAVIOR", "decisions wait for a connection here (WAIT)");
  }
  const std::string timeout = e.duration("REDIS_TIMEOUT");
  long long timeout_ns = 0;
  if (parse_go_duration(e.text("REDIS_TIMEOUT"), timeout_ns) &&
      (timeout_ns < 1'000'000 || timeout_ns > 60'000'000'000)) {
    e.bad("REDIS_TIMEOUT", e.text("REDIS_TIMEOUT"), "not a duration from 1ms to 60s");
  }
  (void)e.integer("REDIS_PIPELINE_LIMIT", 0, 1LL << 31, "not a number of commands");
  const long long pool = e.integer("REDIS_POOL_SIZE", 1, 1 << 20, "not a pool size");
  const long long cache = e.integer("LOCAL_CACHE_SIZE_IN_BYTES", 0, 1LL << 50, "not a size in bytes");
  const std::string socket = base::ascii_lower(e.text("REDIS_SOCKET_TYPE"));
  if (socket != "tcp" && socket != "unix") e.bad("REDIS_SOCKET_TYPE", e.text("REDIS_SOCKET_TYPE"), "not tcp or unix");
  const bool redis = backend == "redis" && e.given("REDIS_URL");
  if (!redis) {
    e.note(
        "REDIS_URL not set: limits are kept in this process (upstream's default is the socket "
        "/var/run/nutcracker/ratelimit.sock)");
    for (const char* v : {"REDIS_AUTH", "REDIS_TLS", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY",
                          "REDIS_TLS_CACERT", "REDIS_TYPE"}) {
      if (e.given(v)) e.note(std::string(v) + " not used: REDIS_URL is not set");
    }
    return;
  }
  if (socket == "unix") {
    e.refuse("REDIS_SOCKET_TYPE", "Redis is reached over TCP here: set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port");
    return;
  }
  if (std::string url = redis_url(e); !url.empty()) e.flag({"REDIS_URL"}, "--redis", url);
  e.flag({"REDIS_POOL_SIZE"}, "--redis-connections", std::to_string(std::min<long long>(pool, 64)));
  if (!timeout.empty()) e.flag({"REDIS_TIMEOUT"}, "--redis-timeout", timeout);
  if (cache > 0) e.flag({"LOCAL_CACHE_SIZE_IN_BYTES"}, "--redis-near-cache", "", true);
  for (const auto& [var, flag] :
       {std::pair{"REDIS_TLS_CLIENT_CERT", "--redis-tls-cert"}, std::pair{"REDIS_TLS_CLIENT_KEY", "--redis-tls-key"},
        std::pair{"REDIS_TLS_CACERT", "--redis-tls-ca"}}) {
    if (std::string v = e.text(var); !v.empty()) e.flag({var}, flag, v);
  }
}

// ":9090" as 0.0.0.0:9090, as Go listens.
std::string listen_address(std::string a) {
  if (!a.empty() && a.front() == ':') a = "0.0.0.0" + a;
  return a;
}

void stats(Env& e) {
  const bool disabled = e.boolean("DISABLE_STATS");
  if (e.boolean("USE_DOG_STATSD")) e.refuse("USE_DOG_STATSD", "statsd's plain format only here (USE_STATSD)");
  if (!e.text("USE_DOG_STATSD_MOGRIFIERS").empty()) {
    e.refuse("USE_DOG_STATSD_MOGRIFIERS", "DogStatsD's; statsd's plain format only here");
  }
  const bool statsd = e.boolean("USE_STATSD");
  const std::string host = e.text("STATSD_HOST");
  const long long port = e.integer("STATSD_PORT", 1, 65535, "not a port");
  const auto tags = e.pairs("EXTRA_TAGS");
  const std::string flush = e.duration("STATS_FLUSH_INTERVAL");
  const bool prometheus = e.boolean("USE_PROMETHEUS");
  const std::string prom_addr = listen_address(e.text("PROMETHEUS_ADDR"));
  const std::string prom_path = e.text("PROMETHEUS_PATH");
  // Upstream's switch back to its built-in mapping's old ratelimit_service_response_time_seconds, which held
  // milliseconds. --prometheus serves no such series: the decision time is ratekeeper_decision_duration_seconds,
  // in seconds, and nothing can make it milliseconds; a dashboard that reads milliseconds would be wrong by 1000.
  const bool millis = e.boolean("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS");
  if (millis && prometheus && !disabled) {
    e.refuse("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
             "--prometheus serves the gRPC decision time as ratekeeper_decision_duration_seconds{protocol=\"grpc\"}, "
             "in seconds only (there is no ratelimit_service_response_time_seconds to keep in milliseconds)");
  } else if (millis) {
    e.note("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS not used: Prometheus is not served (USE_PROMETHEUS is not true)");
  }
  if (e.given("PROMETHEUS_MAPPER_YAML")) {
    e.note(
        "PROMETHEUS_MAPPER_YAML not read: the series carry the names of upstream's default mapping "
        "(docs/envoy-gateway.md)");
  }
  if (disabled) {
    if (statsd || prometheus) e.note("DISABLE_STATS=true: neither statsd nor Prometheus is served (as upstream)");
    return;
  }
  if (statsd) {
    e.flag({"USE_STATSD", "STATSD_HOST", "STATSD_PORT"}, "--statsd", host + ":" + std::to_string(port));
    std::string t;
    for (const auto& [k, v] : tags) t += (t.empty() ? "" : ",") + k + ":" + v;
    if (!t.empty()) e.flag({"EXTRA_TAGS"}, "--statsd-tags", t);
    if (!flush.empty()) e.flag({"STATS_FLUSH_INTERVAL"}, "--stats-flush-interval", flush);
  }
  if (prometheus) {
    e.flag({"USE_PROMETHEUS", "PROMETHEUS_ADDR"}, "--prometheus", prom_addr);
    e.flag({"PROMETHEUS_PATH"}, "--prometheus-path", prom_path);
    // serve's admin listener (its own /metrics, the dashboard) defaults to 127.0.0.1:9090: out of the way.
    if (prom_addr.ends_with(":9090")) {
      e.flag({"USE_PROMETHEUS"}, "--admin", "127.0.0.1:9091");
      e.note("USE_PROMETHEUS on port 9090: serve's admin listener moves to 127.0.0.1:9091");
    }
  }
}

void tracing(Env& e) {
  const bool on = e.boolean("TRACING_ENABLED");
  const std::string name = e.text("TRACING_SERVICE_NAME");
  const std::string protocol = base::ascii_lower(e.text("TRACING_EXPORTER_PROTOCOL"));
  const double rate = e.number("TRACING_SAMPLING_RATE", 0, 1);
  std::string otlp;
  if (protocol == "http") otlp = "http/protobuf";
  else if (protocol == "grpc") otlp = "grpc";
  else e.bad("TRACING_EXPORTER_PROTOCOL", e.text("TRACING_EXPORTER_PROTOCOL"), "not http or grpc");
  for (const char* v : {"TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID"}) {
    if (e.given(v)) e.note(std::string(v) + " not sent: serve has no flag for it");
  }
  if (!on) return;
  // The OpenTelemetry SDK's own variables, which upstream's exporter reads.
  std::string endpoint = e.given("OTEL_EXPORTER_OTLP_ENDPOINT") ? e.text("OTEL_EXPORTER_OTLP_ENDPOINT") : "";
  if (endpoint.empty()) endpoint = otlp == "grpc" ? "http://localhost:4317" : "http://localhost:4318";
  if (endpoint.find("://") == std::string::npos) endpoint = "http://" + endpoint;
  e.flag({"TRACING_ENABLED"}, "--otlp-endpoint", endpoint);
  if (!otlp.empty()) e.flag({"TRACING_EXPORTER_PROTOCOL"}, "--otlp-protocol", otlp);
  if (e.given("OTEL_EXPORTER_OTLP_HEADERS")) {
    e.flag({"OTEL_EXPORTER_OTLP_HEADERS"}, "--otlp-headers", e.text("OTEL_EXPORTER_OTLP_HEADERS"));
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, rate);
  e.flag({"TRACING_SAMPLING_RATE"}, "--trace-sample-rate", std::string(buf, end));
  e.flag({"TRACING_SERVICE_NAME"}, "--service-name", name);
}

}  // namespace

std::span<const UpstreamVariable> upstream_variables() { return kVariables; }

bool parse_go_duration(std::string_view s, long long& nanoseconds) {
  if (s == "0") {
    nanoseconds = 0;
    return true;
  }
  if (s.empty()) return false;
  long double total = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == 0) return false;
    double n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + i, n);
    if (ec != std::errc{} || end != s.data() + i) return false;
    s.remove_prefix(i);
    long double unit = 0;
    for (const auto& [suffix, ns] :
         {std::pair{"ns", 1.0L}, std::pair{"us", 1e3L}, std::pair{"\xC2\xB5s", 1e3L}, std::pair{"ms", 1e6L},
          std::pair{"s", 1e9L}, std::pair{"m", 60e9L}, std::pair{"h", 3600e9L}}) {
      const std::string_view u(suffix);
      // The longest unit first where one is a prefix of another ("ms" before "m"): "ms" is listed before "m".
      if (s.starts_with(u) && !(u == "m" && s.starts_with("ms"))) {
        unit = ns;
        s.remove_prefix(u.size());
        break;
      }
    }
    if (unit == 0) return false;
    total += n * unit;
  }
  if (total > 9.2e18L) return false;
  nanoseconds = static_cast<long long>(std::llround(static_cast<double>(total)));
  return true;
}

UpstreamEnv translate_upstream_env(const std::map<std::string, std::string>& env,
                                   const std::function<bool(std::string_view flag)>& has_flag) {
  UpstreamEnv out;
  Env e(env, has_flag, out);
  listeners(e);
  logs(e);
  rules(e);
  store(e);
  stats(e);
  tracing(e);
  for (const std::string& name : e.unread()) {
    out.errors.push_back(name + ": read by upstream, but not by this translation (a bug: please report it)");
  }
  return out;
}

}  // namespace rk::cli
