// server/grpc/rls_server.h: Envoy's rate-limit service over gRPC (envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit) on its own port, with the standard gRPC health service, as a drop-in for envoyproxy/ratelimit.
//
// The protocol adapter only: RateLimitRequest -> app::CheckRequest, the shared Service decides, CheckResponse ->
// RateLimitResponse. Bad requests (empty domain, empty descriptors, absurd hits_addend, huge entries) get
// INVALID_ARGUMENT with a message naming the field, and change nothing.
//
// Thread safety: calls are answered on `threads` threads, each with its own completion queue; Service is
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/app/service.h"

namespace rk::grpcapi {

struct GrpcOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0 picks a free one (see port())
  bool response_headers = false;        // add the RateLimit header fields to response_headers_to_add
  int threads = 2;                      // threads, each polling its own completion queue
};

struct GrpcHooks {
  std::function<void(std::string_view domain, const app::CheckResponse&, Nanos took)> decided;
  std::function<void(std::string_view code)> answered;  // "OK", "INVALID_ARGUMENT", ...
};

class GrpcServer {
 public:
  GrpcServer(app::Service& service, GrpcOptions options, GrpcHooks hooks = {});
  ~GrpcServer();
  void start();  // throws std::runtime_error if it cannot listen
  int port() const;
  void stop();   // finishes calls in flight; idempotent
  void set_serving(bool serving);  // the health service's answer

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk::grpcapi
