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
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "core/params.h"
#include "ratekeeper/decision.h"

namespace rk::core {

struct FixedWindowState {
  std::int64_t start_ns = kMinI64;
  std::uint64_t count = 0;
};

struct SlidingWindowState {
  std::int64_t start_ns = kMinI64;  // start of the current window
  std::uint64_t curr = 0;
  std::uint64_t prev = 0;
};

Decision fixed_window_decide(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t cost);
void fixed_window_absorb(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t hits);
bool fixed_window_forgettable(const WindowParams& p, const FixedWindowState& s, std::int64_t now);

Decision sliding_window_decide(const WindowParams& p, SlidingWindowState& s, std::int64_t now, std::uint64_t cost);
void sliding_window_absorb(const WindowParams& p, SlidingWindowState& s, std::int64_t now, std::uint64_t hits);
bool sliding_window_forgettable(const WindowParams& p, const SlidingWindowState& s, std::int64_t now);

}  // namespace rk::core
