// core/windows.h: counters over windows aligned to time 0 (the Unix epoch for the system clock).
//
// Fixed window: a count per window; an attempt of cost c is allowed when count + c <= limit. With count_refused
// (envoyproxy/ratelimit's behaviour) refused attempts are added too, which changes nothing within the window but
// what `remaining` and later costs see, and that the count can pass the limit: then even cost 0 is refused (Envoy's
// token-quota check, hits_addend 0, asks exactly that).
//
// Sliding window counter: the current window's count plus the previous window's weighted by how much of it the
// sliding window still overlaps, rounded down: count = curr + floor(prev * (W - elapsed) / W). The attempt is
// allowed when count + c <= limit. Integer arithmetic throughout, so the weighting is exact.
//
// A clock that goes back into an earlier window keeps counting in the latest window it has seen: going back
// never forgives.
//
// The sliding window's state is 16 bytes (a 40-byte entry in the in-process store): the window's index
// q = floor(start / W) instead of its start, in 64 - floor(log2 W) bits (every index an int64 time has; 48 from
// 2^16 ns on), and the two counts in the rest, each in at least sliding_window_max_count(W)'s bits. Its layout depends
// on W alone, so a state means something only to limiters of its window (the state file and the batched snapshots are
// per rule). All-zero is fresh.
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "core/charge.h"
#include "core/derived_params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct FixedWindowState {
  std::int64_t start_ns = kMinI64;
  std::uint64_t count = 0;
};

struct SlidingWindowState {
  std::uint64_t lo = 0;  // the bits of q (biased: 0 is the index below every window), curr and prev, low first
  std::uint64_t hi = 0;
};
static_assert(sizeof(SlidingWindowState) == 16);

// The largest count a sliding window's state holds with windows of `window_ns` (> 0): 2^32 - 1 at 1 ns, rising
// by one bit each time the window doubles twice, up to 2^40 - 1 (above kMaxLimit) from 65.536 µs on.
// A decision never counts past the limit, so it is exact for every limit up to this (validation refuses more);
// absorbed hits saturate at it, where the 24-byte state saturated at 2^64 - 1.
std::uint64_t sliding_window_max_count(std::int64_t window_ns);

Decision fixed_window_decide(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t cost);
void fixed_window_absorb(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t hits);
bool fixed_window_forgettable(const WindowParams& p, const FixedWindowState& s, std::int64_t now);
// Gives back `amount` of a charge (a reservation settled for less): the count goes down, not below 0, if the window
// is still the one the charge went into; after its turn there is nothing to give back.
void fixed_window_refund(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t amount,
                         const Charge& charge);

Decision sliding_window_decide(const WindowParams& p, SlidingWindowState& s, std::int64_t now, std::uint64_t cost);
// sliding_window_decide without reset_after (left 0), for callers that do not read it (rk::Fields::kAllButResetAfter);
// the state and every other field are the same.
Decision sliding_window_decide_brief(const WindowParams& p, SlidingWindowState& s, std::int64_t now,
                                     std::uint64_t cost);
void sliding_window_absorb(const WindowParams& p, SlidingWindowState& s, std::int64_t now, std::uint64_t hits);
bool sliding_window_forgettable(const WindowParams& p, const SlidingWindowState& s, std::int64_t now);
// Gives back `amount` of a charge: from the count of the window the charge went into, the current or (once the
// window has turned) the previous one, not below 0; older charges no longer count.
void sliding_window_refund(const WindowParams& p, SlidingWindowState& s, std::int64_t now, std::uint64_t amount,
                           const Charge& charge);

}  // namespace rk::core
