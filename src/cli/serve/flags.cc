// cli/serve/flags.cc: serve's flags (name, default, help, check), and the command line read over the settings.
#include "cli/serve/flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "metrics/statsd.h"
#include "server/http/server.h"
#include "cli/serve/settings.h"
#include "cli/serve/state_file.h"
#include "cli/serve/telemetry.h"
#include "store/redis/remote.h"

namespace rk::cli::serve {

const char* const kServeUsage = "usage: ratekeeper serve (--config PATH | --xds-server HOST:PORT) [flags]\n";

namespace {

using cli::is_not;
using cli::Reader;
using cli::text;
using cli::whole_number;

// "536870912", "512MiB", "2GiB", "64KiB": bytes, at most 2^50.
std::optional<std::size_t> parse_bytes(std::string_view s) {
  std::size_t n = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || p == s.data()) return std::nullopt;
  const std::string_view unit(p, static_cast<std::size_t>(s.data() + s.size() - p));
  unsigned shift = 0;
  if (unit == "KiB") shift = 10;
  else if (unit == "MiB") shift = 20;
  else if (unit == "GiB") shift = 30;
  else if (!unit.empty()) return std::nullopt;
  if (n > (std::size_t{1} << (50 - shift))) return std::nullopt;
  return n << shift;
}

// A duration from lo to hi, or says `what` it must be ("a duration from 1ms to 60s").
Reader duration(Nanos& out, Nanos lo, Nanos hi, std::string what) {
  return [&out, lo, hi, what](const std::string& v) {
    const auto d = parse_duration(v);
    if (!d || *d < lo || *d > hi) return is_not(v, what);
    out = *d;
    return std::string();
  };
}

// "a,b,c" as a list; the last flag given wins, as for every flag.
std::vector<std::string> split_commas(const std::string& value) {
  std::vector<std::string> list;
  for (std::size_t at = 0; at <= value.size();) {
    const std::size_t comma = std::min(value.find(',', at), value.size());
    list.push_back(value.substr(at, comma - at));
    at = comma + 1;
  }
  return list;
}

Reader per_ip_exempt(std::vector<std::string>& out) {
  return [&out](const std::string& v) {
    std::vector<std::string> list = split_commas(v);
    try {
      server::http::check_per_ip_exempt(list);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).substr(std::string_view(e.what()).find('\''));
    }
    out = std::move(list);
    return std::string();
  };
}

// `read`, and `given` set once it has stored a value.
Reader given(bool& given, Reader read) {
  return [&given, read = std::move(read)](const std::string& v) {
    std::string problem = read(v);
    if (problem.empty()) given = true;
    return problem;
  };
}

Reader admin_hosts(std::vector<std::string>& out) {
  return [&out](const std::string& v) {
    std::vector<std::string> list = split_commas(v);
    for (const std::string& host : list) {
      if (host.empty() || host.find_first_of(" \t:/[]") != std::string::npos) {
        return is_not(host, "a host name (names without port, comma-separated)");
      }
    }
    out = std::move(list);
    return std::string();
  };
}

void add_listener_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--config", "PATH", "a rules file, or a directory of them (reloaded live)", text(f.config));
  flags.value("--http", "ADDR:PORT", "decision API and forward-auth (default 127.0.0.1:8080)", text(f.http));
  flags.value("--admin", "ADDR:PORT",
              "metrics, rules, admin API (default 127.0.0.1:9090,\nalso Prometheus's default port: move one of them)",
              text(f.admin));
  flags.value("--grpc", "ADDR:PORT", "Envoy's rate-limit gRPC API and gRPC health (off unless given)", text(f.grpc));
  flags.value("--debug", "ADDR:PORT",
              "envoyproxy/ratelimit's debug listener: /rlconfig (the rules in its format) and\n"
              "/stats (its counters as 'name: value' lines); off unless given",
              text(f.debug));
  flags.toggle("--grpc-response-headers", "add the RateLimit header fields to gRPC answers", f.grpc_headers);
  flags.value("--threads", "N", "HTTP threads per listener (default 2)", whole_number(f.threads, 1, 64));
  flags.value("--header-timeout", "DUR", "a request's head must arrive within this (default 10s)",
              duration(f.header_timeout, std::chrono::milliseconds(10), Nanos::max(), "a duration of at least 10ms"));
  flags.value("--admin-hosts", "NAMES",
              "host names (comma-separated) the admin listener answers to, besides IP\n"
              "addresses and localhost names",
              admin_hosts(f.admin_hosts));
}

