// cli/serve/flags.h: what `ratekeeper serve` is told, by its command line and the settings files it names, and
// the one place each flag's name, default, help and check are written.
//
//   ServeFlags flags;
//   bool help = false;
//   for (const std::string& e : read_serve_flags(args, flags, help)) std::cerr << e << "\n";
//
// A settings file (--settings FILE, cli/serve/settings.h) gives the same flags without their dashes; its values
// are applied first, the command line's on top, so a flag given wins over the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/flag_set.h"
#include "logging/log.h"
#include "ratekeeper/units.h"
#include "rules/reloader.h"
#include "rules/xds/options.h"
#include "server/api/forward_auth.h"

namespace rk::cli::serve {

struct ServeFlags {
  std::vector<std::string> settings;  // --settings files, in the order given
  std::string config;
  std::string http = "127.0.0.1:8080";
  std::string admin = "127.0.0.1:9090";
  std::string grpc;  // empty: no gRPC listener
  bool grpc_headers = false;
  int threads = 2;
  std::size_t max_connections = 10000;
  bool max_connections_given = false;  // by a flag or a setting: past the descriptors there are, an error
  std::size_t grpc_max_connections = 10000;
  bool grpc_max_connections_given = false;
  std::size_t max_connections_per_ip = 256;
  std::vector<std::string> per_ip_exempt = {"127.0.0.0/8", "::1"};
  Nanos busy_idle_timeout = std::chrono::seconds(5);
  int grpc_max_message_bytes = 64 * 1024;
  int grpc_max_streams_per_connection = 256;
  int grpc_max_watch_streams = 1024;
  bool shadow_mode = false;
  bool merge_domains = false;
  bool skip_dotfiles = false;     // --config's directory: files named with a dot are not read (RUNTIME_IGNOREDOTFILES)
  double near_limit_ratio = 0.8;  // envoyproxy/ratelimit's NEAR_LIMIT_RATIO, for its per-descriptor counters
  std::size_t max_keys = 1'000'000;
  std::size_t max_memory = 0;  // bytes; 0: bounded by max_keys alone
  Nanos reload_interval = std::chrono::milliseconds(250);
  Nanos sweep_interval = std::chrono::seconds(10);
  std::string state_file;      // empty: the in-process store starts fresh at every start
  std::string state_key_file;  // the state file's HMAC-SHA256 key; empty: the file carries a CRC alone
  Nanos state_interval = std::chrono::seconds(30);
  // After SIGTERM or SIGINT: not ready, still answering, for `drain` (what a load balancer takes to stop sending:
  // Kubernetes' endpoints and the proxies that watch them, a few seconds); then stopped within `shutdown_grace` of
  // the signal, whatever is unfinished (docs/service.md, "Stopping").
  Nanos drain = std::chrono::seconds(5);
  Nanos shutdown_grace = std::chrono::seconds(25);
  Nanos header_timeout = std::chrono::seconds(10);
  std::string redis;  // empty: every domain in memory
  bool redis_local_clock = false;
  bool redis_near_cache = false;
  Nanos redis_timeout = std::chrono::milliseconds(100);
  int redis_connections = 2;
  Nanos redis_spin{0};  // 0: the Redis client's thread sleeps at once while it waits (docs/redis.md, "The client")
  std::uint32_t redis_packed_hashes = 0;  // 0: a Redis key per limited key (docs/redis.md, "Packed states")
  Nanos redis_batch_interval = std::chrono::milliseconds(20);  // sharing: batched (docs/redis.md)
  rules::FailurePolicy redis_failure = rules::FailurePolicy::kFailOpen;
  std::string redis_tls_ca, redis_tls_cert, redis_tls_key, redis_tls_server_name;  // for rediss URLs
  std::string redis_password_file;
  server::api::ForwardAuthOptions forward;  // --proxy, --ipv4-prefix, --ipv6-prefix (and the two path switches below)
  bool keep_path_params = false;
  bool path_case_insensitive = false;
  std::vector<std::string> admin_hosts;
  std::string tls_cert;  // with tls_key: every listener speaks TLS
  std::string tls_key;
  std::string tls_client_ca;  // and asks for client certificates issued by these CAs
  // The gRPC listener's own TLS (--grpc-tls-*): given, gRPC takes these and not --tls-*, which then apply to the
  // HTTP and admin listeners alone; so gRPC may speak mutual TLS while the probe port stays plain.
  std::string grpc_tls_cert, grpc_tls_key, grpc_tls_client_ca;
  std::string grpc_tls_client_san;           // a client certificate must carry this SAN (DNS, URI, IP or e-mail)
  Nanos grpc_max_connection_age{0};          // 0: none; else GOAWAY after it (±10% jitter, gRPC's own)
  Nanos grpc_max_connection_age_grace{0};    // 0: none; else calls still open that long after GOAWAY are cut
  std::string debug;                         // ADDR:PORT of the debug listener (/rlconfig, /stats); empty: none
  std::string admin_token_file;              // the admin listener's bearer token
  bool admin_allow_plaintext_token = false;  // the token may reach a non-loopback admin listener without TLS
  std::optional<logging::Level> log_level;   // set by the caller once every flag is read
  rules::xds::XdsOptions xds;        // --xds-*: rules from a control plane instead of --config (docs/envoy-gateway.md)
  bool ready_without_rules = false;  // ready before the first push (every request OK until rules arrive)
  // Statistics as envoyproxy/ratelimit sends them (docs/envoy-gateway.md, "Statistics").
  std::string statsd;       // host:port of a statsd daemon; empty: none sent
  std::string statsd_tags;  // "k:v,k2:v2" (EXTRA_TAGS), checked when read
  Nanos stats_flush_interval = std::chrono::seconds(10);
  bool stats_flush_interval_given = false;
  std::string prometheus;  // ADDR:PORT of a listener serving the metrics alone; empty: none
  std::string prometheus_path = "/metrics";
  bool grpc_metadata = false;  // RateLimitResponse.dynamic_metadata as upstream's RESPONSE_DYNAMIC_METADATA
  logging::Format log_format = logging::Format::kJson;
  std::string access_log;  // a file, or "-" for stdout; empty: no access log
  // Traces (cli/serve/telemetry.h; OTEL_* variables under these): no endpoint, no tracing.
  std::string otlp_endpoint;
  bool otlp_endpoint_exact = false;  // used as given (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): no /v1/traces added
  std::string otlp_protocol = "http/protobuf";
  std::vector<std::pair<std::string, std::string>> otlp_headers;
  double trace_sample_rate = 1.0;
  std::string service_name = "ratekeeper";
};

// What --shutdown-grace must leave after --drain: requests in flight finish, the state file is saved, the process
// exits.
inline constexpr Nanos kAfterDrain = std::chrono::seconds(2);

// `serve --help`'s first lines.
extern const char* const kServeUsage;

// Adds `serve`'s flags, bound to `f`; --settings too when `with_settings` (a settings file names none).
void add_serve_flags(cli::FlagSet& flags, ServeFlags& f, bool with_settings = true);

// The command line over the settings files it names, into `f`. Returns every problem, each a line for stderr
// ("--threads: '0' is not a whole number from 1 to 64", "settings.yaml:2:1: unknown setting 'colour'"); `help` is
// set, and nothing read, when --help is asked for. --config may still be empty: the caller decides.
std::vector<std::string> read_serve_flags(const std::vector<std::string>& args, ServeFlags& f, bool& help);

// `serve --help`.
std::string serve_help();

// Whether `serve` has the flag ("--statsd"): the build's, as `ratelimit`'s environment is translated into them.
bool is_serve_flag(std::string_view flag);

}  // namespace rk::cli::serve
