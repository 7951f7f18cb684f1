// service/leases.cc: the `concurrency` algorithm's acquire and release (service.h): the descriptor matched as a
// check's is, its leases held by the rule's ConcurrencyLimiter in process or by the remote store (a sorted set in
// Redis) when the domain uses one.
#include "library/random_id.h"
#include "service/service.h"
#include "service/wait_for.h"

namespace rk::service {

void Service::acquire_async(LeaseRequest request, LeaseDone done) { lease(std::move(request), true, std::move(done)); }
void Service::release_async(LeaseRequest request, LeaseDone done) { lease(std::move(request), false, std::move(done)); }

LeaseResult Service::acquire(const LeaseRequest& request) {
  return wait_for<LeaseResult>([&](LeaseDone done) { acquire_async(request, std::move(done)); });
}

LeaseResult Service::release(const LeaseRequest& request) {
  return wait_for<LeaseResult>([&](LeaseDone done) { release_async(request, std::move(done)); });
}

void Service::lease(LeaseRequest request, bool acquire, LeaseDone done) {
  // The same caps as a check's (one descriptor).
  CheckRequest as_check{.domain = request.domain, .descriptors = {CheckDescriptor{.entries = request.entries}}};
  if (auto e = validate(as_check)) {
    if (e->field.starts_with("descriptors[0].")) e->field = "descriptor." + e->field.substr(15);
    return done(std::move(*e));
  }
  if (!acquire && request.lease.empty()) return done(RequestError{"lease", "must not be empty"});
  auto set = rules_.current();
  std::vector<rules::Entry> entries;
  for (const auto& [k, v] : request.entries) entries.push_back({k, v});
  const rules::Match m = set ? set->match(request.domain, entries) : rules::Match{};
  if (!m.rule || !m.rule->limit->concurrency) {
    return done(RequestError{"descriptor", "matches no concurrency limit of domain '" + request.domain + "'"});
  }
  const ConcurrencySpec& spec = *m.rule->limit->concurrency;
  LeaseAnswer answer{.name = m.rule->name, .max_in_flight = spec.max_in_flight, .lease_ttl = spec.lease_ttl};
  const Nanos now = clock_->now();
  if (!uses_remote(set->domain(request.domain))) {
    if (acquire) {
      Lease l = m.rule->leases->acquire_at(m.counter_key, now);
      answer.done = static_cast<bool>(l);
      answer.in_flight = l.in_flight();
      answer.retry_after = l.retry_after();
      answer.lease = l.detach();
    } else {
      answer.done = m.rule->leases->release_at(m.counter_key, request.lease, now);
    }
    return done(std::move(answer));
  }
  std::string key = m.rule->store_prefix + m.counter_key;
  if (acquire) answer.lease = library::random_id();  // 128 random bits: what releasing it in the remote store takes
  std::string id = acquire ? answer.lease : request.lease;
  // `set` kept: the rule's name and spec stay valid while the store answers.
  auto finish = [answer = std::move(answer), done = std::move(done), set](store::remote::LeaseResult r) mutable {
    answer.done = r.status == store::remote::RemoteResult::Status::kOk && r.done;
    answer.in_flight = r.in_flight;
    answer.retry_after = r.retry_after;
    if (r.status != store::remote::RemoteResult::Status::kOk) {
      answer.store_error = r.error.empty() ? "the store did not answer" : r.error;
    }
    if (!answer.done) answer.lease.clear();
    done(std::move(answer));
  };
  if (acquire) {
    options_.remote->acquire_lease(std::move(key), std::move(id), spec.max_in_flight, spec.lease_ttl, now,
                                   std::move(finish));
  } else {
    options_.remote->release_lease(std::move(key), std::move(id), now, std::move(finish));
  }
}

}  // namespace rk::service