// The files are read, and their combination checked, by check_security_flags() (listeners.h) once every flag is in.
void add_security_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--tls-cert", "FILE",
              "serve HTTPS, gRPC over TLS and the admin listener over HTTPS with this PEM\n"
              "certificate chain (with --tls-key; a rotated file is picked up by new connections)",
              text(f.tls_cert));
  flags.value("--tls-key", "FILE", "the private key of --tls-cert (PEM, unencrypted)", text(f.tls_key));
  flags.value("--tls-client-ca", "FILE", "require client certificates issued by these CAs (PEM; mutual TLS)",
              text(f.tls_client_ca));
  flags.value("--grpc-tls-cert", "FILE",
              "the gRPC listener's own certificate chain (PEM, with --grpc-tls-key): gRPC\n"
              "speaks TLS with it, and --tls-cert is the HTTP and admin listeners' alone",
              text(f.grpc_tls_cert));
  flags.value("--grpc-tls-key", "FILE", "the private key of --grpc-tls-cert (PEM, unencrypted)", text(f.grpc_tls_key));
  flags.value("--grpc-tls-client-ca", "FILE",
              "gRPC requires client certificates issued by these CAs (PEM; mutual TLS;\n"
              "with --grpc-tls-cert)",
              text(f.grpc_tls_client_ca));
  flags.value("--grpc-tls-client-san", "NAME",
              "gRPC refuses a client certificate without this subject alternative name\n"
              "(DNS, URI, IP or e-mail; needs a client CA)",
              text(f.grpc_tls_client_san));
  flags.value("--admin-token-file", "FILE",
              "admin requests but /healthz and /readyz need 'Authorization: Bearer <the token\n"
              "in FILE>' (at least 16 bytes); required for an --admin address that is not loopback",
              text(f.admin_token_file));
  flags.toggle("--admin-allow-plaintext-token",
               "let the token reach an --admin address that is not loopback without\n"
               "--tls-cert (something in between encrypts it)",
               f.admin_allow_plaintext_token);
}

void add_connection_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--max-connections", "N",
              "HTTP connections at once (default 10000, or fewer if the open files limit\n"
              "is lower: docs/security.md)",
              given(f.max_connections_given, whole_number(f.max_connections, 1, 1'000'000)));
  flags.value("--max-connections-per-ip", "N",
              "of those (and of gRPC's), from one IPv4 address or IPv6 /64 (default 256;\n0: no limit)",
              whole_number(f.max_connections_per_ip, 0, 1'000'000));
  flags.value("--per-ip-exempt", "LIST",
              "addresses or CIDR ranges of proxies in front, which only --max-connections\n"
              "(--grpc-max-connections) bounds (default 127.0.0.0/8,::1)",
              per_ip_exempt(f.per_ip_exempt));
  flags.value("--busy-idle-timeout", "DUR",
              "idle connections are closed after this from 3/4 of a listener's cap on\n(default 5s)",
              duration(f.busy_idle_timeout, std::chrono::milliseconds(100), std::chrono::hours(1),
                       "a duration from 100ms to 1h"));
  flags.value("--grpc-max-connections", "N",
              "gRPC connections at once (default 10000, or fewer if the open files limit\n"
              "is lower)",
              given(f.grpc_max_connections_given, whole_number(f.grpc_max_connections, 1, 1'000'000)));
  flags.value("--grpc-max-connection-age", "DUR",
              "gRPC: a connection older than this (±10% jitter) is sent GOAWAY, so that\n"
              "clients spread over servers added later (default: none)",
              duration(f.grpc_max_connection_age, std::chrono::milliseconds(100), std::chrono::hours(24 * 365),
                       "a duration from 100ms to 365d"));
  flags.value("--grpc-max-connection-age-grace", "DUR",
              "gRPC: calls still open this long after that GOAWAY are cut (default: none,\n"
              "they finish)",
              duration(f.grpc_max_connection_age_grace, std::chrono::milliseconds(1), std::chrono::hours(24 * 365),
                       "a duration from 1ms to 365d"));
  flags.value("--grpc-max-message-bytes", "N", "gRPC: a larger request is refused (default 65536)",
              whole_number(f.grpc_max_message_bytes, 1024, 64 << 20));
  flags.value("--grpc-max-streams-per-connection", "N", "gRPC: streams at once on one connection (default 256)",
              whole_number(f.grpc_max_streams_per_connection, 1, 65536));
  flags.value("--grpc-max-watch-streams", "N", "gRPC: health Watch streams at once (default 1024)",
              whole_number(f.grpc_max_watch_streams, 1, 1'000'000));
}

