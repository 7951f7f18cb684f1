// dashboard/hot_keys.h: the hottest keys of one rule, in bounded memory: a space-saving sketch (Metwally, Agrawal,
// El Abbadi, "Efficient computation of frequent and top-k elements in data streams") whose counts decay
// exponentially, so that "hot" means recently busy rather than busy once.
//
//   rk::dashboard::HotKeys hot({.capacity = 64, .half_life = std::chrono::seconds(10)});
//   hot.add("203.0.113.7", /*refused=*/false, now);   // on every decision of the rule
//   for (const auto& k : hot.top(10, now)) show(k.key, k.hits);
//
// Space-saving keeps `capacity` counters. A key already counted adds its weight; a new key, when every counter is
// taken, replaces the smallest and inherits its count (remembered as `error`, the most by which the new key's count
// may be over its true one). Any key whose true (decayed) count is above total/capacity is guaranteed a counter,
// so a key that sends a real share of the traffic is never missed, however many other keys there are.
//
// Decay is forward decay: an attempt at time t weighs 2^((t - landmark)/half_life), and every count is read
// divided by the weight of `now`, so nothing has to be touched as time passes. When weights grow large, every
// counter is rescaled once and the landmark moves to now.
//
// add() runs on every decision, so it finds a key through a hash index of the slots and the smallest counter at the
// top of a min-heap of them (counts only grow, and a rescale keeps their order): O(log capacity), not a pass over
// every slot.
//
// Memory: `capacity` slots, each a key (at most the store's key length) and four numbers, and 12-20 bytes of index
// and heap per slot; never more.
// Thread safety: add() and top() may be called from any number of threads; one mutex guards the slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ratekeeper/units.h"

namespace rk::dashboard {

struct HotKeysOptions {
  std::size_t capacity = 64;                   // counters kept; top() can name at most this many keys
  Nanos half_life = std::chrono::seconds(10);  // how fast past attempts stop counting
};

struct HotKey {
  std::string key;
  double hits = 0;            // decayed count of attempts at `now`: about the attempts of the last half-life / ln 2
  double error = 0;           // hits may be over the true count by at most this much (space-saving's bound)
  bool last_refused = false;  // the key's last decision was a refusal
  Nanos last_seen{0};
};

class HotKeys {
 public:
  explicit HotKeys(HotKeysOptions options = {});

  void add(std::string_view key, bool refused, Nanos now);
  // The n keys with the highest counts, highest first.
  std::vector<HotKey> top(std::size_t n, Nanos now) const;

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::string key;
    double count = 0;  // in weights relative to landmark_
    double error = 0;
    bool last_refused = false;
    Nanos last_seen{0};
    std::uint32_t at = 0;  // its place in heap_
  };
  // All under mu_.
  double weight(Nanos t) const;
  void rescale(Nanos now);
  std::size_t home(std::uint64_t hash) const { return hash & (index_.size() - 1); }
  void unindex(std::uint32_t slot);
  void sift_up(std::size_t at);
  void sift_down(std::size_t at);
  void place(std::size_t at, std::uint32_t slot);

  HotKeysOptions options_;
  double per_ns_;  // ln 2 / half_life, per nanosecond
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // under mu_; at most options_.capacity
  // Under mu_: the slots by key hash, linear probing (slot + 1; 0 empty), a power of two at least twice the
  // capacity; and the slots as a min-heap by count.
  std::vector<std::uint32_t> index_;
  std::vector<std::uint32_t> heap_;
  Nanos landmark_{0};  // under mu_
};

}  // namespace rk::dashboard
