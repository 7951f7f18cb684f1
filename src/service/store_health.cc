// service/store_health.cc: the remote store's health, told once per change: its answers counted (unavailable,
// refused) for the metrics, and a log line when it stops answering, when it answers again, and at most every 10 s
// for a decision it refused.
#include <cstdint>
#include <vector>

#include "logging/log.h"
#include "service/service.h"

namespace rk::service {

// One line when the store stops answering and one when it has answered everything for a second again (a Cluster
// with one shard down answers some keys and not others: that is still "not answering"), never one per request; a
// store error (Redis refused a script) at most every 10 s.
void Service::log_store_health(const store::remote::RemoteResult* unavailable, const store::remote::RemoteResult* error,
                               bool answered) {
  const std::int64_t now = clock_->now().count();
  if (unavailable) {
    remote_stats_.unavailable_ns.store(now, std::memory_order_relaxed);
    if (remote_stats_.reachable.exchange(false, std::memory_order_acq_rel)) {
      logging::log(logging::Level::kError,
                   "the shared store is not answering; each domain's redis_failure policy decides until it does",
                   {{"error", unavailable->error}});
    }
  } else if (answered && !remote_stats_.reachable.load(std::memory_order_acquire) &&
             now - remote_stats_.unavailable_ns.load(std::memory_order_relaxed) >= kNanosPerSecond &&
             !remote_stats_.reachable.exchange(true, std::memory_order_acq_rel)) {
    logging::log(logging::Level::kInfo, "the shared store answers again", {});
  }
  if (error) {
    std::int64_t last = remote_stats_.error_logged_ns.load(std::memory_order_relaxed);
    if (now - last >= 10'000'000'000 &&
        remote_stats_.error_logged_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      logging::log(logging::Level::kError,
                   "the shared store refused a decision; its domain's redis_failure policy answered",
                   {{"error", error->error}});
    }
  }
}

// The remote store's answers counted (unavailable, refused) and its health logged.
void Service::count_remote(const std::vector<store::remote::RemoteResult>& results) {
  std::uint64_t unavailable = 0, errors = 0, answered = 0;
  const store::remote::RemoteResult* first_unavailable = nullptr;
  const store::remote::RemoteResult* first_error = nullptr;
  for (const store::remote::RemoteResult& r : results) {
    if (r.status == store::remote::RemoteResult::Status::kOk) {
      ++answered;
    } else if (r.status == store::remote::RemoteResult::Status::kError) {
      ++errors;
      if (!first_error) first_error = &r;
    } else {
      ++unavailable;
      if (!first_unavailable) first_unavailable = &r;
    }
  }
  remote_stats_.unavailable.fetch_add(unavailable, std::memory_order_relaxed);
  remote_stats_.errors.fetch_add(errors, std::memory_order_relaxed);
  log_store_health(first_unavailable, first_error, answered > 0);
}

}  // namespace rk::service