void add_rule_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.toggle("--shadow-mode", "count everything, refuse nothing", f.shadow_mode);
  flags.toggle("--merge-domains",
               "the files of one domain make one domain (envoyproxy/ratelimit's\nMERGE_DOMAIN_CONFIG)",
               f.merge_domains);
  flags.toggle("--skip-dotfiles",
               "--config's directory: files whose names start with a dot are not read\n"
               "(envoyproxy/ratelimit's RUNTIME_IGNOREDOTFILES)",
               f.skip_dotfiles);
  flags.value("--near-limit-ratio", "R",
              "the share of a limit past which hits count as near_limit in envoyproxy/ratelimit's\n"
              "per-descriptor counters (NEAR_LIMIT_RATIO; default 0.8)",
              [&f](const std::string& v) {
                double r = -1;
                const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), r);
                if (ec != std::errc{} || end != v.data() + v.size() || !(r >= 0 && r <= 1)) {
                  return is_not(v, "a number from 0 to 1");
                }
                f.near_limit_ratio = r;
                return std::string();
              });
  flags.value("--max-keys", "N", "keys tracked per rule before CLOCK eviction (default 1000000)",
              whole_number(f.max_keys, 1, 1ull << 40));
  flags.value("--max-memory", "BYTES",
              "the stores' budget (e.g. 512MiB): 7/8 shared equally by the rules (6/8 and\n"
              "1/8 for batched domains' keys with --redis), 1/8 by request overrides; each\n"
              "store holds fewer keys if its share needs it (default: none)",
              [&f](const std::string& v) {
                const auto bytes = parse_bytes(v);
                if (!bytes || *bytes < (1u << 20)) {
                  return is_not(v, "a size of at least 1MiB (a number of bytes, or with KiB, MiB, GiB)");
                }
                f.max_memory = *bytes;
                return std::string();
              });
  flags.value("--reload-interval", "DUR", "how often the rules are checked for changes (default 250ms)",
              duration(f.reload_interval, std::chrono::milliseconds(10), Nanos::max(), "a duration of at least 10ms"));
  flags.value("--state-file", "PATH",
              "keep the in-process store's keys across restarts: restored at start,\n"
              "saved every --state-interval and at shutdown (default: none)",
              [&f](const std::string& v) {
                if (std::string e = check_state_path(v); !e.empty()) return e;
                f.state_file = v;
                return std::string();
              });
  flags.value("--state-file-key-file", "FILE",
              "a secret of at least 32 bytes: --state-file is written with an HMAC-SHA256\n"
              "under it, and read only with that MAC (default: none; a CRC alone)",
              text(f.state_key_file));
  flags.value("--state-interval", "DUR", "how often --state-file is saved (default 30s)",
              duration(f.state_interval, std::chrono::seconds(1), std::chrono::hours(24), "a duration from 1s to 24h"));
  flags.value("--drain", "DUR",
              "after SIGTERM or SIGINT, report not ready and keep answering this long\n"
              "before stopping; a second signal ends it (default 5s; 0s: stop at once)",
              duration(f.drain, Nanos{0}, std::chrono::minutes(10), "a duration from 0s to 10m"));
  flags.value(
      "--shutdown-grace", "DUR",
      "exit within this long of SIGTERM or SIGINT, the drain included; at least\n"
      "--drain + 2s (default 25s: under Kubernetes' 30s terminationGracePeriodSeconds)",
      duration(f.shutdown_grace, std::chrono::seconds(2), std::chrono::minutes(15), "a duration from 2s to 15m"));
}

