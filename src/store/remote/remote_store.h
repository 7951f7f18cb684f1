// store/remote/remote_store.h: a store of limiter state outside the process (Redis), asked asynchronously. The
// service keeps a circuit breaker in front of it (service/breaker.h).
//
//   store.decide({{&spec, "rk:...:key", 1, false}}, now, [](std::vector<RemoteResult> r) { ... });
//
// Thread safety: decide() may be called from any thread; `done` runs once, on any thread (the store's own, or the
// caller's when it fails at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ratekeeper/clock.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk::store::remote {

struct RemoteOp {
  const LimitSpec* spec = nullptr;  // valid until done runs (the caller holds the rule set)
  std::string key;                  // the whole key in the store
  std::uint64_t hits = 1;
  bool peek = false;  // decide without recording
};

struct RemoteResult {
  enum class Status : std::uint8_t {
    kOk,           // `decision` is the store's
    kUnavailable,  // not reached, or no answer in time: counts against the breaker
    kError,        // reached, and it refused this op (a foreign value in the key, say): only this op fails
  };
  Status status = Status::kUnavailable;
  Decision decision;
  std::string error;
};

// The `concurrency` algorithm's answer (core/concurrency.h): an acquire or a release of one lease.
struct LeaseResult {
  RemoteResult::Status status = RemoteResult::Status::kUnavailable;
  bool done = false;            // acquired; released (false: unknown, expired or released, nothing changed)
  std::uint32_t in_flight = 0;  // acquire: the key's leases after it
  Nanos retry_after{0};         // refused acquire: until the first held lease expires
  std::string error;
};

// Reserve and settle's answer (docs/algorithms.md, "Reserve and settle"): one reserve or one settle.
struct ReservationResult {
  RemoteResult::Status status = RemoteResult::Status::kUnavailable;
  bool done = false;           // reserve: allowed, and held; settle: the reservation was held and is settled (false:
                               // unknown, expired, settled, or another key's: nothing changed)
  std::uint64_t reserved = 0;  // settle: the reservation's estimate
  Decision decision;           // reserve: the check of the estimate; settle: the overdraw's charge, or a look after
                               // the refund (as rk::Limiter::settle_at)
  std::string error;
};

class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // One result per op, in order. `now` is the caller's time, used when the store is told to take the caller's
  // clock (`--redis-clock local`); otherwise the store uses its own. Never blocks; `done` is called exactly once.
  virtual void decide(std::vector<RemoteOp> ops, Nanos now, std::function<void(std::vector<RemoteResult>)> done) = 0;
  // Forgets keys; `done` gets, per key, whether it existed (nullopt: unavailable).
  virtual void reset(std::vector<std::string> keys, std::function<void(std::vector<std::optional<bool>>)> done) = 0;
  // A lease `id` (fresh, random) on the key when fewer than max_in_flight unexpired ones are held, expiring after
  // lease_ttl; and its release. A store that cannot hold leases answers kError, saying so.
  virtual void acquire_lease(std::string key, std::string id, std::uint32_t max_in_flight, Nanos lease_ttl, Nanos now,
                             std::function<void(LeaseResult)> done) {
    (void)key, (void)id, (void)max_in_flight, (void)lease_ttl, (void)now;
    done({RemoteResult::Status::kError, false, 0, Nanos{0}, describe() + " cannot hold leases"});
  }
  virtual void release_lease(std::string key, std::string id, Nanos now, std::function<void(LeaseResult)> done) {
    (void)key, (void)id, (void)now;
    done({RemoteResult::Status::kError, false, 0, Nanos{0}, describe() + " cannot hold leases"});
  }
  // Reserve and settle, as rk::Limiter::reserve_at and settle_at, in the store, each one atomic step: reserve
  // charges `estimate` on `key` under *spec as decide() does when it fits (a refused reserve charges nothing, whatever
  // count_refused says) and then holds the reservation `id` (fresh, random: 32 hex digits) for `ttl`; settle takes
  // the reservation `id` of `key` (only that key's) and charges actual - estimate more, recorded even past what is
  // left (a debt, bounded as count_refused bounds it), or gives estimate - actual back (never more than the
  // reservation's charge still holds). `spec` is valid until `done` runs. A store that cannot hold reservations
  // answers kError, saying so.
  virtual void reserve(const LimitSpec* spec, std::string key, std::string id, std::uint64_t estimate, Nanos ttl,
                       Nanos now, std::function<void(ReservationResult)> done) {
    (void)spec, (void)key, (void)id, (void)estimate, (void)ttl, (void)now;
    done({RemoteResult::Status::kError, false, 0, {}, describe() + " cannot hold reservations"});
  }
  virtual void settle(const LimitSpec* spec, std::string key, std::string id, std::uint64_t actual, Nanos now,
                      std::function<void(ReservationResult)> done) {
    (void)spec, (void)key, (void)id, (void)actual, (void)now;
    done({RemoteResult::Status::kError, false, 0, {}, describe() + " cannot hold reservations"});
  }
  virtual std::string describe() const = 0;  // "redis://127.0.0.1:6379", for logs
  // Answers what is in flight as unavailable and stops the store's threads; later calls fail at once. Called
  // once the servers that wait on the store have stopped, before the Service goes.
  virtual void close() = 0;
  // Sends at once whatever the store batches for later (the near cache's counted refusals).
  virtual void flush() {}
  // False when the store keeps a breaker per server of its own (a Redis Cluster: one dead shard must not stop the
  // others being asked); then the Service keeps none.
  virtual bool wants_breaker() const { return true; }
  // TLS handshakes with the store that failed (a certificate refused), for the metric.
  virtual std::uint64_t tls_failures() const { return 0; }
  // The client's spins while it awaited answers (--redis-spin): those that met an answer and those that found none
  // before they timed out, for the metric.
  struct Spins {
    std::uint64_t answered = 0, idle = 0;
  };
  virtual Spins spins() const { return {}; }
};

}  // namespace rk::store::remote
