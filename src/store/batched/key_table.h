// store/batched/key_table.h: the batched store's table of keys (batcher.h), internal: per key its algorithm's state,
// the hits recorded here and not yet sent, and what it has absorbed of the other servers' counts; keys in shards,
// each a map under its own spin lock, bounded in keys and in bytes.
//
// Keys are the clients': hashed with the in-process store's seeded hash (base/hash.h), so that no one can
// compute keys that collide in a shard's map and make its lookups, under the shard's lock, walk long chains. The
// hash's top bits pick the shard, the map's buckets take the rest. A full shard evicts, from the new key's bucket,
// the key used longest ago (key_table.cc: Batcher::evict_one), so that no chain grows on a full shard.
//
// Thread safety: a Shard's members, and every field of the entries it holds, are read and written under its `mu`
// only; an entry's `state` is used under that lock too. Nothing here locks by itself: the Batcher's members do.
// Invariants (per shard, under `mu`): `bytes` is the sum of the held entries' `bytes`; a key is added past
// `capacity` or `byte_capacity` only when no key held can go (each has decisions waiting on it, or there is none: one
// key is always held, whatever it costs); an entry is `busy` exactly while one sync of it is out, and its `waiters`
// (never evicted or reset while any wait) run once that sync's reply is applied; an entry's `generation` is never
// reused, so a late reply for an evicted entry is told from one for the entry made again under its key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"
#include "base/spin_lock.h"

namespace rk::store::batched {

inline constexpr std::int64_t kNeverNs = std::numeric_limits<std::int64_t>::min();
// A snapshot's frame holds at most this many servers' counts, and an entry remembers at most as many (sync_loop.cc).
inline constexpr std::uint32_t kMaxSnapshotCounts = 4096;

using Counts = std::unordered_map<std::string, std::uint64_t>;
using Waiters = std::vector<std::function<void()>>;

// One key's state under its algorithm, behind one interface so that a table holds every algorithm's keys.
struct KeyState {
  virtual ~KeyState() = default;
  virtual Decision decide(std::int64_t now, std::uint64_t cost, bool peek) = 0;
  virtual void absorb(std::int64_t now, std::uint64_t hits) = 0;
  virtual void encode(std::string& out) const = 0;
  virtual bool decode(std::string_view in) = 0;  // false: malformed, and the state is fresh
  virtual void clear() = 0;
  virtual bool forgettable(std::int64_t now) const = 0;
  virtual std::int64_t lifetime_ns(std::int64_t now) const = 0;  // until the state is back to fresh
};

// A fresh state of `spec`'s algorithm (valid: the rule's).
std::unique_ptr<KeyState> make_state(const LimitSpec& spec);

struct Entry {
  std::unique_ptr<KeyState> state;
  Counts seen;                        // per other server: the cumulative count `state` includes (at most
                                      // kMaxSnapshotCounts; kept while absent, for a Redis that lost the key)
  std::uint64_t own_total = 0;        // this server's cumulative count, as the store holds it
  std::uint64_t pending = 0;          // recorded here, not yet sent
  std::uint64_t inflight = 0;         // sent in the sync in flight
  bool joined = false;                // `state` was built from the store's snapshot and counts
  bool busy = false;                  // a sync of this key is in flight
  bool changed = false;               // since the last snapshot written
  Waiters waiters;                    // decisions waiting for the sync in flight
  std::int64_t synced_ns = kNeverNs;  // when the last answered sync was sent
  std::int64_t used_ns = kNeverNs;
  std::uint64_t generation = 0;  // tells this entry from an evicted one's under the same key, for late replies
  std::size_t bytes = 0;         // key_bytes() when it was made
};

// A key with its hash, computed once per decision for both the shard and the map.
struct Hashed {
  std::string_view key;
  std::uint64_t hash;
};

struct KeyHash {
  using is_transparent = void;  // found by a Hashed key: no key built, no second hash, per decision
  std::uint64_t seed;           // the Batcher's
  std::size_t operator()(std::string_view key) const;
  std::size_t operator()(const Hashed& k) const { return static_cast<std::size_t>(k.hash); }
};

struct KeyEq {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const Hashed& a, const std::string& b) const { return a.key == b; }
  bool operator()(const std::string& a, const Hashed& b) const { return a == b.key; }
  bool operator()(std::string_view a, const std::string& b) const { return a == b; }
  bool operator()(const std::string& a, std::string_view b) const { return a == b; }
};

using KeyMap = std::unordered_map<std::string, std::unique_ptr<Entry>, KeyHash, KeyEq>;

struct alignas(64) Shard {  // one cache line of its own at least: two cores on two shards share nothing written
  // A spin lock: held for a few dozen nanoseconds per decision, where a futex-based mutex costs more than that
  // when two threads meet on a hot key.
  mutable base::SpinLock mu;
  KeyMap keys;  // under mu
  std::size_t capacity = 1;
  std::size_t bytes = 0;  // key_bytes() of the keys held; under mu
  std::size_t byte_capacity = std::numeric_limits<std::size_t>::max();
  std::uint64_t rng = 0;  // picks eviction's bucket when the new key's is empty; under mu
};

}  // namespace rk::store::batched