void add_redis_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--redis", "URL",
              "share limits through Redis: redis://[user:pass@]host:port[/db],\n"
              "redis+cluster://h1:p1,h2:p2, redis+sentinel://h:p/primary; rediss for TLS\n"
              "(default: in memory)",
              text(f.redis));
  flags.value("--redis-clock", "SOURCE", "redis (default: Redis's own TIME) or local (this server's clock)",
              [&f](const std::string& v) {
                if (v != "redis" && v != "local") return is_not(v, "redis or local");
                f.redis_local_clock = v == "local";
                return std::string();
              });
  flags.value(
      "--redis-timeout", "DUR", "per command; past it the domain's failure policy decides (default 100ms)",
      duration(f.redis_timeout, std::chrono::milliseconds(1), std::chrono::seconds(60), "a duration from 1ms to 60s"));
  flags.value("--redis-connections", "N", "connections per Redis node (default 2)",
              whole_number(f.redis_connections, 1, 64));
  flags.value("--redis-spin", "DUR",
              "while decisions await Redis's answers, poll for them this long before\n"
              "sleeping: less latency, more CPU (0 to 1ms; default 0, off)",
              duration(f.redis_spin, Nanos{0}, std::chrono::milliseconds(1), "a duration from 0 to 1ms"));
  flags.value("--redis-failure", "POLICY", "fail_open (default), fail_closed or local, for domains that name none",
              [&f](const std::string& v) {
                const auto p = rules::parse_failure_policy(v);
                if (!p) return is_not(v, "fail_open, fail_closed or local");
                f.redis_failure = *p;
                return std::string();
              });
  flags.value("--redis-batch-interval", "DUR",
              "how often `sharing: batched` domains send their hits to Redis (default 20ms)",
              duration(f.redis_batch_interval, std::chrono::milliseconds(1), std::chrono::seconds(10),
                       "a duration from 1ms to 10s"));
  flags.value("--redis-packed-hashes", "N",
              "pack limited keys' states into N Redis hashes, each holding up to 64\n"
              "(default 0: a Redis key per limited key; docs/redis.md, \"Packed states\")",
              whole_number(f.redis_packed_hashes, 0, store::redis::kMaxPackedHashes));
  flags.toggle("--redis-near-cache", "answer keys Redis refused until a known time here, without a round trip",
               f.redis_near_cache);
  // TLS and secrets (docs/redis.md): the files are read, and their combinations checked, when Redis is connected.
  flags.value("--redis-tls-ca", "FILE",
              "rediss: the CA certificates (PEM) Redis's certificate must chain to\n(default: the system's)",
              text(f.redis_tls_ca));
  flags.value("--redis-tls-cert", "FILE", "rediss: this server's client certificate (PEM), for mutual TLS",
              text(f.redis_tls_cert));
  flags.value("--redis-tls-key", "FILE", "rediss: its private key (PEM)", text(f.redis_tls_key));
  flags.value("--redis-tls-server-name", "NAME",
              "rediss: the name Redis's certificate must carry (default: the host in the URL)",
              text(f.redis_tls_server_name));
  flags.value("--redis-password-file", "FILE",
              "Redis's password (or the ACL user's, with the URL's user) from this file,\n"
              "read again when it changes; wins over a password in the URL",
              text(f.redis_password_file));
}

