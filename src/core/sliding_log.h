// core/sliding_log.h: the exact sliding window, a log of admitted requests.
//
// The log holds (time, cost) for each admitted request of the last window; an attempt of cost c at `now` is
// allowed when the costs logged in (now - W, now] plus c are at most the limit. Refused attempts are not logged
// (with count_refused they are, the sum up to twice the limit: a debt of one limit, and 2 * limit entries at most),
// and requests at the same nanosecond share one entry, so a key holds at most `limit` entries (validation caps
// the limit at kMaxSlidingLogLimit). The log is a ring buffer that grows and shrinks with the traffic, and no
// buffer at all while it holds one entry or none.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "core/charge.h"
#include "core/derived_params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

// Thread safety: none (a store holds it under its entry lock).
class SlidingLogState {
 public:
  struct Entry {
    std::int64_t t_ns;
    std::uint64_t cost;
  };

  SlidingLogState() = default;
  SlidingLogState(const SlidingLogState& other);
  SlidingLogState& operator=(const SlidingLogState& other);
  SlidingLogState(SlidingLogState&& other) noexcept;
  SlidingLogState& operator=(SlidingLogState&& other) noexcept;
  ~SlidingLogState();

  std::uint32_t size() const { return size_; }
  std::uint64_t sum() const { return sum_; }
  Entry at(std::uint32_t i) const { return cap_ == 0 ? Entry{one_t_, sum_} : ring_[(head_ + i) & (cap_ - 1)]; }
  void push(std::int64_t t_ns, std::uint64_t cost);
  void pop_front();
  // Takes up to `amount` off the entry logged at t_ns (if any), dropping it if emptied; the order stays.
  void take_at(std::int64_t t_ns, std::uint64_t amount);
  std::size_t heap_bytes() const { return cap_ * sizeof(Entry); }
  // The most a log under a (valid) `limit` holds on the heap: its ring grown to hold `limit` entries (2 at least),
  // twice as many with count_refused (a debt of one limit).
  static std::size_t max_heap_bytes(std::uint64_t limit, bool count_refused) {
    return std::bit_ceil(std::max<std::uint64_t>(count_refused ? 2 * limit : limit, 2)) * sizeof(Entry);
  }

 private:
  void resize(std::uint32_t cap);
  void release() noexcept;
  void take(SlidingLogState& other) noexcept;

  // With no ring (cap_ 0) the log holds at most one entry, (one_t_, sum_): a key that logs one request a window,
  // the usual client of a per-client limit, then costs no allocation and no second cache miss a decision. A second
  // entry moves it into a ring of 2, and it comes back here when the ring empties.
  union {
    Entry* ring_;
    std::int64_t one_t_ = 0;
  };
  std::uint32_t cap_ = 0;  // the ring's size, a power of two; 0: no ring
  std::uint32_t head_ = 0;
  std::uint32_t size_ = 0;
  std::uint64_t sum_ = 0;
};

Decision sliding_log_decide(const WindowParams& p, SlidingLogState& s, std::int64_t now, std::uint64_t cost);
void sliding_log_absorb(const WindowParams& p, SlidingLogState& s, std::int64_t now, std::uint64_t hits);
bool sliding_log_forgettable(const WindowParams& p, const SlidingLogState& s, std::int64_t now);
// Gives back `amount` of a charge (a reservation settled for less): its own entry, the one logged at the charge's
// time, loses it (an entry shared with requests of the same nanosecond keeps theirs); once that entry has left the
// window there is nothing to give back, and what other requests logged is never taken off.
void sliding_log_refund(const WindowParams& p, SlidingLogState& s, std::int64_t now, std::uint64_t amount,
                        const Charge& charge);

}  // namespace rk::core
