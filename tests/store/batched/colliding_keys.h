// Keys an attacker computes offline to collide in a map hashed by std::hash, for the batched store's hostile-key
// tests (key_table_test.cc shows the attack on a plain map; key_table_redis_test.cc sends the keys to the store).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rk::store::batched::attack {

inline constexpr std::size_t kAttackKeys = 1000;

// The bucket count a std::unordered_map reaches holding `n` keys (its growth policy, whatever the hash).
inline std::size_t buckets_for(std::size_t n) {
  std::unordered_map<std::string, int> m;
  for (std::size_t i = 0; i < n; ++i) m.emplace(std::to_string(i), 0);
  return m.bucket_count();
}

// What an attacker computes offline against a map hashed by std::hash (its seed is fixed and public): keys whose
// hash falls in bucket 0 of a map holding `count` keys, about one candidate in bucket_count.
inline std::vector<std::string> colliding_keys(std::size_t count) {
  const std::size_t buckets = buckets_for(count);
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; keys.size() < count; ++i) {
    std::string key = "rk:t:attacker-" + std::to_string(i);
    if (std::hash<std::string>{}(key) % buckets == 0) keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace rk::store::batched::attack
