// server/app/remote.h: a store of limiter state outside the process (Redis), asked asynchronously, and the circuit
// breaker that keeps a dead one from costing each request a timeout.
//
//   store.decide({{&spec, "rk:...:key", 1, false}}, now, [](std::vector<RemoteResult> r) { ... });
//
// Thread safety: decide() may be called from any thread; `done` runs once, on any thread (the store's own, or the
// caller's when it fails at once). CircuitBreaker is thread-safe.
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

namespace rk::app {

struct RemoteOp {
  const LimitSpec* spec = nullptr;  // valid until done runs (the caller holds the rule set)
  std::string key;                  // the whole key in the store
  std::uint64_t hits = 1;
  bool peek = false;                // decide without recording
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

class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // One result per op, in order. `now` is the caller's time, used when the store is told to take the caller's
  // clock (`--redis-clock local`); otherwise the store uses its own. Never blocks; `done` is called exactly once.
  virtual void decide(std::vector<RemoteOp> ops, Nanos now, std::function<void(std::vector<RemoteResult>)> done) = 0;
  // Forgets keys; `done` gets, per key, whether it existed (nullopt: unavailable).
  virtual void reset(std::vector<std::string> keys, std::function<void(std::vector<std::optional<bool>>)> done) = 0;
  virtual std::string describe() const = 0;  // "redis://127.0.0.1:6379", for logs
  // Answers what is in flight as unavailable and stops the store's threads; later calls fail at once. Called
  // once the servers that wait on the store have stopped, before the Service goes.
  virtual void close() = 0;
  // Sends at once whatever the store batches for later (the near cache's counted refusals).
  virtual void flush() {}
  // False when the store keeps a breaker per server of its own (a Redis Cluster: one dead shard must not stop the
  // others being asked); then the Service keeps none.
  virtual bool wants_breaker() const { return true; }
};

struct BreakerOptions {
  int failures_to_open = 5;                         // consecutive unavailable answers
  Nanos open_for = std::chrono::milliseconds(500);  // first wait before a probe; doubles up to max_open_for
  Nanos max_open_for = std::chrono::seconds(10);
};

// Closed: every call goes to the store. Open: none does, until open_for has passed; then half-open: one call
// probes, and its outcome closes the breaker or opens it again for twice as long.
class CircuitBreaker {
 public:
  enum class State : std::uint8_t { kClosed = 0, kOpen = 1, kHalfOpen = 2 };

  CircuitBreaker(std::shared_ptr<const Clock> clock, BreakerOptions options = {});

  bool allow();                    // false: answer by policy without asking the store
  void record(bool available);     // the outcome of a call that allow() let through
  State state() const;
  std::uint64_t opened() const { return opened_.load(std::memory_order_relaxed); }  // times it opened

 private:
  std::shared_ptr<const Clock> clock_;
  BreakerOptions options_;
  mutable std::mutex mu_;
  State state_ = State::kClosed;  // under mu_
  int failures_ = 0;              // under mu_
  Nanos wait_{0};                 // under mu_: the current open period
  Nanos until_{0};                // under mu_: open until then
  bool probing_ = false;          // under mu_: a half-open probe is out
  std::atomic<std::uint64_t> opened_{0};
};

std::string_view breaker_state_name(CircuitBreaker::State s);  // "closed", "open", "half_open"

}  // namespace rk::app
