// server/api/respond.h: what every route of both listeners answers with: the one error shape (counted as a bad
// request), the health probes, a check request's body parsed, and a decision answered at once or, when the remote
// store answers later, through a deferred reply.
//
//   auto request = check_body(req, res, hooks, "http");  // nullopt: the error is answered already
//   if (request) decide(service, req, res, std::move(*request), /*charge=*/true, answer);
//   // answer(const service::CheckResult&, server::http::Response&): now, or later on the store's thread
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "server/api/routes.h"
#include "server/http/server.h"
#include "service/service.h"
#include "tracing/context.h"

namespace rk::server::api {

// The error body (server/http/response_writer.h's one shape) with `status`; `reason` is what hooks.bad_request counts.
void error(server::http::Response& res, const Hooks& hooks, std::string_view protocol, int status,
           std::string_view reason, std::string_view field, std::string_view message);

// Whether the request's method is `method` (HEAD too for GET); otherwise answers 405 with Allow and returns false.
bool method_is(const server::http::Request& req, server::http::Response& res, const Hooks& hooks,
               std::string_view method);

// /healthz and /readyz; false for any other path.
bool health(const server::http::Request& req, server::http::Response& res, const Hooks& hooks);

// Parses the body as a check request; answers the error itself and returns nullopt if it is bad.
std::optional<service::CheckRequest> check_body(const server::http::Request& req, server::http::Response& res,
                                                const Hooks& hooks, std::string_view protocol);

// The caller's trace context from the request's headers (tracing/context.h); a header given twice is malformed.
tracing::Parent trace_parent(const server::http::Request& req);

// Runs a check and answers through `answer(result, response)`: into the handler's Response when the service decides
// at once (in-process domains), otherwise through a deferred Reply when the remote store answers. The lock settles
// the race between the handler returning and the store answering on its own thread.
//
// answer_when_done<Result>(req, res, start, answer) is the same for any asynchronous call: start(done) begins it, and
// done(Result) runs exactly once.
//
// One allocation: the handler and the service's callback share a Pending counted by hand, so that the callback
// holds one pointer (which std::function keeps without an allocation of its own) and no shared_ptr is copied. The
// service runs its callback exactly once (service.h), which drops the callback's count.
template <class Result, class Start, class Answer>
void answer_when_done(const server::http::Request& req, server::http::Response& res, Start start, Answer answer) {
  struct Pending {
    explicit Pending(Answer a) : answer(std::move(a)) {}
    void release() {
      if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
    std::atomic<int> refs{2};  // the handler's and the callback's
    std::mutex mu;
    bool deferred = false;  // under mu: the handler has returned; answer through `reply`
    std::optional<Result> early;
    server::http::Reply reply;
    Answer answer;
  };
  auto* pending = new Pending(std::move(answer));
  const auto done = [pending](Result result) {
    {
      std::unique_lock lock(pending->mu);
      if (!pending->deferred) {
        pending->early = std::move(result);
        lock.unlock();
        return pending->release();
      }
    }
    server::http::Response out;
    pending->answer(result, out);
    pending->reply.send(std::move(out));
    pending->release();
  };
  static_assert(std::is_trivially_copyable_v<decltype(done)> && sizeof(done) <= sizeof(void*));
  start(done);
  struct Release {
    Pending* p;
    ~Release() { p->release(); }
  } release{pending};
  std::lock_guard lock(pending->mu);
  if (pending->early) return pending->answer(*pending->early, res);
  pending->reply = req.defer();
  pending->deferred = true;
}

template <class Answer>
void decide(service::Service& service, const server::http::Request& req, server::http::Response& res,
            service::CheckRequest request, bool charge, Answer answer) {
  answer_when_done<service::CheckResult>(
      req, res,
      [&](auto done) {
        if (charge) {
          if (service.wants_trace_context()) request.trace = trace_parent(req);
          service.check_async(std::move(request), done);
        } else {
          service.dry_run_async(std::move(request), done);
        }
      },
      std::move(answer));
}

}  // namespace rk::server::api
