// store/shm/layout.h: the shared store's region as bytes, for region.cc, shm_store.cc and the tests that corrupt it
// on purpose. Nothing here is installed.
//
// Region layout, all offsets from the region's start, everything 8-byte aligned:
//   RegionHeader | shards x (ShardHeader, buckets_per_shard x uint32, journal) | capacity x slot
// A slot: SlotHead, then the state (state_bytes: kStateBytes for a rate algorithm, more for the leases of
// `concurrency`), then the key (key_cap bytes); a shard's journal holds one state. Shard s owns slots
// [s * slots_per_shard, (s + 1) * slots_per_shard); its indices (bucket heads, chain and LRU links, the free list,
// the journal's slot) are shard-local, kNil for none.
//
// Invariants the code relies on, and which it checks because any process with write access can break them:
// the header's sizes are those layout_for() computes from its shards, slots_per_shard and key_cap (checked once
// when a process attaches, then copied into the process's own memory and never read from the region again); every
// index read from the region is below slots_per_shard or kNil; a bucket chain has at most slots_per_shard links.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ratekeeper/params.h"

namespace rk::store::shm {

// "rkshm" then the format's version: a region of another version is refused by name, not misread. 03: the state's
// size in the header and the journal after the buckets, so that a slot can hold a key's leases.
inline constexpr char kMagic[8] = {'r', 'k', 's', 'h', 'm', '0', '3', '\0'};
inline constexpr std::size_t kMagicNameBytes = 5;
inline constexpr std::uint32_t kNil = 0xffffffffu;
inline constexpr std::size_t kStateBytes = 32;
inline constexpr std::size_t kMaxKeys = std::size_t{1} << 31;
inline constexpr std::size_t kMaxKeyBytes = 4096;
inline constexpr std::size_t kMaxShards = 1024;
// The most a slot's state may take (the leases of `concurrency`, store/shm/shm_leases.cc: 8 + 24 per lease).
inline constexpr std::size_t kMaxStateBytes = 8 + 24 * 4096;
// StoredSpec::algorithm of a `concurrency` region: limit is max_in_flight, window_ns the lease's time to live.
inline constexpr std::uint8_t kConcurrencyCode = 0xc0;

constexpr std::size_t round8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// What a limit is, as stored in the region, so that every process attaching checks it decides the same way.
struct StoredSpec {
  std::uint8_t algorithm, align, has_half_life, has_burst, has_capacity, has_count_refused, count_refused, pad;
  double limit, burst, capacity;
  std::int64_t window_ns, half_life_ns;
};

struct RegionHeader {
  char magic[8];
  std::atomic<std::uint32_t> ready;  // 1 once formatted
  std::uint32_t shards, slots_per_shard, buckets_per_shard, key_cap, state_bytes;
  std::uint64_t region_bytes, slot_stride, shard_stride, shards_offset, slots_offset, seed;
  StoredSpec spec;
};

struct ShardHeader {
  pthread_mutex_t mu;
  std::uint32_t lru_head, lru_tail, free_head, count;
  std::uint64_t tick, evictions, recoveries;
  std::atomic<std::uint32_t> journal_slot;  // kNil: no update in progress; else its old state is in the journal
  std::uint32_t pad;
};

struct SlotHead {
  std::uint64_t hash, tick;
  std::uint32_t bucket_next, lru_prev, lru_next;
  std::uint16_t key_len;
  std::atomic<std::uint8_t> in_use;
  std::uint8_t pad;
};

struct Layout {
  std::size_t shards, slots_per_shard, buckets_per_shard, key_cap, state_bytes, slot_stride, shard_stride,
      journal_offset, shards_offset, slots_offset, bytes;
};

// Exact for max_keys <= kMaxKeys, key_bytes <= kMaxKeyBytes, 1 <= shards <= kMaxShards, state_bytes <=
// kMaxStateBytes: nothing overflows.
inline Layout layout_for(std::size_t max_keys, std::size_t key_bytes, std::size_t shards,
                         std::size_t state_bytes = kStateBytes) {
  Layout l{};
  l.shards = shards;
  l.slots_per_shard = (max_keys + shards - 1) / shards;
  l.buckets_per_shard = std::max<std::size_t>(1, l.slots_per_shard);
  l.key_cap = round8(key_bytes);
  l.state_bytes = round8(std::max(state_bytes, kStateBytes));
  l.slot_stride = round8(sizeof(SlotHead)) + l.state_bytes + l.key_cap;
  l.journal_offset = round8(sizeof(ShardHeader) + l.buckets_per_shard * sizeof(std::uint32_t));
  l.shard_stride = l.journal_offset + l.state_bytes;
  l.shards_offset = round8(sizeof(RegionHeader));
  l.slots_offset = l.shards_offset + l.shards * l.shard_stride;
  l.bytes = l.slots_offset + l.shards * l.slots_per_shard * l.slot_stride;
  return l;
}

}  // namespace rk::store::shm
