#include "service/breaker.h"

#include <algorithm>

namespace rk::service {

CircuitBreaker::CircuitBreaker(std::shared_ptr<const Clock> clock, BreakerOptions options)
    : clock_(std::move(clock)), options_(options), wait_(options.open_for) {}

bool CircuitBreaker::allow() {
  std::lock_guard lock(mu_);
  switch (state_) {
    case State::kClosed: return true;
    case State::kOpen:
      if (clock_->now() < until_) return false;
      state_ = State::kHalfOpen;
      probing_ = true;
      return true;
    case State::kHalfOpen:
      if (probing_) return false;
      probing_ = true;
      return true;
  }
  return true;
}

void CircuitBreaker::record(bool available) {
  std::lock_guard lock(mu_);
  if (available) {
    state_ = State::kClosed;
    failures_ = 0;
    probing_ = false;
    wait_ = options_.open_for;
    return;
  }
  if (state_ == State::kHalfOpen) {  // the probe failed: open again, for longer
    wait_ = std::min(options_.max_open_for, wait_ * 2);
  } else if (state_ == State::kOpen || ++failures_ < options_.failures_to_open) {
    return;  // already open (a call let through before it opened), or not yet enough failures
  }
  state_ = State::kOpen;
  probing_ = false;
  until_ = clock_->now() + wait_;
  opened_.fetch_add(1, std::memory_order_relaxed);
}

CircuitBreaker::State CircuitBreaker::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

std::string_view breaker_state_name(CircuitBreaker::State s) {
  switch (s) {
    case CircuitBreaker::State::kClosed: return "closed";
    case CircuitBreaker::State::kOpen: return "open";
    case CircuitBreaker::State::kHalfOpen: return "half_open";
  }
  return "closed";
}

}  // namespace rk::service
