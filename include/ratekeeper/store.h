// ratekeeper/store.h: options and statistics of the in-process store that holds each key's state.
//
// The store is a sharded hash map bounded by max_keys and evicting by least-recent use (as CLOCK approximates it:
// a key used since the clock hand last passed it is never evicted). A key whose state is
// indistinguishable from a fresh one may be forgotten at any time (sweep); nothing is forgotten by a fixed TTL.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rk {

struct StoreOptions {
  std::size_t max_keys = 1'000'000;  // the memory bound: past it a key not used lately is evicted (CLOCK)
  std::size_t shards = 0;            // 0 = automatic (a power of two, more than enough for the cores)
  std::size_t max_key_bytes = 4096;  // longer keys are refused with InvalidArgument
  std::uint64_t hash_seed = 0;       // 0 = a random seed per store (keys come from attackers)
  // A bound in bytes as well (0: none): max_keys is lowered until a full store's worst case fits (keys, index,
  // retired tables, a sliding log's full log per key), but never below one key. Keys over 64 bytes are stored as
  // 16-byte keyed digests (SipHash-128, a per-process secret), so a key's length costs nothing past 64 bytes.
  std::size_t max_memory_bytes = 0;
};

struct StoreStats {
  std::size_t keys = 0;
  std::size_t max_keys = 0;      // the bound in keys: StoreOptions::max_keys, lowered to fit max_memory_bytes
  std::uint64_t evictions = 0;   // keys dropped because the store was full (CLOCK eviction)
  std::uint64_t forgotten = 0;   // keys dropped by sweep() because their state was back to fresh
  std::size_t memory_bytes = 0;  // what the store has allocated for entries, index and long keys
};

}  // namespace rk
