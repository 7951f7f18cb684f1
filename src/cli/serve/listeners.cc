// cli/serve/listeners.cc: serve's listeners, from flags to started servers, and their one log line; the TLS and
// admin token files read and checked; rotated TLS files picked up.
#include "cli/serve/listeners.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>

#include "base/secret_file.h"
#include "logging/log.h"
#include "metrics/envoy/rlconfig.h"
#include "server/tls/tls_files.h"
#ifdef RK_HAVE_GRPC
#include "server/grpc/rls_server.h"
#endif

namespace rk::cli::serve {

namespace {

bool split_address(const std::string& s, std::string& host, std::uint16_t& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned v = 0;
  const char* b = s.data() + colon + 1;
  const char* e = s.data() + s.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc{} || p != e || v > 65535 || b == e) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

bool loopback(const std::string& address) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
  return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
}

// The flags naming one listener's TLS files: --tls-* (every listener's) or --grpc-tls-* (gRPC's own).
struct TlsFlags {
  const char *cert, *key, *client_ca;
};
constexpr TlsFlags kSharedTls{"--tls-cert", "--tls-key", "--tls-client-ca"};
constexpr TlsFlags kGrpcTls{"--grpc-tls-cert", "--grpc-tls-key", "--grpc-tls-client-ca"};

const char* flag_of(server::http::TlsFileError::Which which, const TlsFlags& names = kSharedTls) {
  switch (which) {
    case server::http::TlsFileError::Which::kCert: return names.cert;
    case server::http::TlsFileError::Which::kKey: return names.key;
    case server::http::TlsFileError::Which::kClientCa: return names.client_ca;
  }
  return names.cert;
}

// A certificate, its key and client CAs, together and read: a listener must not start on half of them.
bool tls_files(const std::string& cert, const std::string& key, const std::string& client_ca, const TlsFlags& names,
               std::optional<server::http::TlsFiles>& tls, std::string& error) {
  if (cert.empty() && key.empty()) {
    if (!client_ca.empty()) {
      error = std::string(names.client_ca) + " " + client_ca + ": needs " + names.cert + " and " + names.key +
              " (client certificates are asked for over TLS)";
    }
    return client_ca.empty();
  }
  if (cert.empty() || key.empty()) {
    error = cert.empty() ? std::string(names.key) + " " + key + ": needs " + names.cert +
                               ", the certificate it is "
                               "the key of"
                         : std::string(names.cert) + " " + cert + ": needs " + names.key + ", its private key";
    return false;
  }
  server::http::TlsFiles files{.cert = cert, .key = key, .client_ca = client_ca};
  try {
    server::http::check_tls_files(files);
  } catch (const server::http::TlsFileError& e) {
    error = std::string(flag_of(e.which, names)) + " " + e.what();
    return false;
  }
  tls = std::move(files);
  return true;
}

// --tls-cert, --tls-key and --tls-client-ca: every listener's, gRPC's too unless it has its own.
bool tls_files(const ServeFlags& flags, std::optional<server::http::TlsFiles>& tls, std::string& error) {
  return tls_files(flags.tls_cert, flags.tls_key, flags.tls_client_ca, kSharedTls, tls, error);
}

// --grpc-tls-*: the gRPC listener's own files, and the SAN its clients' certificates must carry.
bool grpc_tls_files(const ServeFlags& flags, std::optional<server::http::TlsFiles>& tls, std::string& error) {
  const bool any = !flags.grpc_tls_cert.empty() || !flags.grpc_tls_key.empty() || !flags.grpc_tls_client_ca.empty() ||
                   !flags.grpc_tls_client_san.empty();
  if (any && flags.grpc.empty()) {
    error = "--grpc-tls-cert, --grpc-tls-key, --grpc-tls-client-ca and --grpc-tls-client-san need --grpc";
    return false;
  }
  if (!tls_files(flags.grpc_tls_cert, flags.grpc_tls_key, flags.grpc_tls_client_ca, kGrpcTls, tls, error)) {
    return false;
  }
  if (!flags.grpc_tls_client_san.empty() && flags.grpc_tls_client_ca.empty()) {
    error = "--grpc-tls-client-san " + flags.grpc_tls_client_san + ": needs --grpc-tls-client-ca (a client " +
            "certificate's names are checked once it is verified)";
    return false;
  }
  return true;
}

// The token of --admin-token-file (base/secret_file.h: read again when the file is rotated). Without one, the admin
// listener must be loopback: its API resets limits and shows the rules and who is being limited. With one, off
// loopback, it must speak TLS unless told otherwise: every request carries the token.
bool admin_token(const ServeFlags& flags, const ListenerOptions& options, std::shared_ptr<base::SecretFile>& token,
                 std::string& error) {
  const std::string& file = flags.admin_token_file;
  const bool local = loopback(options.admin_http.address);
  if (file.empty()) {
    if (local) return true;
    error = "--admin " + flags.admin + ": not a loopback address, and the admin API resets limits: give " +
            "--admin-token-file FILE too (docs/service.md)";
    return false;
  }
  if (!local && !options.admin_http.tls && !flags.admin_allow_plaintext_token) {
    error = "--admin " + flags.admin + ": not a loopback address, and without --tls-cert the admin token would " +
            "cross the network in clear text: give --tls-cert and --tls-key, or --admin-allow-plaintext-token " +
            "when something in between encrypts it (docs/service.md)";
    return false;
  }
  try {
    token = std::make_shared<base::SecretFile>("--admin-token-file", file, base::SecretFile::kVisibleAscii,
                                               server::api::kMinAdminTokenBytes, [](const std::string& message) {
                                                 logging::log(logging::Level::kError,
                                                              "admin token file not reloaded; keeping the token in use",
                                                              {{"error", message}});
                                               });
  } catch (const std::invalid_argument& e) {
    error = e.what();
    return false;
  }
  return true;
}

std::string stamps(const server::http::TlsFiles& files) {
  return base::file_stamp(files.cert) + "|" + base::file_stamp(files.key) + "|" + base::file_stamp(files.client_ca);
}

std::shared_ptr<server::api::AdminAuth> admin_auth(const ListenerOptions& options) {
  if (!options.admin_token) return nullptr;
  return std::make_shared<server::api::AdminAuth>(
      options.admin_token, server::api::AdminAuthOptions{.secure_cookie = options.admin_http.tls.has_value()});
}

server::http::ServerEvents http_events(ServeMetrics& metrics) {
  server::http::ServerEvents events;
  events.on_bad_request = [&metrics](std::string_view reason) { metrics.bad_request("http", reason); };
  events.on_connection = [&metrics](int delta) { metrics.connections(delta); };
  events.on_handler_error = [&metrics](std::string_view what) {
    metrics.bad_request("http", "handler_error");
    logging::log(logging::Level::kError, "request handler failed; answered 500", {{"error", std::string(what)}});
  };
  return events;
}

// The admin listener counts failed TLS handshakes (someone cannot reach it) and its handler's failures; its other
// refusals are an operator's own tools being turned away, not traffic.
server::http::ServerEvents admin_events(ServeMetrics& metrics, const server::http::ServerEvents& public_events) {
  server::http::ServerEvents events{.on_handler_error = public_events.on_handler_error};
  events.on_bad_request = [&metrics](std::string_view reason) {
    if (reason == "tls_handshake") metrics.bad_request("admin", reason);
  };
  return events;
}

constexpr std::size_t kDebugMaxConnections = 16;

// envoyproxy/ratelimit's debug listener, what of it users read: / (the endpoints), /rlconfig, /stats. Plain text,
// GET only; it shows no secret, but the rules and counters: loopback unless told otherwise.
server::http::Handler debug_routes(service::Service& service, ServeMetrics& metrics) {
  return [&service, &metrics](const server::http::Request& req, server::http::Response& res) {
    res.content_type = "text/plain; charset=utf-8";
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.headers.emplace_back("Allow", "GET, HEAD");
      res.body = "GET only\n";
      return;
    }
    if (req.path == "/rlconfig") {
      if (const auto set = service.rules()) res.body = metrics::envoy::rlconfig_text(*set);
    } else if (req.path == "/stats") {
      res.body = metrics.upstream_stats_text();
    } else if (req.path == "/") {
      res.body =
          "/rlconfig: print out the currently loaded configuration for debugging\n"
          "/stats: print out stats\n";
    } else {
      res.status = 404;
      res.body = "not found: / lists what this listener serves\n";
    }
  };
}

}  // namespace

