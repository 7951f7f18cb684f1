#include "library/reservations.h"

#include <utility>

#include "base/hex.h"
#include "library/random_id.h"
#include "ratekeeper/limiter.h"

namespace rk::library {

std::string amount_error(std::string_view field, std::uint64_t amount) {
  if (amount <= kMaxReservationAmount) return "";
  return std::string(field) + ": " + std::to_string(amount) + " is above the largest amount, 2^53 (" +
         std::to_string(kMaxReservationAmount) + ")";
}

std::string ttl_error(Nanos ttl) {
  if (ttl >= std::chrono::milliseconds(1) && ttl <= kMaxReservationTtl) return "";
  return "ttl: " + std::to_string(ttl.count()) + " ns is not between 1 ms and 24 h";
}

Reservations::Shard& Reservations::shard_of(std::string_view id) {
  // The id's first digit: random, so the shards fill evenly.
  const int digit = id.empty() ? 0 : base::hex_value(id[0]);
  return shards_[static_cast<std::size_t>(digit < 0 ? 0 : digit) % kShards];
}

std::optional<std::string> Reservations::claim(std::int64_t now) {
  std::string id = random_id();
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mu);
  if (s.entries.size() >= per_shard_) {
    std::erase_if(s.entries, [now](const auto& kv) { return kv.second.expires_ns <= now; });
    if (s.entries.size() >= per_shard_) return std::nullopt;
  }
  return id;
}

void Reservations::add(const std::string& id, Entry e) {
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mu);
  s.entries.emplace(id, std::move(e));
}

std::optional<Reservations::Entry> Reservations::take(std::string_view key, std::string_view id, std::int64_t now) {
  if (!random_id_shaped(id)) return std::nullopt;
  Shard& s = shard_of(id);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(std::string(id));
  if (it == s.entries.end()) return std::nullopt;
  if (it->second.expires_ns <= now) {
    s.entries.erase(it);  // settled as reserved: nothing to change
    return std::nullopt;
  }
  if (it->second.key != key) return std::nullopt;  // another key's: it stays, for the key it belongs to
  Entry e = std::move(it->second);
  s.entries.erase(it);
  return e;
}

std::size_t Reservations::sweep(std::int64_t now) {
  std::size_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += std::erase_if(s.entries, [now](const auto& kv) { return kv.second.expires_ns <= now; });
  }
  return n;
}

}  // namespace rk::library
