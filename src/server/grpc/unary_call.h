// server/grpc/unary_call.h: one unary call's life on our completion queues, for every unary method we answer
// (Envoy's ShouldRateLimit, gRPC health's Check): waiting for a request, then answered, then gone. Each call, once
// its request arrives, first puts the next one waiting, so there is always one per queue.
//
//   using Check = UnaryCall<HealthCheckRequest, HealthCheckResponse, Owner, &Health::AsyncService::RequestCheck>;
//   Check::start(owner, async_service, cq);
// with, on Owner:
//   void answer(const ::grpc::ServerContext&, const Request&, Response&, F finish);  // calls
//                                          // finish(::grpc::Status) once, now or later, from any thread
// Thread safety: a call's events come from its queue's thread; finish may run on another (gRPC allows Finish from
// any thread, and its completion comes back to the queue).
#pragma once

#include <grpcpp/grpcpp.h>

#include "server/grpc/health_service.h"  // CqTag

namespace rk::server::grpc {

// The class a pointer to member belongs to.
template <class>
struct MemberOf;
template <class C, class F>
struct MemberOf<F C::*> {
  using type = C;
};

// kAsk: the generated AsyncService's Request<Method>, which puts a call waiting for its request.
template <class Request, class Response, class Owner, auto kAsk>
class UnaryCall final : public CqTag {
 public:
  template <class AsyncService>
  static void start(Owner& owner, AsyncService& service, ::grpc::ServerCompletionQueue* cq) {
    new UnaryCall(owner, service, cq);
  }

  void proceed(bool ok) override {
    if (answered_ || !ok) {  // the answer is sent, or the queue is shutting down
      delete this;
      return;
    }
    new UnaryCall(owner_, service_, cq_);
    answered_ = true;
    // A non-OK status is sent alone, without the response (as FinishWithError does).
    owner_.answer(context_, request_, response_,
                  [this](const ::grpc::Status& status) { responder_.Finish(response_, status, this); });
  }

 private:
  // The service as the type that declares Request<Method> (a base of the generated AsyncService).
  using Service = typename MemberOf<decltype(kAsk)>::type;

  UnaryCall(Owner& owner, Service& service, ::grpc::ServerCompletionQueue* cq)
      : owner_(owner), service_(service), cq_(cq), responder_(&context_) {
    (service_.*kAsk)(&context_, &request_, &responder_, cq_, cq_, this);
  }
  ~UnaryCall() = default;

  Owner& owner_;
  Service& service_;
  ::grpc::ServerCompletionQueue* cq_;
  ::grpc::ServerContext context_;
  Request request_;
  Response response_;
  ::grpc::ServerAsyncResponseWriter<Response> responder_;
  bool answered_ = false;
};

}  // namespace rk::server::grpc