#ifdef RK_HAVE_GRPC
struct Listeners::Grpc {
  std::unique_ptr<server::grpc::GrpcServer> server;
};

namespace {

int milliseconds(Nanos d) {
  return static_cast<int>(std::min<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count(),
                                                 std::numeric_limits<int>::max()));
}

std::unique_ptr<server::grpc::GrpcServer> start_grpc(const ServeFlags& flags, const ListenerOptions& options,
                                                     service::Service& service, ServeMetrics& metrics) {
  const FdBudget& budget = options.budget;
  // gRPC's own files, or every listener's.
  const server::http::TlsFiles tls = options.grpc_tls ? *options.grpc_tls
                                                      : options.public_http.tls.value_or(server::http::TlsFiles{});
  server::grpc::GrpcHooks hooks;
  hooks.connection = [&metrics](int delta) { metrics.grpc_connections(delta); };
  hooks.refused = [&metrics](std::string_view reason) { metrics.bad_request("grpc", reason); };
  hooks.decided = [&metrics](std::string_view domain, const service::CheckResponse& r, Nanos took) {
    metrics.decided("grpc", domain, r, took);
  };
  hooks.answered = [&metrics](std::string_view code) { metrics.grpc_answered(code); };
  auto server = std::make_unique<server::grpc::GrpcServer>(
      service,
      server::grpc::GrpcOptions{
          .address = flags.grpc,
          .response_headers = flags.grpc_headers,
          .response_metadata = flags.grpc_metadata,
          .max_message_bytes = flags.grpc_max_message_bytes,
          .max_streams_per_connection = flags.grpc_max_streams_per_connection,
          .max_watch_streams = flags.grpc_max_watch_streams,
          .tls_cert = tls.cert,
          .tls_key = tls.key,
          .tls_client_ca = tls.client_ca,
          .tls_client_san = flags.grpc_tls_client_san,
          .tls_refresh_seconds = static_cast<unsigned>(kTlsRefresh.count()),
          .handshake_timeout_ms = milliseconds(flags.header_timeout),
          .max_connections = budget.grpc_max,
          .max_connections_per_ip = flags.max_connections_per_ip,
          .per_ip_exempt = flags.per_ip_exempt,
          .busy_idle_timeout_ms = milliseconds(flags.busy_idle_timeout),
          .fd_ceiling = budget.fd_ceiling,
          .max_connection_age_ms = flags.grpc_max_connection_age.count() ? milliseconds(flags.grpc_max_connection_age)
                                                                         : 0,
          .max_connection_age_grace_ms =
              flags.grpc_max_connection_age_grace.count() ? milliseconds(flags.grpc_max_connection_age_grace) : 0},
      hooks);
  server->start();
  const char* tls_state = tls.cert.empty() ? "off" : !tls.client_ca.empty() ? "on, client certificates" : "on";
  logging::log(logging::Level::kInfo, "serving gRPC",
               {{"grpc", flags.grpc.substr(0, flags.grpc.rfind(':')) + ":" + std::to_string(server->port())},
                {"tls", std::string(tls_state) + (options.grpc_tls ? " (--grpc-tls-cert)" : "")}});
  return server;
}

}  // namespace
#else
struct Listeners::Grpc {};
#endif