void add_forward_auth_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--proxy", "KIND",
              "who calls /v1/auth: none (default: no header believed), nginx, traefik,\n"
              "caddy or envoy; only that proxy's headers, from a trusted proxy, are read",
              [&f](const std::string& v) {
                const auto kind = server::api::parse_proxy_kind(v);
                if (!kind) return is_not(v, "none, nginx, traefik, caddy or envoy");
                f.forward.proxy = *kind;
                return std::string();
              });
  flags.value("--ipv4-prefix", "N", "forward-auth keys IPv4 clients by their /N (default 32)",
              whole_number(f.forward.prefixes.ipv4, 1, 32, "a prefix length"));
  flags.value("--ipv6-prefix", "N", "forward-auth keys IPv6 clients by their /N (default 64)",
              whole_number(f.forward.prefixes.ipv6, 1, 128, "a prefix length"));
  flags.toggle("--keep-path-params", "keep ';' parameters in forward-auth paths (default: /a;x=1 is /a)",
               f.keep_path_params);
  flags.toggle("--path-case-insensitive", "fold forward-auth paths to lower case (for case-insensitive backends)",
               f.path_case_insensitive);
}

// A number from 0 to 1.
Reader fraction(double& out) {
  return [&out](const std::string& v) {
    double r = -1;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), r);
    if (ec != std::errc{} || end != v.data() + v.size() || !(r >= 0 && r <= 1)) {
      return is_not(v, "a number from 0 to 1");
    }
    out = r;
    return std::string();
  };
}

// Rules over xDS (docs/envoy-gateway.md): envoyproxy/ratelimit's CONFIG_GRPC_XDS_* and XDS_CLIENT_BACKOFF_*.
void add_xds_flags(cli::FlagSet& flags, ServeFlags& f) {
  rules::xds::XdsOptions& x = f.xds;
  flags.value("--xds-server", "HOST:PORT",
              "take the rules from this xDS control plane (ADS, State of the World)\ninstead of --config",
              text(x.server));
  flags.value("--xds-node-id", "ID", "the node id sent to the control plane (default: default)", text(x.node_id));
  flags.value("--xds-node-metadata", "JSON", "the node's metadata, a JSON object", text(x.node_metadata));
  flags.value("--xds-headers", "K=V,..", "gRPC metadata sent on the xDS stream", [&x](const std::string& v) {
    std::vector<std::pair<std::string, std::string>> headers;
    for (const std::string& item : split_commas(v)) {
      const std::size_t eq = item.find('=');
      std::string key = item.substr(0, eq);
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool key_ok = !key.empty() &&
                          key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") == std::string::npos;
      const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
      const bool value_ok = std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
      if (eq == std::string::npos || !key_ok || !value_ok) {
        return is_not(item, "a header name=value (a name of letters, digits, '-', '_', '.'; a printable value)");
      }
      headers.emplace_back(std::move(key), value);
    }
    x.headers = std::move(headers);
    return std::string();
  });
  flags.toggle("--xds-tls", "TLS to the control plane (with the system's CAs unless --xds-tls-ca)", x.tls);
  flags.value("--xds-tls-ca", "FILE", "the CAs (PEM) the control plane's certificate must chain to (implies TLS)",
              text(x.tls_ca));
  flags.value("--xds-tls-cert", "FILE", "this server's client certificate (PEM) for mutual TLS (implies TLS)",
              text(x.tls_cert));
  flags.value("--xds-tls-key", "FILE", "its private key (PEM)", text(x.tls_key));
  flags.value("--xds-tls-san", "NAME",
              "the name the control plane's certificate must carry (default: the host of\n--xds-server)",
              text(x.tls_san));
  const auto at_least_1ms = [](Nanos& out) {
    return duration(out, std::chrono::milliseconds(1), std::chrono::hours(24), "a duration from 1ms to 24h");
  };
  flags.value("--xds-retry-interval", "DUR", "reopen a stream that ended after this (default 3s)",
              at_least_1ms(x.retry_interval));
  flags.value("--xds-backoff-initial", "DUR", "after a failed connection attempt, wait this (default 10s)",
              at_least_1ms(x.backoff_initial));
  flags.value("--xds-backoff-max", "DUR", "doubling with each failure up to this (default 60s)",
              at_least_1ms(x.backoff_max));
  flags.value("--xds-backoff-random-factor", "F", "each wait spread by +-F of itself (0 to 1; default 0.5)",
              fraction(x.backoff_random_factor));
  flags.value("--xds-backoff-jitter", "on|off", "spread the waits (default on)", [&x](const std::string& v) {
    if (v != "on" && v != "off") return is_not(v, "on or off");
    x.backoff_jitter = v == "on";
    return std::string();
  });
  flags.toggle("--ready-without-rules",
               "report ready before the control plane's first push (until then every\nrequest is OK)",
               f.ready_without_rules);
}

