// server/serve/listeners.cc: serve's listeners, from flags to started servers, and their one log line.
#include "server/serve/listeners.h"

#include <charconv>

#include "logging/log.h"
#ifdef RK_HAVE_GRPC
#include "server/grpc/rls_server.h"
#endif

namespace rk::serve {

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

http::ServerEvents http_events(ServeMetrics& metrics) {
  http::ServerEvents events;
  events.on_bad_request = [&metrics](std::string_view reason) { metrics.bad_request("http", reason); };
  events.on_connection = [&metrics](int delta) { metrics.connections(delta); };
  events.on_handler_error = [&metrics](std::string_view what) {
    metrics.bad_request("http", "handler_error");
    logging::log(logging::Level::kError, "request handler failed; answered 500", {{"error", std::string(what)}});
  };
  return events;
}

}  // namespace

#ifdef RK_HAVE_GRPC
struct Listeners::Grpc {
  std::unique_ptr<grpcapi::GrpcServer> server;
};

namespace {

std::unique_ptr<grpcapi::GrpcServer> start_grpc(const ServeFlags& flags, service::Service& service,
                                                ServeMetrics& metrics) {
  grpcapi::GrpcHooks hooks;
  hooks.decided = [&metrics](std::string_view domain, const service::CheckResponse& r, Nanos took) {
    metrics.decided("grpc", domain, r, took);
  };
  hooks.answered = [&metrics](std::string_view code) { metrics.grpc_answered(code); };
  auto server = std::make_unique<grpcapi::GrpcServer>(
      service,
      grpcapi::GrpcOptions{.address = flags.grpc,
                           .response_headers = flags.grpc_headers,
                           .max_message_bytes = flags.grpc_max_message_bytes,
                           .max_streams_per_connection = flags.grpc_max_streams_per_connection,
                           .max_watch_streams = flags.grpc_max_watch_streams},
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

bool listener_options(const ServeFlags& flags, http::ServerOptions& public_options, http::ServerOptions& admin_options,
                      std::string& error) {
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
  public_options.threads = flags.threads;
  public_options.max_connections = flags.max_connections;
  public_options.max_connections_per_ip = flags.max_connections_per_ip;
  public_options.per_ip_exempt = flags.per_ip_exempt;
  public_options.busy_idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.busy_idle_timeout);
  public_options.header_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.header_timeout);
  admin_options.threads = 1;
  return true;
}

Listeners::Listeners(const ServeFlags& flags, const http::ServerOptions& public_options,
                     const http::ServerOptions& admin_options, service::Service& service, ServeMetrics& metrics,
                     const api::Hooks& hooks)
    : grpc_(std::make_unique<Grpc>()) {
  api::ForwardAuthOptions forward = flags.forward;
  forward.path = {.strip_params = !flags.keep_path_params, .fold_case = flags.path_case_insensitive};
  const http::ServerEvents events = http_events(metrics);
  public_server_ = std::make_unique<http::Server>(public_options, api::public_routes(service, hooks, forward), events);
  admin_server_ = std::make_unique<http::Server>(admin_options,
                                                 api::admin_routes(service, hooks, {.hosts = flags.admin_hosts}),
                                                 http::ServerEvents{.on_handler_error = events.on_handler_error});
  public_server_->start();
  admin_server_->start();
#ifdef RK_HAVE_GRPC
  if (!flags.grpc.empty()) grpc_->server = start_grpc(flags, service, metrics);
#endif
  logging::log(logging::Level::kInfo, "serving",
               {{"http", public_options.address + ":" + std::to_string(public_server_->port())},
                {"admin", admin_options.address + ":" + std::to_string(admin_server_->port())},
                {"config", flags.config}});
}

Listeners::~Listeners() { stop(); }

void Listeners::stop() {
#ifdef RK_HAVE_GRPC
  if (grpc_->server) grpc_->server->stop();
#endif
  public_server_->stop();
  admin_server_->stop();
}

}  // namespace rk::serve