std::chrono::milliseconds finish_timeout(const ServeFlags& flags) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(flags.shutdown_grace - flags.drain) -
                    std::chrono::seconds(1);
  return std::clamp<std::chrono::milliseconds>(left, std::chrono::seconds(1), std::chrono::seconds(5));
}

bool listener_options(const ServeFlags& flags, std::uint64_t open_files, ListenerOptions& options, std::string& error) {
  server::http::ServerOptions& public_options = options.public_http;
  server::http::ServerOptions& admin_options = options.admin_http;
  if (!split_address(flags.http, public_options.address, public_options.port) ||
      !split_address(flags.admin, admin_options.address, admin_options.port)) {
    error = "--http and --admin take ADDR:PORT (like 127.0.0.1:8080)";
    return false;
  }
#ifndef RK_HAVE_GRPC
  if (!flags.grpc.empty()) {
    error = "this build has no gRPC (install libgrpc++-dev and protobuf-compiler-grpc)";
    return false;
  }
#endif
  options.budget = plan_fd_budget({.open_files = open_files,
                                   .threads = flags.threads,
                                   .http = {flags.max_connections, flags.max_connections_given},
                                   .grpc = !flags.grpc.empty(),
                                   .grpc_max = {flags.grpc_max_connections, flags.grpc_max_connections_given}});
  if (!options.budget.error.empty()) {
    error = options.budget.error;
    return false;
  }
  if (!flags.prometheus.empty()) {
    server::http::ServerOptions& p = options.prometheus_http.emplace();
    // ":9090", upstream's PROMETHEUS_ADDR default, is every IPv4 address.
    const std::string address = flags.prometheus.starts_with(':') ? "0.0.0.0" + flags.prometheus : flags.prometheus;
    if (!split_address(address, p.address, p.port)) {
      error = "--prometheus: '" + flags.prometheus + "' is not ADDR:PORT (like 0.0.0.0:9090)";
      return false;
    }
    p.threads = 1;
    p.max_connections = options.budget.admin_max;
  }
  public_options.threads = flags.threads;
  public_options.max_connections = options.budget.http_max;
  public_options.fd_ceiling = options.budget.fd_ceiling;
  admin_options.max_connections = options.budget.admin_max;  // the admin listener may use descriptors past it
  public_options.max_connections_per_ip = flags.max_connections_per_ip;
  public_options.per_ip_exempt = flags.per_ip_exempt;
  public_options.busy_idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.busy_idle_timeout);
  public_options.header_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.header_timeout);
  admin_options.threads = 1;
  public_options.drain_timeout = admin_options.drain_timeout = finish_timeout(flags);
  // The admin listener speaks TLS too when it is configured: its token, rules and hot keys must not cross the
  // network in the clear either.
  if (!tls_files(flags, public_options.tls, error)) return false;
  admin_options.tls = public_options.tls;
  if (!grpc_tls_files(flags, options.grpc_tls, error)) return false;
  if (flags.grpc.empty() && (flags.grpc_max_connection_age.count() || flags.grpc_max_connection_age_grace.count())) {
    error = "--grpc-max-connection-age and --grpc-max-connection-age-grace need --grpc";
    return false;
  }
  if (!flags.debug.empty()) {
    options.debug_http.emplace();
    if (!split_address(flags.debug, options.debug_http->address, options.debug_http->port)) {
      error = "--debug " + flags.debug + ": not ADDR:PORT (like 127.0.0.1:6070)";
      return false;
    }
    options.debug_http->threads = 1;
    // A few readers at a time; its descriptors come from the process's own share, as the admin listener's extra do.
    options.debug_http->max_connections = std::min<std::size_t>(kDebugMaxConnections, options.budget.admin_max);
  }
  return admin_token(flags, options, options.admin_token, error);
}