void add_stats_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--statsd", "HOST:PORT",
              "send envoyproxy/ratelimit's statistics to this statsd daemon over UDP\n(default: none)",
              [&f](const std::string& v) {
                std::string host;
                std::uint16_t port = 0;
                if (!metrics::statsd::split_host_port(v, host, port)) {
                  return is_not(v, "HOST:PORT (a port from 1 to 65535; [v6]:PORT)");
                }
                f.statsd = v;
                return std::string();
              });
  flags.value("--statsd-tags", "TAGS", "tags on every statsd name: \"k1:v1,k2:v2\" (EXTRA_TAGS; default: none)",
              [&f](const std::string& v) {
                std::string error;
                if (!metrics::statsd::parse_tags(v, error)) return is_not(v, "k1:v1,k2:v2 (" + error + ")");
                f.statsd_tags = v;
                return std::string();
              });
  flags.value("--stats-flush-interval", "DUR", "how often --statsd is sent (default 10s)",
              given(f.stats_flush_interval_given, duration(f.stats_flush_interval, std::chrono::milliseconds(10),
                                                           std::chrono::hours(1), "a duration from 10ms to 1h")));
  flags.value("--prometheus", "ADDR:PORT",
              "also serve the metrics, and nothing else, on this plain HTTP listener\n"
              "(USE_PROMETHEUS; no token asked; default: none)",
              text(f.prometheus));
  flags.value("--prometheus-path", "PATH", "the path --prometheus serves them at (default /metrics)",
              [&f](const std::string& v) {
                if (v.empty() || v.front() != '/' || v.find_first_of("?# \t") != std::string::npos) {
                  return is_not(v, "a path starting with '/'");
                }
                f.prometheus_path = v;
                return std::string();
              });
  flags.toggle("--grpc-response-metadata",
               "put the domain, descriptors and hits of each request in gRPC answers'\n"
               "dynamic_metadata (RESPONSE_DYNAMIC_METADATA)",
               f.grpc_metadata);
}

void add_telemetry_flags(cli::FlagSet& flags, ServeFlags& f) {
  flags.value("--log-format", "FORMAT", "json (default: one JSON object a line) or text (key=value)",
              [&f](const std::string& v) {
                if (!logging::parse_log_format(v, f.log_format)) return is_not(v, "json or text");
                return std::string();
              });
  flags.value("--access-log", "FILE",
              "a JSON line per decision, appended to FILE (- for stdout);\n"
              "at most 1000 lines a second, the rest counted",
              text(f.access_log));
  flags.value("--otlp-endpoint", "URL",
              "send a span per sampled decision to this OpenTelemetry collector\n"
              "(http/protobuf: http://host:4318, /v1/traces added when no path is given;\n"
              "grpc: host:4317, http://host:4317 or https://host:4317)",
              [&f](const std::string& v) {
                f.otlp_endpoint = v;
                f.otlp_endpoint_exact = false;
                return std::string();
              });
  flags.value("--otlp-protocol", "PROTOCOL", "http/protobuf (default) or grpc", [&f](const std::string& v) {
    if (v != "http/protobuf" && v != "grpc") return is_not(v, "http/protobuf or grpc");
    f.otlp_protocol = v;
    return std::string();
  });
  flags.value("--otlp-headers", "K=V,..", "headers sent with every export (an API key, say)",
              [&f](const std::string& v) {
                std::vector<std::pair<std::string, std::string>> headers;
                if (!parse_otlp_headers(v, false, headers)) return is_not(v, "key=value pairs separated by commas");
                f.otlp_headers = std::move(headers);
                return std::string();
              });
  flags.value("--trace-sample-rate", "F",
              "the share of decisions traced whose caller did not decide (0 to 1; default 1);\n"
              "a caller's traceparent or b3 sampling decision is always followed",
              fraction(f.trace_sample_rate));
  flags.value("--service-name", "NAME", "the service.name of exported spans (default ratekeeper)",
              [&f](const std::string& v) {
                if (v.empty()) return is_not(v, "a name");
                f.service_name = v;
                return std::string();
              });
}

}  // namespace

