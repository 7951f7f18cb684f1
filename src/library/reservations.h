// library/reservations.h: the reservations a Limiter holds between reserve and settle (ratekeeper/limiter.h): for
// each id, the key, the amount charged and when, and when it expires.
//
// Thread safety: each shard's map is read and changed only under its mutex; take() removes an entry in the same
// step that finds it, so a reservation is settled at most once however many settle it at once. Invariants: at most
// about `capacity` entries (capacity / kShards a shard: a full shard drops its expired entries, then refuses); an
// entry past its expiry is never given out (it stays charged as reserved).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/charge.h"
#include "ratekeeper/clock.h"

namespace rk::library {

// What is wrong with a reservation's amount (`field`: "estimate" or "actual", at most kMaxReservationAmount) or ttl
// (1 ms to kMaxReservationTtl), naming the field; "" when nothing. The one check of rk::Limiter's and of the remote
// store's reservations.
std::string amount_error(std::string_view field, std::uint64_t amount);
std::string ttl_error(Nanos ttl);

class Reservations {
 public:
  struct Entry {
    std::string key;
    std::uint64_t amount = 0;
    core::Charge charge;          // when it was charged, and until when the key holds it
    std::int64_t expires_ns = 0;  // gone at and after this time
  };

  explicit Reservations(std::size_t capacity) : per_shard_(capacity / kShards + 1) {}

  // A fresh random id with room for its entry (its shard, when full, drops its expired entries first); nullopt when
  // there is none. Concurrent claims may each find the last place: the capacity is overshot by a few at most.
  std::optional<std::string> claim(std::int64_t now);
  // Holds the entry under an id claim() gave.
  void add(const std::string& id, Entry e);
  // The entry `id` of `key`, removed; nullopt (changing nothing) for an unknown, expired or taken id, or another
  // key's.
  std::optional<Entry> take(std::string_view key, std::string_view id, std::int64_t now);
  // Drops every expired entry; returns how many.
  std::size_t sweep(std::int64_t now);

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry> entries;
  };
  Shard& shard_of(std::string_view id);

  std::size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace rk::library