Listeners::Listeners(const ServeFlags& flags, const ListenerOptions& options, service::Service& service,
                     ServeMetrics& metrics, const server::api::Hooks& hooks)
    : grpc_(std::make_unique<Grpc>()), finish_(finish_timeout(flags)) {
  const server::http::ServerOptions& public_options = options.public_http;
  const server::http::ServerOptions& admin_options = options.admin_http;
  if (public_options.tls) tls_seen_ = stamps(*public_options.tls);  // before the servers read the files
  server::api::ForwardAuthOptions forward = flags.forward;
  forward.path = {.strip_params = !flags.keep_path_params, .fold_case = flags.path_case_insensitive};
  const server::http::ServerEvents events = http_events(metrics);
  public_server_ = std::make_unique<server::http::Server>(public_options,
                                                          server::api::public_routes(service, hooks, forward), events);
  admin_server_ = std::make_unique<server::http::Server>(
      admin_options,
      server::api::admin_routes(
          service, hooks, {.hosts = flags.admin_hosts, .auth = admin_auth(options), .routes = options.admin_routes}),
      admin_events(metrics, events));
  public_server_->start();
  admin_server_->start();
  if (options.prometheus_http) {
    prometheus_server_ = std::make_unique<server::http::Server>(
        *options.prometheus_http, server::api::metrics_routes(hooks, flags.prometheus_path), events);
    prometheus_server_->start();
    logging::log(logging::Level::kInfo, "serving metrics",
                 {{"prometheus", options.prometheus_http->address + ":" + std::to_string(prometheus_server_->port()) +
                                     flags.prometheus_path}});
  }
  if (options.debug_http) {
    debug_server_ = std::make_unique<server::http::Server>(*options.debug_http, debug_routes(service, metrics),
                                                           admin_events(metrics, events));
    debug_server_->start();
    logging::log(logging::Level::kInfo, "serving the debug listener",
                 {{"debug", options.debug_http->address + ":" + std::to_string(debug_server_->port())}});
  }
#ifdef RK_HAVE_GRPC
  if (!flags.grpc.empty()) grpc_->server = start_grpc(flags, options, service, metrics);
#endif
  grpc_own_tls_ = options.grpc_tls.has_value();
  if (options.grpc_tls) grpc_tls_seen_ = stamps(*options.grpc_tls);
  if (public_options.tls || options.grpc_tls) {
    tls_watch_.start(kTlsRefresh, [this, files = public_options.tls, grpc_files = options.grpc_tls, &metrics] {
      if (files) reload_tls_if_rotated(*files, metrics);
      if (grpc_files) reload_grpc_tls_if_rotated(*grpc_files, metrics);
    });
  }
  logging::log(logging::Level::kInfo, "serving",
               {{"http", public_options.address + ":" + std::to_string(public_server_->port())},
                {"admin", admin_options.address + ":" + std::to_string(admin_server_->port())},
                {"tls", public_options.tls ? (flags.tls_client_ca.empty() ? "on" : "on, client certificates") : "off"},
                {"config", flags.config}});
}

