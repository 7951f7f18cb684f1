// service/reservations.cc: reserve and settle (service.h): the descriptor matched as a check's is, the estimate
// reserved on the rule's limiter in process (Limiter::reserve) or in the remote store (RemoteStore::reserve, one
// atomic step there, so that any server of a fleet settles what another reserved), and settled where it was
// reserved at what was used. A domain shared in batches (sharing: batched) holds no reservations: a bad request
// naming it, since a batch carries hits and cannot carry a refund back.
#include "library/random_id.h"
#include "service/service.h"
#include "service/wait_for.h"

namespace rk::service {

void Service::reserve_async(ReserveRequest request, ReserveDone done) {
  reservation(std::move(request), true, std::move(done));
}
void Service::settle_async(ReserveRequest request, ReserveDone done) {
  reservation(std::move(request), false, std::move(done));
}

ReserveResult Service::reserve(const ReserveRequest& request) {
  return wait_for<ReserveResult>([&](ReserveDone done) { reserve_async(request, std::move(done)); });
}

ReserveResult Service::settle(const ReserveRequest& request) {
  return wait_for<ReserveResult>([&](ReserveDone done) { settle_async(request, std::move(done)); });
}

void Service::reservation(ReserveRequest request, bool reserve, ReserveDone done) {
  // The same caps as a check's (one descriptor).
  CheckRequest as_check{.domain = request.domain, .descriptors = {CheckDescriptor{.entries = request.entries}}};
  if (auto e = validate(as_check)) {
    if (e->field.starts_with("descriptors[0].")) e->field = "descriptor." + e->field.substr(15);
    return done(std::move(*e));
  }
  const char* amount_field = reserve ? "estimate" : "actual";
  if (request.amount > kMaxReservationAmount) {
    return done(RequestError{amount_field, std::to_string(request.amount) + " is over the limit of " +
                                               std::to_string(kMaxReservationAmount)});
  }
  if (reserve && (request.ttl < std::chrono::milliseconds(1) || request.ttl > kMaxReservationTtl)) {
    return done(RequestError{"ttl_seconds", "must be from 0.001 to 86400"});
  }
  if (!reserve && request.reservation.empty()) return done(RequestError{"reservation", "must not be empty"});
  auto set = rules_.current();
  std::vector<rules::Entry> entries;
  for (const auto& [k, v] : request.entries) entries.push_back({k, v});
  const rules::Match m = set ? set->match(request.domain, entries) : rules::Match{};
  const rules::DomainConfig* domain = set ? set->domain(request.domain) : nullptr;
  if (!m.rule || !m.rule->limiter) {
    return done(RequestError{"descriptor", "matches no rate limit of domain '" + request.domain +
                                               "' (unlimited, blocked and concurrency limits hold no reservations)"});
  }
  if (uses_batcher(domain)) {
    return done(RequestError{"descriptor", "domain '" + request.domain +
                                               "' shares its counts in batches (sharing: batched), which cannot "
                                               "give a refund back: reserve in a domain of its own"});
  }
  ReserveAnswer answer{.name = m.rule->name, .ttl = request.ttl};
  const Nanos now = clock_->now();
  if (uses_remote(domain)) {
    std::string key = m.rule->store_prefix + m.counter_key;
    // 128 random bits, made here: what settling it in the remote store takes.
    if (reserve) answer.reservation = library::random_id();
    std::string id = reserve ? answer.reservation : request.reservation;
    // `set` kept: the rule's name and spec stay valid while the store answers.
    auto finish = [answer = std::move(answer), done = std::move(done),
                   set](store::remote::ReservationResult r) mutable {
      answer.done = r.status == store::remote::RemoteResult::Status::kOk && r.done;
      answer.decision = r.decision;
      answer.reserved = r.reserved;
      if (r.status != store::remote::RemoteResult::Status::kOk) {
        answer.store_error = r.error.empty() ? "the store did not answer" : r.error;
      }
      if (!answer.done) answer.reservation.clear();
      done(std::move(answer));
    };
    const LimitSpec* spec = &m.rule->limiter->spec();
    if (reserve) {
      options_.remote->reserve(spec, std::move(key), std::move(id), request.amount, request.ttl, now,
                               std::move(finish));
    } else {
      options_.remote->settle(spec, std::move(key), std::move(id), request.amount, now, std::move(finish));
    }
    return;
  }
  try {
    if (reserve) {
      Reservation r = m.rule->limiter->reserve_at(m.counter_key, now, request.amount, request.ttl);
      answer.done = r.decision.allowed;
      answer.decision = r.decision;
      answer.reservation = std::move(r.id);
    } else {
      const Settlement s = m.rule->limiter->settle_at(m.counter_key, request.reservation, now, request.amount);
      answer.done = s.settled;
      answer.decision = s.decision;
      answer.reserved = s.reserved;
    }
  } catch (const InvalidArgument& e) {
    return done(RequestError{"descriptor", e.what()});
  }
  done(std::move(answer));
}

}  // namespace rk::service
