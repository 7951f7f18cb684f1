// cli/serve/listeners.cc: serve's listeners, from flags to started servers, and their one log line; the TLS and
// admin token files read and checked; rotated TLS files picked up.
#include "cli/serve/listeners.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/secret_file.h"
#include "logging/log.h"
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

const char* flag_of(server::http::TlsFileError::Which which) {
  switch (which) {
    case server::http::TlsFileError::Which::kCert: return "--tls-cert";
    case server::http::TlsFileError::Which::kKey: return "--tls-key";
    case server::http::TlsFileError::Which::kClientCa: return "--tls-client-ca";
  }
  return "--tls-cert";
}

// --tls-cert, --tls-key and --tls-client-ca, together and read: a listener must not start on half of them.
bool tls_files(const ServeFlags& flags, std::optional<server::http::TlsFiles>& tls, std::string& error) {
  if (flags.tls_cert.empty() && flags.tls_key.empty()) {
    if (!flags.tls_client_ca.empty()) {
      error = "--tls-client-ca " + flags.tls_client_ca + ": needs --tls-cert and --tls-key (client certificates "
              "are asked for over TLS)";
    }
    return flags.tls_client_ca.empty();
  }
  if (flags.tls_cert.empty() || flags.tls_key.empty()) {
    error = flags.tls_cert.empty()
                ? "--tls-key " + flags.tls_key + ": needs --tls-cert, the certificate it is the key of"
                : "--tls-cert " + flags.tls_cert + ": needs --tls-key, its private key";
    return false;
  }
  server::http::TlsFiles files{.cert = flags.tls_cert, .key = flags.tls_key, .client_ca = flags.tls_client_ca};
  try {
    server::http::check_tls_files(files);
  } catch (const server::http::TlsFileError& e) {
    error = std::string(flag_of(e.which)) + " " + e.what();
    return false;
  }
  tls = std::move(files);
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
    token = std::make_shared<base::SecretFile>(
        "--admin-token-file", file, base::SecretFile::kVisibleAscii, server::api::kMinAdminTokenBytes,
        [](const std::string& message) {
          logging::log(logging::Level::kError, "admin token file not reloaded; keeping the token in use",
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
  return std::make_shared<server::api::AdminAuth>(options.admin_token,
                                          server::api::AdminAuthOptions{.secure_cookie = options.admin_http.tls.has_value()});
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

std::unique_ptr<server::grpc::GrpcServer> start_grpc(const ServeFlags& flags, const FdBudget& budget,
                                                service::Service& service, ServeMetrics& metrics) {
  server::grpc::GrpcHooks hooks;
  hooks.connection = [&metrics](int delta) { metrics.grpc_connections(delta); };
  hooks.refused = [&metrics](std::string_view reason) { metrics.bad_request("grpc", reason); };
  hooks.decided = [&metrics](std::string_view domain, const service::CheckResponse& r, Nanos took) {
    metrics.decided("grpc", domain, r, took);
  };
  hooks.answered = [&metrics](std::string_view code) { metrics.grpc_answered(code); };
  auto server = std::make_unique<server::grpc::GrpcServer>(
      service,
      server::grpc::GrpcOptions{.address = flags.grpc,
                           .response_headers = flags.grpc_headers,
                           .max_message_bytes = flags.grpc_max_message_bytes,
                           .max_streams_per_connection = flags.grpc_max_streams_per_connection,
                           .max_watch_streams = flags.grpc_max_watch_streams,
                           .tls_cert = flags.tls_cert,
                           .tls_key = flags.tls_key,
                           .tls_client_ca = flags.tls_client_ca,
                           .tls_refresh_seconds = static_cast<unsigned>(kTlsRefresh.count()),
                           .handshake_timeout_ms = milliseconds(flags.header_timeout),
                           .max_connections = budget.grpc_max,
                           .max_connections_per_ip = flags.max_connections_per_ip,
                           .per_ip_exempt = flags.per_ip_exempt,
                           .busy_idle_timeout_ms = milliseconds(flags.busy_idle_timeout),
                           .fd_ceiling = budget.fd_ceiling},
      hooks);
  server->start();
  logging::log(logging::Level::kInfo, "serving gRPC",
               {{"grpc", flags.grpc.substr(0, flags.grpc.rfind(':')) + ":" + std::to_string(server->port())}});
  return server;
}

}  // namespace
#else
struct Listeners::Grpc {};
#endif

bool listener_options(const ServeFlags& flags, std::uint64_t open_files, ListenerOptions& options,
                      std::string& error) {
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
  public_options.threads = flags.threads;
  public_options.max_connections = options.budget.http_max;
  public_options.fd_ceiling = options.budget.fd_ceiling;
  admin_options.max_connections = options.budget.admin_max;  // the admin listener may use descriptors past it
  public_options.max_connections_per_ip = flags.max_connections_per_ip;
  public_options.per_ip_exempt = flags.per_ip_exempt;
  public_options.busy_idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.busy_idle_timeout);
  public_options.header_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.header_timeout);
  admin_options.threads = 1;
  // The admin listener speaks TLS too when it is configured: its token, rules and hot keys must not cross the
  // network in the clear either.
  if (!tls_files(flags, public_options.tls, error)) return false;
  admin_options.tls = public_options.tls;
  return admin_token(flags, options, options.admin_token, error);
}

Listeners::Listeners(const ServeFlags& flags, const ListenerOptions& options, service::Service& service,
                     ServeMetrics& metrics, const server::api::Hooks& hooks)
    : grpc_(std::make_unique<Grpc>()) {
  const server::http::ServerOptions& public_options = options.public_http;
  const server::http::ServerOptions& admin_options = options.admin_http;
  if (public_options.tls) tls_seen_ = stamps(*public_options.tls);  // before the servers read the files
  server::api::ForwardAuthOptions forward = flags.forward;
  forward.path = {.strip_params = !flags.keep_path_params, .fold_case = flags.path_case_insensitive};
  const server::http::ServerEvents events = http_events(metrics);
  public_server_ = std::make_unique<server::http::Server>(public_options, server::api::public_routes(service, hooks, forward), events);
  admin_server_ = std::make_unique<server::http::Server>(admin_options,
                                                 server::api::admin_routes(service, hooks,
                                                                   {.hosts = flags.admin_hosts,
                                                                    .auth = admin_auth(options),
                                                                    .routes = options.admin_routes}),
                                                 admin_events(metrics, events));
  public_server_->start();
  admin_server_->start();
#ifdef RK_HAVE_GRPC
  if (!flags.grpc.empty()) grpc_->server = start_grpc(flags, options.budget, service, metrics);
#endif
  if (public_options.tls) {
    tls_watch_.start(kTlsRefresh,
                     [this, files = *public_options.tls, &metrics] { reload_tls_if_rotated(files, metrics); });
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
    if (grpc_->server) grpc_->server->install_tls(pem);  // first: the one that can fail for want of a disk
#endif
    public_server_->install_tls(fresh);
    admin_server_->install_tls(std::move(fresh));
    metrics.tls_reloaded(true);
    logging::log(logging::Level::kInfo, "TLS certificate files reloaded", {{"tls_cert", files.cert}});
  } catch (const server::http::TlsFileError& e) {
    metrics.tls_reloaded(false);
    logging::log(logging::Level::kError, "TLS certificate files not reloaded; keeping those in use",
                 {{"error", std::string(flag_of(e.which)) + " " + e.what()},
                  {"tls_cert", files.cert},
                  {"tls_key", files.key}});
  } catch (const std::exception& e) {
    tls_seen_.clear();
    metrics.tls_reloaded(false);
    logging::log(logging::Level::kError, "TLS certificate files not reloaded; keeping those in use",
                 {{"error", e.what()}, {"tls_cert", files.cert}, {"tls_key", files.key}});
  }
}

Listeners::~Listeners() { stop(); }

void Listeners::stop() {
  tls_watch_.stop();
#ifdef RK_HAVE_GRPC
  if (grpc_->server) grpc_->server->stop();
#endif
  public_server_->stop();
  admin_server_->stop();
}

}  // namespace rk::cli::serve
