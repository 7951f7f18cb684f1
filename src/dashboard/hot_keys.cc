#include "dashboard/hot_keys.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

namespace rk::dashboard {

namespace {

// Weights up to e^600 leave a double room for 1e40 attempts before the counts overflow; past that, rescale.
constexpr double kMaxExponent = 600;

}  // namespace

HotKeys::HotKeys(HotKeysOptions options) : options_(options) {
  options_.capacity = std::clamp<std::size_t>(options_.capacity, 1, std::numeric_limits<std::uint32_t>::max() / 4);
  const double half_life_ns = std::max(1e6, static_cast<double>(options_.half_life.count()));
  per_ns_ = std::log(2.0) / half_life_ns;
  slots_.reserve(options_.capacity);
  heap_.reserve(options_.capacity);
  index_.resize(std::bit_ceil(2 * options_.capacity));
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
  std::size_t i = home(h);
  for (; index_[i] != 0; i = (i + 1) & (index_.size() - 1)) {
    Slot& s = slots_[index_[i] - 1];
    if (s.hash == h && s.key == key) {
      s.count += w;
      s.last_refused = refused;
      s.last_seen = now;
      return sift_down(s.at);
    }
  }
  if (slots_.size() < options_.capacity) {
    const auto slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back({h, std::string(key), w, 0, refused, now, 0});
    index_[i] = slot + 1;
    heap_.push_back(slot);
    slots_[slot].at = static_cast<std::uint32_t>(heap_.size() - 1);
    return sift_up(heap_.size() - 1);
  }
  // Space-saving: the new key takes the smallest counter over, and its count.
  const std::uint32_t slot = heap_.front();
  Slot& s = slots_[slot];
  unindex(slot);
  i = home(h);
  while (index_[i] != 0) i = (i + 1) & (index_.size() - 1);
  index_[i] = slot + 1;
  s.hash = h;
  s.key.assign(key);
  s.error = s.count;
  s.count += w;
  s.last_refused = refused;
  s.last_seen = now;
  sift_down(0);
}

// Removes a slot from the index, moving back the entries after it that its place let probe further (backward-shift
// deletion, so that linear probing needs no tombstones).
void HotKeys::unindex(std::uint32_t slot) {
  const std::size_t mask = index_.size() - 1;
  std::size_t gap = home(slots_[slot].hash);
  while (index_[gap] != slot + 1) gap = (gap + 1) & mask;
  for (std::size_t j = (gap + 1) & mask; index_[j] != 0; j = (j + 1) & mask) {
    // The entry at j may fill the gap if its home is not within (gap, j], cyclically.
    if (((j - home(slots_[index_[j] - 1].hash)) & mask) >= ((j - gap) & mask)) {
      index_[gap] = index_[j];
      gap = j;
    }
  }
  index_[gap] = 0;
}

void HotKeys::place(std::size_t at, std::uint32_t slot) {
  heap_[at] = slot;
  slots_[slot].at = static_cast<std::uint32_t>(at);
}

void HotKeys::sift_up(std::size_t at) {
  const std::uint32_t slot = heap_[at];
  while (at > 0) {
    const std::size_t parent = (at - 1) / 2;
    if (slots_[heap_[parent]].count <= slots_[slot].count) break;
    place(at, heap_[parent]);
    at = parent;
  }
  place(at, slot);
}

void HotKeys::sift_down(std::size_t at) {
  const std::uint32_t slot = heap_[at];
  const std::size_t n = heap_.size();
  while (true) {
    std::size_t child = 2 * at + 1;
    if (child >= n) break;
    if (child + 1 < n && slots_[heap_[child + 1]].count < slots_[heap_[child]].count) ++child;
    if (slots_[slot].count <= slots_[heap_[child]].count) break;
    place(at, heap_[child]);
    at = child;
  }
  place(at, slot);
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
