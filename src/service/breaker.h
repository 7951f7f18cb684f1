// service/breaker.h: the circuit breaker that keeps a dead remote store from costing each request a timeout.
//
// Thread safety: CircuitBreaker is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "ratekeeper/clock.h"

namespace rk::service {

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

  bool allow();                 // false: answer by policy without asking the store
  void record(bool available);  // the outcome of a call that allow() let through
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

}  // namespace rk::service
