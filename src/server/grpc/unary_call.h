// server/grpc/unary_call.h: one unary call's life on our completion queues, for every unary method we answer
// (Envoy's ShouldRateLimit, gRPC health's Check): waiting for a request, then answered, then gone. Each call, once
// its request arrives, first puts the next one waiting, so there is always one per queue.
//
//   UnaryCall<Request, Response, Owner>::start(owner, cq);
// with, on Owner:
//   void request(grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
//                grpc::ServerCompletionQueue*, void* tag);              // the generated RequestMethod(...)
//   void answer(const Request&, Response&, F finish);                    // calls finish(grpc::Status) once,
//                                                                        // now or later, from any thread
// Thread safety: a call's events come from its queue's thread; finish may run on another (gRPC allows Finish from
// any thread, and its completion comes back to the queue).
#pragma once

#include <grpcpp/grpcpp.h>

#include "server/grpc/health_service.h"  // CqTag

namespace rk::grpcapi {

template <class Request, class Response, class Owner>
class UnaryCall final : public CqTag {
 public:
  static void start(Owner& owner, grpc::ServerCompletionQueue* cq) { new UnaryCall(owner, cq); }

  void proceed(bool ok) override {
    if (answered_ || !ok) {  // the answer is sent, or the queue is shutting down
      delete this;
      return;
    }
    start(owner_, cq_);
    answered_ = true;
    // A non-OK status is sent alone, without the response (as FinishWithError does).
    owner_.answer(request_, response_,
                  [this](const grpc::Status& status) { responder_.Finish(response_, status, this); });
  }

 private:
  UnaryCall(Owner& owner, grpc::ServerCompletionQueue* cq) : owner_(owner), cq_(cq), responder_(&context_) {
    owner_.request(&context_, &request_, &responder_, cq_, this);
  }
  ~UnaryCall() = default;

  Owner& owner_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_;
  bool answered_ = false;
};

}  // namespace rk::grpcapi
