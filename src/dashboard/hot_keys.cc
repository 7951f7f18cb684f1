#include "dashboard/hot_keys.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace rk::dashboard {

namespace {

// Weights up to e^600 leave a double room for 1e40 attempts before the counts overflow; past that, rescale.
constexpr double kMaxExponent = 600;

}  // namespace

HotKeys::HotKeys(HotKeysOptions options) : options_(options) {
  options_.capacity = std::max<std::size_t>(1, options_.capacity);
  const double half_life_ns = std::max(1e6, static_cast<double>(options_.half_life.count()));
  per_ns_ = std::log(2.0) / half_life_ns;
  slots_.reserve(options_.capacity);
}

double HotKeys::weight(Nanos t) const {
  // A clock that goes back weighs as the landmark: never below 1, so that no count is lost to rounding.
  const double dt = static_cast<double>(std::max<std::int64_t>(0, (t - landmark_).count()));
  return std::exp(std::min(dt * per_ns_, kMaxExponent + 100));
}

void HotKeys::rescale(Nanos now) {
  const double w = weight(now);
  for (Slot& s : slots_) {
    s.count /= w;
    s.error /= w;
  }
  landmark_ = now;
}

void HotKeys::add(std::string_view key, bool refused, Nanos now) {
  const std::uint64_t h = std::hash<std::string_view>{}(key);
  std::lock_guard lock(mu_);
  if (slots_.empty()) landmark_ = now;
  if (static_cast<double>((now - landmark_).count()) * per_ns_ > kMaxExponent) rescale(now);
  const double w = weight(now);
  // One pass for both the key and the smallest counter (the first of the smallest), the latter's count kept in a
  // local: this runs on every decision, over every slot when the key is not one of them.
  Slot* smallest = nullptr;
  double least = 0;
  for (Slot& s : slots_) {
    if (s.hash == h && s.key == key) {
      s.count += w;
      s.last_refused = refused;
      s.last_seen = now;
      return;
    }
    if (!smallest || s.count < least) {
      smallest = &s;
      least = s.count;
    }
  }
  if (slots_.size() < options_.capacity) {
    slots_.push_back({h, std::string(key), w, 0, refused, now});
    return;
  }
  // Space-saving: the new key takes the smallest counter over, and its count.
  smallest->hash = h;
  smallest->key.assign(key);
  smallest->error = smallest->count;
  smallest->count += w;
  smallest->last_refused = refused;
  smallest->last_seen = now;
}

std::vector<HotKey> HotKeys::top(std::size_t n, Nanos now) const {
  std::vector<HotKey> out;
  {
    std::lock_guard lock(mu_);
    const double w = weight(now);
    out.reserve(slots_.size());
    for (const Slot& s : slots_) out.push_back({s.key, s.count / w, s.error / w, s.last_refused, s.last_seen});
  }
  const std::size_t k = std::min(n, out.size());
  std::partial_sort(
      out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(),
      [](const HotKey& a, const HotKey& b) { return a.hits != b.hits ? a.hits > b.hits : a.key < b.key; });
  out.resize(k);
  return out;
}

}  // namespace rk::dashboard
