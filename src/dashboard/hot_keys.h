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
// Memory: `capacity` slots, each a key (at most the store's key length) and four numbers; never more.
// Thread safety: add() and top() may be called from any number of threads; one mutex guards the slots, held for
// one pass over them.
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
  std::size_t capacity = 64;                  // counters kept; top() can name at most this many keys
  Nanos half_life = std::chrono::seconds(10);  // how fast past attempts stop counting
};

struct HotKey {
  std::string key;
  double hits = 0;      // decayed count of attempts at `now`: about the attempts of the last half-life / ln 2
  double error = 0;     // hits may be over the true count by at most this much (space-saving's bound)
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
  };
  double weight(Nanos t) const;  // under mu_
  void rescale(Nanos now);       // under mu_

  HotKeysOptions options_;
  double per_ns_;  // ln 2 / half_life, per nanosecond
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // under mu_; at most options_.capacity
  Nanos landmark_{0};        // under mu_
};

}  // namespace rk::dashboard
