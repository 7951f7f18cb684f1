#include "server/grpc/health_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include "grpc/health/v1/health.grpc.pb.h"
#include "server/grpc/unary_call.h"

namespace rk::server::grpc {

namespace {
namespace hv = ::grpc::health::v1;
using ServingStatus = hv::HealthCheckResponse::ServingStatus;
}  // namespace

struct HealthService::Impl {
  class WatchCall;

  Impl(std::vector<std::string> services, int max) : names(std::move(services)), max_watchers(max) {}

  // Check, as UnaryCall answers it.
  template <class Finish>
  void answer(const ::grpc::ServerContext&, const hv::HealthCheckRequest& request, hv::HealthCheckResponse& response,
              Finish finish) {
    if (!known(request.service())) return finish(::grpc::Status(::grpc::StatusCode::NOT_FOUND, "unknown service"));
    {
      std::lock_guard lock(mu);
      response.set_status(status_of(true));
    }
    finish(::grpc::Status::OK);
  }

  bool known(const std::string& name) const {
    return name.empty() || std::find(names.begin(), names.end(), name) != names.end();
  }
  ServingStatus status_of(bool is_known) const {  // mu held
    if (!is_known) return hv::HealthCheckResponse::SERVICE_UNKNOWN;
    return serving ? hv::HealthCheckResponse::SERVING : hv::HealthCheckResponse::NOT_SERVING;
  }
  bool add(WatchCall* call);  // false: max_watchers are open already
  void remove(WatchCall* call);

  hv::Health::AsyncService async;
  const std::vector<std::string> names;
  const std::size_t max_watchers;
  std::mutex mu;
  bool serving = false;           // guarded by mu
  bool shutting_down = false;     // guarded by mu
  std::set<WatchCall*> watchers;  // guarded by mu: streams started and not yet done
};

// One Watch stream. Events: the request (proceed, first time), each Write or Finish completing (proceed, later;
// at most one in flight), the call being done (done_, once, only for a call that started), and notify() from
// set_serving's thread. It deletes itself once done and with nothing in flight.
class HealthService::Impl::WatchCall final : public CqTag {
 public:
  WatchCall(Impl& owner, ::grpc::ServerCompletionQueue* queue) : impl_(owner), cq_(queue), writer_(&context_) {
    context_.AsyncNotifyWhenDone(&done_);
    impl_.async.RequestWatch(&context_, &request_, &writer_, cq_, cq_, this);
  }

  void proceed(bool ok) override {
    if (!started_) {
      if (!ok) {  // shut down before a request came: no done event follows
        delete this;
        return;
      }
      started_ = true;
      new WatchCall(impl_, cq_);
      known_ = impl_.known(request_.service());
      hv::HealthCheckRequest().Swap(&request_);  // frees the name, which may be as large as a message can be
      if (!impl_.add(this)) refuse();
      return;
    }
    std::unique_lock lock(mu_);
    in_flight_ = false;
    if (!ok) broken_ = true;  // the client is gone; the done event follows
    advance();
    if (done_seen_ && !in_flight_) {
      lock.unlock();
      delete this;
    }
  }

  // Sends `status` unless it is what the client last got; `finish`: then end the stream. Called with impl_.mu held.
  void notify(ServingStatus status, bool finish) {
    std::lock_guard lock(mu_);
    pending_ = status;
    finish_ = finish_ || finish;
    advance();
  }

  bool known() const { return known_; }

 private:
  struct Done final : CqTag {
    explicit Done(WatchCall* c) : call(c) {}
    void proceed(bool) override { call->on_done(); }
    WatchCall* call;
  };

  void on_done() {
    impl_.remove(this);
    std::unique_lock lock(mu_);
    done_seen_ = true;
    if (!in_flight_) {
      lock.unlock();
      delete this;
    }
  }

  void refuse() {
    std::lock_guard lock(mu_);
    finished_ = true;
    in_flight_ = true;
    writer_.Finish(::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED, "too many health Watch streams (" +
                                                                              std::to_string(impl_.max_watchers) +
                                                                              "); use Check, or try again later"),
                   this);
  }

  void advance() {  // mu_ held
    if (in_flight_ || done_seen_ || broken_ || finished_) return;
    if (pending_ && pending_ != last_sent_) {
      response_.set_status(*pending_);
      last_sent_ = pending_;
      pending_.reset();
      in_flight_ = true;
      writer_.Write(response_, this);
    } else if (finish_) {
      finished_ = true;
      in_flight_ = true;
      writer_.Finish(::grpc::Status(::grpc::StatusCode::UNAVAILABLE, "server shutting down"), this);
    }
  }

  Impl& impl_;
  ::grpc::ServerCompletionQueue* cq_;
  ::grpc::ServerContext context_;
  hv::HealthCheckRequest request_;
  hv::HealthCheckResponse response_;
  ::grpc::ServerAsyncWriter<hv::HealthCheckResponse> writer_;
  Done done_{this};
  bool started_ = false;  // only the queue's thread touches it
  bool known_ = false;    // the name asked for is ours; written before the call is shared (add)
  std::mutex mu_;
  std::optional<ServingStatus> pending_;                                         // guarded by mu_
  std::optional<ServingStatus> last_sent_;                                       // guarded by mu_
  bool in_flight_ = false;                                                       // guarded by mu_: a Write or Finish
  bool finish_ = false, finished_ = false, broken_ = false, done_seen_ = false;  // guarded by mu_
};

bool HealthService::Impl::add(WatchCall* call) {
  std::lock_guard lock(mu);
  if (watchers.size() >= max_watchers) return false;
  watchers.insert(call);
  call->notify(status_of(call->known()), shutting_down);
  return true;
}

void HealthService::Impl::remove(WatchCall* call) {
  std::lock_guard lock(mu);
  watchers.erase(call);
}

HealthService::HealthService(std::vector<std::string> services, int max_watchers)
    : impl_(std::make_unique<Impl>(std::move(services), static_cast<std::size_t>(std::max(max_watchers, 0)))) {}

HealthService::~HealthService() = default;

::grpc::Service* HealthService::service() { return &impl_->async; }

void HealthService::start(::grpc::ServerCompletionQueue* cq) {
  UnaryCall<hv::HealthCheckRequest, hv::HealthCheckResponse, Impl, &hv::Health::AsyncService::RequestCheck>::start(
      *impl_, impl_->async, cq);
  new Impl::WatchCall(*impl_, cq);
}

void HealthService::set_serving(bool serving) {
  std::lock_guard lock(impl_->mu);
  if (impl_->shutting_down) return;
  impl_->serving = serving;
  for (Impl::WatchCall* w : impl_->watchers) w->notify(impl_->status_of(w->known()), false);
}

void HealthService::shut_down() {
  std::lock_guard lock(impl_->mu);
  impl_->shutting_down = true;
  impl_->serving = false;
  for (Impl::WatchCall* w : impl_->watchers) w->notify(impl_->status_of(w->known()), true);
}

}  // namespace rk::server::grpc
