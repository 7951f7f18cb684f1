// server/grpc/health_service.h: the standard gRPC health service (grpc.health.v1.Health: Check, and Watch as a
// server stream) answered on the server's own completion queues.
//
// Why not gRPC's built-in one (::grpc::EnableDefaultHealthCheckService): in gRPC 1.51 it is callback-based and
// brings its own polling threads, which compete with our completion-queue threads for the same connections; under
// load they took about a fifth of the server's CPU samples (bench/RESULTS.md, "gRPC").
//
//   HealthService health({"envoy.service.ratelimit.v3.RateLimitService"});
//   builder.RegisterService(health.service());
//   ... BuildAndStart ...
//   health.start(cq);                     // for each queue; its thread calls CqTag::proceed for every event
//   health.set_serving(true);
//   ...
//   health.shut_down();                   // before Server::Shutdown: watchers get NOT_SERVING, their streams end
//
// Semantics (as gRPC's own): "" and each named service are known, SERVING or NOT_SERVING together. Check on an
// unknown name fails with NOT_FOUND; Watch on one answers SERVICE_UNKNOWN and stays open. Watch sends the current
// status at once and again on every change (a watcher that falls behind gets the latest, not every step).
//
// Bounds: a Watch stream keeps only whether its name is known, not its request (which can be as large as the
// server's max receive size), and at most `max_watchers` streams are open at once: one past it ends at once with
// RESOURCE_EXHAUSTED, so that clients cannot make the server hold memory by opening streams.
//
// Thread safety: set_serving and shut_down from any thread; calls run on the queues' threads. Lock order: the
// service's mutex, then a watch call's.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace grpc {
class Service;
class ServerCompletionQueue;
}  // namespace grpc

namespace rk::server::grpc {

// What every tag on our completion queues points at: the queue's thread calls proceed(ok) for each event.
class CqTag {
 public:
  virtual void proceed(bool ok) = 0;

 protected:
  ~CqTag() = default;
};

class HealthService {
 public:
  HealthService(std::vector<std::string> services, int max_watchers);
  ~HealthService();
  ::grpc::Service* service();                     // register with the ServerBuilder before BuildAndStart
  void start(::grpc::ServerCompletionQueue* cq);  // after BuildAndStart: one Check and one Watch wait on cq
  void set_serving(bool serving);                 // ignored after shut_down
  void shut_down();                               // NOT_SERVING to every watcher, then ends its stream

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk::server::grpc