void add_serve_flags(cli::FlagSet& flags, ServeFlags& f, bool with_settings) {
  if (with_settings) {
    flags.value("--settings", "FILE",
                "a YAML mapping of these flags without their dashes (redis: URL, ...);\n"
                "flags given on the command line win over the file",
                cli::text_list(f.settings));
  }
  add_listener_flags(flags, f);
  add_security_flags(flags, f);
  add_connection_flags(flags, f);
  add_rule_flags(flags, f);
  add_redis_flags(flags, f);
  add_forward_auth_flags(flags, f);
  add_xds_flags(flags, f);
  add_stats_flags(flags, f);
  add_telemetry_flags(flags, f);
  flags.value("--log-level", "LEVEL", "debug, info (default) or error", [&f](const std::string& v) {
    logging::Level l;
    if (!logging::parse_log_level(v, l)) return is_not(v, "debug, info or error");
    f.log_level = l;
    return std::string();
  });
}

std::vector<std::string> read_serve_flags(const std::vector<std::string>& args, ServeFlags& f, bool& help) {
  // First the command line alone: its problems, and which settings files it names.
  ServeFlags given;
  cli::FlagSet command_line(kServeUsage);
  add_serve_flags(command_line, given);
  const cli::Parsed parsed = command_line.parse(args);
  help = parsed.help;
  std::vector<std::string> errors;
  for (const cli::FlagProblem& p : parsed.problems) errors.push_back(p.to_string());
  if (help || !errors.empty()) return errors;
  // Then the OTEL_* variables, the files, in order, and the command line again on top of them: a flag given wins
  // over a setting, and a setting over a variable.
  for (std::string& e : read_otel_environment(f, std::getenv)) errors.push_back(std::move(e));
  if (!errors.empty()) return errors;
  for (const std::string& file : given.settings) {
    for (std::string& e : apply_settings(file, f)) errors.push_back(std::move(e));
  }
  if (!errors.empty()) return errors;
  cli::FlagSet on_top(kServeUsage);
  add_serve_flags(on_top, f);
  on_top.parse(args);
  // Requests in flight, the last state save and the exit need time after the drain, within the grace.
  if (f.shutdown_grace < f.drain + kAfterDrain) {
    errors.push_back("--shutdown-grace: " + format_seconds(f.shutdown_grace) + "s is less than --drain (" +
                     format_seconds(f.drain) + "s) + " + format_seconds(kAfterDrain) +
                     "s: requests in flight, the state file and the exit need time after the drain");
  }
  return errors;
}

bool is_serve_flag(std::string_view flag) {
  ServeFlags ignored;
  cli::FlagSet flags(kServeUsage);
  add_serve_flags(flags, ignored);
  return flags.has(std::string(flag));
}

std::string serve_help() {
  ServeFlags ignored;
  cli::FlagSet flags(kServeUsage);
  add_serve_flags(flags, ignored);
  return flags.help();
}

}  // namespace rk::cli::serve
