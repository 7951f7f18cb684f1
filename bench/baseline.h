// bench/baseline.h: the store a careful engineer writes first — one std::mutex, a std::unordered_map (with
// heterogeneous lookup, so a lookup allocates nothing) and a std::list for LRU order — around the same EARRRL
// function ratekeeper uses. ratekeeper's store is measured against it in the same run.
#pragma once

#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/earrrl.h"

namespace rk::bench {

class BaselineStore {
 public:
  BaselineStore(const core::EarrrlParams& p, std::size_t capacity) : params_(p), capacity_(capacity) {}

  Decision check(std::string_view key, std::int64_t now, std::uint64_t cost = 1) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      if (index_.size() >= capacity_) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
      }
      lru_.emplace_front(std::string(key), core::EarrrlState{});
      it = index_.emplace(lru_.front().first, lru_.begin()).first;
    } else if (it->second != lru_.begin()) {
      lru_.splice(lru_.begin(), lru_, it->second);
    }
    return core::earrrl_decide(params_, it->second->second, now, cost);
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using List = std::list<std::pair<std::string, core::EarrrlState>>;

  core::EarrrlParams params_;
  std::size_t capacity_;
  std::mutex mu_;
  List lru_;
  std::unordered_map<std::string, List::iterator, Hash, std::equal_to<>> index_;
};

}  // namespace rk::bench
