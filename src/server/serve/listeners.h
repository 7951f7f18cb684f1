// server/serve/listeners.h: serve's listeners: the public HTTP one (decision API, forward-auth), the admin one
// (metrics, rules, dashboard, admin API) and, with --grpc, Envoy's rate-limit gRPC API, started and stopped as one.
//
//   http::ServerOptions public_options, admin_options;
//   if (!listener_options(flags, public_options, admin_options, error)) ...    // exit 2: nothing started
//   Listeners listeners(flags, public_options, admin_options, service, metrics, hooks);  // throws: exit 1
//   ...
//   listeners.stop();   // stops accepting; requests in flight finish
#pragma once

#include <memory>
#include <string>

#include "server/api/routes.h"
#include "server/http/server.h"
#include "server/serve/flags.h"
#include "server/serve/serve_metrics.h"
#include "service/service.h"

namespace rk::serve {

// The HTTP listeners' options from the flags; false with `error` for an address that is not ADDR:PORT, or --grpc
// in a build without gRPC.
bool listener_options(const ServeFlags& flags, http::ServerOptions& public_options, http::ServerOptions& admin_options,
                      std::string& error);

class Listeners {
 public:
  // Listens and starts serving; throws std::runtime_error saying why it cannot (a port in use).
  Listeners(const ServeFlags& flags, const http::ServerOptions& public_options,
            const http::ServerOptions& admin_options, service::Service& service, ServeMetrics& metrics,
            const api::Hooks& hooks);
  ~Listeners();
  void stop();

 private:
  struct Grpc;  // empty without gRPC
  std::unique_ptr<http::Server> public_server_, admin_server_;
  std::unique_ptr<Grpc> grpc_;
};

}  // namespace rk::serve