// Every listener takes the rotated files from one read, checked once (server/tls/tls_files.h): the admin and gRPC
// listeners have the public one's files, so they never serve different certificates. A read that fails (a key
// rewritten before its certificate, say) keeps the pair in use on all of them and is tried again when a file changes
// next; gRPC's copy of a pair that could not be written, at the next look.
void Listeners::reload_tls_if_rotated(const server::http::TlsFiles& files, ServeMetrics& metrics) {
  std::string now = stamps(files);
  if (now == tls_seen_) return;
  tls_seen_ = std::move(now);  // taken before the files are read: a change while they are read is seen next time
  try {
    auto pem = server::tls::read_tls_files(files);
    auto fresh = public_server_->prepare_tls(pem);
#ifdef RK_HAVE_GRPC
    // First: the one that can fail for want of a disk. Not when gRPC has files of its own.
    if (grpc_->server && !grpc_own_tls_) grpc_->server->install_tls(pem);
#endif
    public_server_->install_tls(fresh);
    admin_server_->install_tls(std::move(fresh));
    metrics.tls_reloaded(true);
    logging::log(logging::Level::kInfo, "TLS certificate files reloaded", {{"tls_cert", files.cert}});
  } catch (const server::http::TlsFileError& e) {
    metrics.tls_reloaded(false);
    logging::log(
        logging::Level::kError, "TLS certificate files not reloaded; keeping those in use",
        {{"error", std::string(flag_of(e.which)) + " " + e.what()}, {"tls_cert", files.cert}, {"tls_key", files.key}});
  } catch (const std::exception& e) {
    tls_seen_.clear();
    metrics.tls_reloaded(false);
    logging::log(logging::Level::kError, "TLS certificate files not reloaded; keeping those in use",
                 {{"error", e.what()}, {"tls_cert", files.cert}, {"tls_key", files.key}});
  }
}

// gRPC's own files (--grpc-tls-*), read and checked by the same one path, for gRPC alone.
void Listeners::reload_grpc_tls_if_rotated(const server::http::TlsFiles& files, ServeMetrics& metrics) {
  std::string now = stamps(files);
  if (now == grpc_tls_seen_) return;
  grpc_tls_seen_ = std::move(now);
#ifdef RK_HAVE_GRPC
  try {
    if (grpc_->server) grpc_->server->install_tls(server::tls::read_tls_files(files));
    metrics.tls_reloaded(true);
    logging::log(logging::Level::kInfo, "gRPC's TLS certificate files reloaded", {{"grpc_tls_cert", files.cert}});
  } catch (const server::http::TlsFileError& e) {
    metrics.tls_reloaded(false);
    logging::log(logging::Level::kError, "gRPC's TLS certificate files not reloaded; keeping those in use",
                 {{"error", std::string(flag_of(e.which, kGrpcTls)) + " " + e.what()}, {"grpc_tls_cert", files.cert}});
  } catch (const std::exception& e) {
    grpc_tls_seen_.clear();
    metrics.tls_reloaded(false);
    logging::log(logging::Level::kError, "gRPC's TLS certificate files not reloaded; keeping those in use",
                 {{"error", e.what()}, {"grpc_tls_cert", files.cert}});
  }
#else
  (void)metrics;
#endif
}

Listeners::~Listeners() { stop(); }

void Listeners::set_grpc_serving(bool serving) {
#ifdef RK_HAVE_GRPC
  if (grpc_->server) grpc_->server->set_serving(serving);
#else
  (void)serving;
#endif
}

void Listeners::not_ready() {
#ifdef RK_HAVE_GRPC
  if (grpc_->server) grpc_->server->set_serving(false);
#endif
}

// All at once, so that stopping takes finish_ at most: gRPC's GOAWAY sends Envoy to another replica while the HTTP
// listeners finish their requests in flight.
void Listeners::stop() {
  tls_watch_.stop();
  std::thread public_http([this] { public_server_->stop(); });
  std::thread admin_http([this] { admin_server_->stop(); });
#ifdef RK_HAVE_GRPC
  if (grpc_->server) grpc_->server->stop(finish_);
#endif
  if (prometheus_server_) prometheus_server_->stop();
  if (debug_server_) debug_server_->stop();
  public_http.join();
  admin_http.join();
}

}  // namespace rk::cli::serve
