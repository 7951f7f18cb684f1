// cli/serve/listeners.h: serve's listeners: the public HTTP one (decision API, forward-auth), the admin one
// (metrics, rules, dashboard, admin API) and, with --grpc, Envoy's rate-limit gRPC API, started and stopped as one;
// with --tls-cert, all three speak TLS (gRPC its own with --grpc-tls-cert), and rotated certificate files are
// picked up while serving; with --debug, envoyproxy/ratelimit's debug listener (/rlconfig, /stats) too.
//
//   ListenerOptions options;
//   if (!listener_options(flags, open_files, options, error)) ...      // exit 2: nothing started
//   Listeners listeners(flags, options, service, metrics, hooks);      // throws: exit 1
//   ...
//   listeners.not_ready();  // gRPC health NOT_SERVING (the HTTP probes ask Hooks::ready); still answering
//   listeners.stop();   // stops accepting, gRPC connections get GOAWAY; requests in flight finish
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/periodic.h"
#include "server/api/routes.h"
#include "server/http/server.h"
#include "cli/serve/fd_budget.h"
#include "cli/serve/flags.h"
#include "cli/serve/serve_metrics.h"
#include "service/service.h"

namespace rk::cli::serve {

// What the listeners are made of, from the flags.
struct ListenerOptions {
  server::http::ServerOptions public_http, admin_http;
  std::optional<server::http::TlsFiles> grpc_tls;  // --grpc-tls-*: gRPC's own files; none: gRPC takes public_http's
  std::optional<server::http::ServerOptions> debug_http;  // --debug: upstream's debug listener (/rlconfig, /stats)
  std::shared_ptr<base::SecretFile> admin_token;          // --admin-token-file; null: the admin listener asks for none
  FdBudget budget;  // the caps every listener gets from the descriptors there are (fd_budget.h)
  std::vector<server::api::AdminRoute> admin_routes;  // routes of the layers above the admin API (the dashboard's)
  std::optional<server::http::ServerOptions> prometheus_http;  // --prometheus: the metrics alone, at --prometheus-path
};

// How often the TLS files are looked at for a rotation (their inode, size and modification time), and how often gRPC
// looks for the pair each rotation hands it (server/grpc/tls_credentials.h).
inline constexpr std::chrono::seconds kTlsRefresh{1};

// The listeners' options from the flags, the files they name read and checked. False with `error`, naming the flag
// (and the file), for: an address that is not ADDR:PORT; --grpc in a build without gRPC; --tls-key without
// --tls-cert or the reverse, --tls-client-ca without them (likewise --grpc-tls-*, which also need --grpc, and
// --grpc-tls-client-san without --grpc-tls-client-ca), --grpc-max-connection-age(-grace) without --grpc, a --debug
// address that is not ADDR:PORT, a TLS file unreadable or not PEM, a key that does not match its certificate; an
// --admin-token-file unreadable, shorter than server::api::kMinAdminTokenBytes or with a character a header cannot
// carry; an --admin address that is not loopback without --admin-token-file, or with it but without TLS or
// --admin-allow-plaintext-token; a --max-connections or --grpc-max-connections given that the descriptors the
// process may open (`open_files`, RLIMIT_NOFILE) cannot hold (fd_budget.h).
bool listener_options(const ServeFlags& flags, std::uint64_t open_files, ListenerOptions& options, std::string& error);

// How long stopping lets requests in flight finish: 5 s, or what --shutdown-grace leaves after --drain less a second
// for the state file and the exit (at least a second: the flags keep kAfterDrain between them).
std::chrono::milliseconds finish_timeout(const ServeFlags& flags);

class Listeners {
 public:
  // Listens and starts serving; throws std::runtime_error saying why it cannot (a port in use).
  Listeners(const ServeFlags& flags, const ListenerOptions& options, service::Service& service, ServeMetrics& metrics,
            const server::api::Hooks& hooks);
  ~Listeners();
  void not_ready();
  void stop();
  // gRPC health's answer (SERVING from the start); ignored once stopped, and without --grpc. From any thread.
  void set_grpc_serving(bool serving);

 private:
  struct Grpc;  // empty without gRPC
  void reload_tls_if_rotated(const server::http::TlsFiles& files, ServeMetrics& metrics);
  void reload_grpc_tls_if_rotated(const server::http::TlsFiles& files, ServeMetrics& metrics);
  std::unique_ptr<server::http::Server> public_server_, admin_server_, prometheus_server_, debug_server_;
  std::unique_ptr<Grpc> grpc_;
  std::chrono::milliseconds finish_;  // finish_timeout()
  std::string tls_seen_;              // the TLS files' stamps last looked at; tls_watch_'s thread only
  std::string grpc_tls_seen_;         // likewise, gRPC's own files'
  bool grpc_own_tls_ = false;         // gRPC has files of its own: the shared ones' rotations are not its
  base::Periodic tls_watch_;          // last member: stopped first, while the servers are alive
};

}  // namespace rk::cli::serve
