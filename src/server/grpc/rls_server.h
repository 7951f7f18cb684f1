// server/grpc/rls_server.h: Envoy's rate-limit service over gRPC (envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit) on its own port, with the standard gRPC health service, as a drop-in for envoyproxy/ratelimit.
//
// The protocol adapter only: RateLimitRequest -> service::CheckRequest, the shared Service decides, CheckResponse ->
// RateLimitResponse. Bad requests (empty domain, empty descriptors, absurd hits_addend, huge entries) get
// INVALID_ARGUMENT with a message naming the field, and change nothing.
//
// Thread safety: calls are answered on `threads` threads, each with its own completion queue; Service is
// thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tls/tls_files.h"
#include "service/service.h"

namespace rk::server::grpc {

struct GrpcOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0 picks a free one (see port())
  bool response_headers = false;        // add the RateLimit header fields to response_headers_to_add
  // Fill RateLimitResponse.dynamic_metadata as envoyproxy/ratelimit does with RESPONSE_DYNAMIC_METADATA: the
  // request's domain, its descriptors (entries as "key=value", an override as text, its hits_addend), the request's
  // hits_addend when not 0, and "metadata": the rules files' `metadata:` of the descriptors that passed, merged.
  bool response_metadata = false;
  int threads = 2;  // threads, each polling its own completion queue
  // Bounds on what clients can make the server hold. A request is decoded whole before it is answered, so each
  // stream in flight may hold one message; Watch streams hold theirs for as long as they are open.
  int max_message_bytes = 64 * 1024;     // a request over it: RESOURCE_EXHAUSTED (the HTTP API's body limit)
  int max_streams_per_connection = 256;  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; clients queue past it
  int max_watch_streams = 1024;          // health Watch streams open at once; past it: RESOURCE_EXHAUSTED
  // TLS: PEM files, read and checked by start() as the HTTPS listeners' are (server/tls/tls_files.h). Empty
  // tls_cert: plaintext. Rotated files are taken by reload_tls() or install_tls(), never read by gRPC itself: new
  // connections get them within tls_refresh_seconds, connections open keep theirs.
  std::string tls_cert, tls_key;
  std::string tls_client_ca;   // not empty: a client certificate issued by these CAs is required
  std::string tls_client_san;  // not empty: and it must carry this subject alternative name (tls_credentials.h)
  unsigned tls_refresh_seconds = 1;
  // A new connection's handshake (HTTP/2's preface, and TLS's) must end within this (the HTTP listener's
  // header timeout), so that connections that never finish one hold nothing for long.
  int handshake_timeout_ms = 10000;
  // Connections, counted by the listener's own accept() before gRPC sees them (acceptor.h), under the HTTP
  // listener's rules: at most max_connections at once; at most max_connections_per_ip from one IPv4 address or IPv6
  // /64 (0: no limit) but from per_ip_exempt (a bad entry: std::invalid_argument); at the cap, the connection that
  // has received nothing for longest gives way; from 3/4 of it on, one that has received nothing for
  // busy_idle_timeout_ms is closed. A connection with no call for idle_timeout_ms is closed (GOAWAY) in any case.
  // A connection whose descriptor's number would be fd_ceiling or more is closed at once (0: none).
  std::size_t max_connections = 10000;
  std::size_t max_connections_per_ip = 256;
  std::vector<std::string> per_ip_exempt;
  int busy_idle_timeout_ms = 5000;
  int idle_timeout_ms = 60000;
  int fd_ceiling = 0;
  // A connection older than max_connection_age_ms (0: no limit) is sent GOAWAY, its age drawn per connection
  // within ±10% of it (gRPC's own jitter, GRPC_ARG_MAX_CONNECTION_AGE_MS), so that clients reconnect, spread over
  // servers added since; calls still open max_connection_age_grace_ms after it (0: no limit) are cut.
  int max_connection_age_ms = 0;
  int max_connection_age_grace_ms = 0;
};

struct GrpcHooks {
  std::function<void(std::string_view domain, const service::CheckResponse&, Nanos took)> decided;
  std::function<void(std::string_view code)> answered;  // "OK", "INVALID_ARGUMENT", ...
  std::function<void(int delta)> connection;            // +1 a connection admitted, -1 gone
  // A connection refused or closed at once: "too_many_connections", "too_many_connections_from_ip",
  // "descriptor_reserve".
  std::function<void(std::string_view reason)> refused;
};

class GrpcServer {
 public:
  GrpcServer(service::Service& service, GrpcOptions options, GrpcHooks hooks = {});
  ~GrpcServer();
  void start();  // throws std::runtime_error if it cannot listen
  int port() const;
  // Stops accepting, sends every connection GOAWAY, lets calls in flight finish for up to `finish` (then cancels
  // them) and joins the threads; idempotent.
  void stop(std::chrono::milliseconds finish = std::chrono::seconds(5));
  void set_serving(bool serving);  // the health service's answer
  // With TLS, after start(), from any thread: a pair read and checked (server::tls::read_tls_files, one read the HTTPS
  // listeners take too) for new connections; reload_tls() reads GrpcOptions' files for it (throws TlsFileError).
  // A pair refused, or one that cannot be handed to gRPC (std::runtime_error), leaves the one in use. Nothing
  // without TLS.
  void install_tls(std::shared_ptr<const server::tls::TlsPem> pem);
  void reload_tls();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk::server::grpc
