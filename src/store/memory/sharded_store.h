// store/memory/sharded_store.h: the in-process store, a bounded map from key to an algorithm's state.
//
// Keys hash (seeded) to one of a power-of-two number of shards; each shard is an open-addressing table (linear
// probing, backward-shift deletion, no tombstones) of 32-bit slots over entries allocated in chunks of 64-byte
// aligned memory. A slot holds an entry's id and, in the bits the shard's capacity leaves over, a tag of the key's
// hash, so that a probe past other keys reads no entry. A key costs one entry (a 20-byte key, a hash word and the
// state: 32 bytes for an 8-byte state, never across a cache line) and 5-7.5 bytes of index: the index is sized for
// load <= 4/5 in steps of 3/2 (any size: a hash maps to its home slot by multiplication, not by a mask), and never
// beyond what the shard's capacity needs.
//
// A decision on a key the store already tracks takes no shard-wide lock and writes nothing shard-wide: it finds the
// key through the index without the shard's lock (a sequence number tells it whether the shard's structure changed
// meanwhile; epoch.h keeps replaced tables alive while it reads them), then locks only that key's entry (a bit in
// the entry's hash word). Two cores deciding on different keys then share no written cache line. Inserts,
// evictions, erasures and table growth take the shard's lock, as does any lookup that saw the structure change.
//
// Eviction is least-recent use as CLOCK approximates it (the second-chance algorithm of operating systems' page
// caches): a decision sets a "used" bit in the key's word as it unlocks it (the same store, so recency costs
// nothing); when a full shard needs room, its hand walks the entries, clearing used bits, and evicts the first key
// not used since the hand last passed it. One eviction's hand passes at most kHandStep used keys (shard.h); when all
// of them were used, it evicts the shard's newest key (the one inserted last) instead. So each pass over a key is
// separated by a visit to every other key of the shard and by at least size / kHandStep evictions, and a key used at
// least once between two passes of the hand is never the one evicted, unless it is its shard's newest. (Without the
// bound, one search could clear every bit of a shard whose keys were all used and take the key it began at, however
// recently used: an active abuser's, against a flood of keys each sent twice.)
//
// A thread's next decision on the key it decided on last (a hot key) skips the hash and the index: last_key.h keeps,
// per thread, that key and its entry, which is locked and its key compared before it is used (entries live as long
// as the store, so a stale hint is only a lock and unlock wasted).
//
// update_many() decides a batch of keys with their index slots, then their entries, prefetched ahead (under one
// epoch::Guard, so that the tables it reads for the prefetches outlive them); each key's update then locks the entry
// its slot named, when the shard's structure has not changed since (the test a lookup makes), or finds it as alone.
//
// The parts: an entry (its key, state and lock word) is entry.h's; a shard (its index, chunks, lock and clock hand,
// the lock-free lookup, insertion and eviction) is shard.h's; this file is the store over its shards.
//
// Thread safety: every public member may be called from any thread. The callback passed to update()/read() runs
// under the key's entry lock (and sometimes also its shard's) and must not call back into the store.
// Invariants (per shard, under its lock): size <= capacity; every live entry (its key not free) is in the index
// exactly once; free entries are chained through their keys' links; the index's load is <= 4/5; `seq` is odd
// exactly while the index or an entry's identity (key, hash) changes.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>

#include "ratekeeper/store.h"
#include "store/memory/entry.h"
#include "store/memory/epoch.h"
#include "base/hash.h"
#include "store/memory/last_key.h"
#include "store/memory/shard.h"

namespace rk::store::memory::sharded {

template <class State>
class ShardedStore {
 public:
  // `options` are validated by the caller (max_keys >= 1).
  explicit ShardedStore(const StoreOptions& options)
      : hash_(options.hash_seed ? options.hash_seed : base::random_seed()) {
    const std::size_t n = shards_for(options.max_keys, options.shards);
    shard_bits_ = static_cast<unsigned>(std::countr_zero(n));
    shards_ = std::make_unique<Shard[]>(n);
    const auto most = static_cast<std::uint32_t>(options.max_keys / n + (options.max_keys % n ? 1 : 0));
    for (std::size_t i = 0; i < n; ++i) {
      shards_[i].capacity = static_cast<std::uint32_t>(options.max_keys / n + (i < options.max_keys % n ? 1 : 0));
      shards_[i].id_bits = static_cast<std::uint32_t>(std::bit_width(most));  // ids + 1 <= most
    }
  }

  // Runs f(State&) on the key's state, creating a fresh state if the key is new (evicting a key of its shard not
  // used lately, by CLOCK, if the shard is full). Returns what f returns.
  // A decision on the key this thread decided on last in this store (a hot key) goes to its entry directly
  // (last_key.h), once the entry, locked, shows that it still holds the key. f is called from one place for both
  // ways to the entry, so that the compiler inlines it once.
  template <class F>
  auto update(std::string_view key, F&& f) {
    Entry* e = hinted(key);
    if (e == nullptr) {
      const std::uint64_t h = hash_(key);
      e = find_unlocked(key, h);
      if (e == nullptr) return update_locked(shard_for(h), key, static_cast<std::uint32_t>(h), f);
    }
    EntryHold hold(*e, true, typename EntryHold::Adopt{});  // unlocks after f's result is returned
    return f(e->state);
  }

  // update(keys[i], f(i, State&)) for i = 0..n-1 in order, with the memory each will read fetched ahead: the keys
  // are hashed and their index slots prefetched a group at a time, then the entries those slots name, so that a
  // group's cache misses overlap instead of following one another. The entry a key's slot named (its candidate) is
  // then the one its update locks, when the shard's structure has not changed since its slots were read (the
  // sequence number, as lookup() checks it) and the entry holds the key; otherwise the update finds its key as it
  // would alone. The keys are not left as the thread's hot-key hint: a batch's keys are seldom a hot key.
  template <class F>
  void update_many(const std::string_view* keys, std::size_t n, F&& f) {
    Ahead ahead[kGroup];
    epoch::Guard guard;  // the tables read ahead stay allocated until it ends
    for (std::size_t base = 0; base < n; base += kGroup) {
      const std::size_t m = std::min(kGroup, n - base);
      for (std::size_t i = 0; i < m; ++i) {
        Ahead& a = ahead[i];
        a.h = hash_(keys[base + i]);
        a.shard = &shard_for(a.h);
        a.seq = a.shard->seq.load(std::memory_order_acquire);
        a.ix = a.shard->index.load(std::memory_order_seq_cst);
        if (a.ix != nullptr) __builtin_prefetch(a.ix->data() + home(static_cast<std::uint32_t>(a.h), a.ix->size));
      }
      for (std::size_t i = 0; i < m; ++i) {
        Ahead& a = ahead[i];
        const bool readable = a.ix != nullptr && !(a.seq & 1u);  // an odd number: the index is being changed
        a.entry = readable ? a.shard->entry_hint(*a.ix, static_cast<std::uint32_t>(a.h)) : nullptr;
        if (a.entry != nullptr) prefetch_entry(a.entry);
      }
      for (std::size_t i = 0; i < m; ++i) {
        const Ahead& a = ahead[i];
        const std::string_view key = keys[base + i];
        Entry* e = claim(a, key);
        if (e == nullptr) [[unlikely]] {
          e = find_guarded(*a.shard, key, static_cast<std::uint32_t>(a.h));
          if (e == nullptr) {
            auto g = [&](State& s) { f(base + i, s); };
            update_locked(*a.shard, key, static_cast<std::uint32_t>(a.h), g);
            continue;
          }
        }
        EntryHold hold(*e, true, typename EntryHold::Adopt{});
        f(base + i, e->state);
      }
    }
  }

  // Runs f(const State*) with the key's state, or nullptr if it is not tracked. Changes nothing, not even recency.
  template <class F>
  auto read(std::string_view key, F&& f) const {
    const std::uint64_t h = hash_(key);
    Shard& s = shard_for(h);
    const auto h32 = static_cast<std::uint32_t>(h);
    const Found found = s.lookup(key, h32);
    if (found.entry != nullptr) {
      EntryHold hold(*found.entry, false, typename EntryHold::Adopt{});
      return f(static_cast<const State*>(&found.entry->state));
    }
    if (found.absent) return f(static_cast<const State*>(nullptr));
    std::lock_guard guard(s.lock);
    const std::uint32_t id = s.find(key, h32);
    if (id == kNil) return f(static_cast<const State*>(nullptr));
    EntryHold hold(s.at(id));
    return f(static_cast<const State*>(&s.at(id).state));
  }

  bool erase(std::string_view key) {
    const std::uint64_t h = hash_(key);
    Shard& s = shard_for(h);
    std::lock_guard guard(s.lock);
    const std::uint32_t id = s.find(key, static_cast<std::uint32_t>(h));
    if (id == kNil) return false;
    s.begin_change();
    s.remove(id);
    s.end_change();
    return true;
  }

  // Removes every entry for which pred(const State&) is true; returns how many. Locks one shard at a time.
  template <class Pred>
  std::size_t erase_if(Pred&& pred) {
    std::size_t removed = 0;
    for (std::size_t i = 0; i < shard_count(); ++i) {
      Shard& s = shards_[i];
      std::lock_guard guard(s.lock);
      bool changing = false;
      for (std::uint32_t id = 0; id < s.allocated; ++id) {
        if (!s.at(id).live()) continue;
        bool drop;
        {
          EntryHold hold(s.at(id));
          drop = pred(static_cast<const State&>(s.at(id).state));
        }
        if (drop) {
          if (!changing) s.begin_change();
          changing = true;
          s.remove(id);
          ++s.forgotten;
          ++removed;
        }
      }
      if (changing) s.end_change();
    }
    return removed;
  }

  // Runs f(std::string_view key, const State&) for every tracked key, under that key's entry lock, for a copy of the
  // state (a save): decisions on other keys go on. The shard's lock is held for kVisitBatch entries at a time, so
  // inserts wait at most one batch. A key inserted or erased meanwhile may be missed, or (erased and inserted again
  // at a later entry) seen twice; f must not call back into the store.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < shard_count(); ++i) {
      const Shard& s = shards_[i];
      for (std::uint32_t from = 0;; from += kVisitBatch) {
        std::lock_guard guard(s.lock);
        if (from >= s.allocated) break;
        const std::uint32_t to = std::min(s.allocated, from + kVisitBatch);
        for (std::uint32_t id = from; id < to; ++id) {
          if (!s.at(id).live()) continue;
          EntryHold hold(s.at(id));
          f(s.at(id).key.view(), static_cast<const State&>(s.at(id).state));
        }
      }
    }
  }

  StoreStats stats() const {
    StoreStats st;
    st.memory_bytes = sizeof(*this) + shard_count() * sizeof(Shard);
    for (std::size_t i = 0; i < shard_count(); ++i) {
      const Shard& s = shards_[i];
      std::lock_guard guard(s.lock);
      st.keys += s.size;
      st.max_keys += s.capacity;
      st.evictions += s.evictions;
      st.forgotten += s.forgotten;
      st.memory_bytes += s.heap_bytes();
      if constexpr (requires(const State& x) { x.heap_bytes(); }) {
        for (std::uint32_t id = 0; id < s.allocated; ++id) {
          if (!s.at(id).live()) continue;
          EntryHold hold(s.at(id));
          st.memory_bytes += s.at(id).state.heap_bytes();
        }
      }
    }
    return st;
  }

  std::size_t shard_count() const { return std::size_t{1} << shard_bits_; }
  static constexpr std::size_t entry_bytes() { return sizeof(Entry); }

  static std::size_t shards_for(std::size_t max_keys, std::size_t shards) {
    std::size_t n = shards ? std::bit_floor(shards) : kDefaultShards;
    while (n > 1 && max_keys / n < kMinPerShard) n /= 2;
    while (max_keys / n >= kMaxPerShard) n *= 2;  // entry ids are 32-bit
    return n;
  }

  // The most stats().memory_bytes can reach with max_keys keys, each holding at most `per_key_heap` bytes of key
  // and state on the heap: whole chunks of entries, the largest index and chunk table, and as much again of each
  // retired (a replaced table waits for readers): every index the shard's last one replaced, and as much again as
  // the chunk table (it doubles, so the retired ones sum to less than the last).
  static std::size_t worst_bytes(std::size_t max_keys, std::size_t shards, std::size_t per_key_heap) {
    const std::size_t n = shards_for(max_keys, shards);
    std::size_t bytes = sizeof(ShardedStore) + n * sizeof(Shard);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t cap = max_keys / n + (i < max_keys % n ? 1 : 0);
      const std::size_t chunks = (cap + kChunk - 1) / kChunk;
      std::size_t index = 0, table = 4;
      for (std::uint32_t slots = 0; slots < index_slots_for(static_cast<std::uint32_t>(cap));) {
        slots = next_index_size(slots, static_cast<std::uint32_t>(cap));
        index += Index::bytes(slots);  // the largest, and every smaller one it replaced (possibly not yet freed)
      }
      while (table < chunks) table *= 2;
      bytes += chunks * kChunk * sizeof(Entry) + index + 2 * Chunks::bytes(static_cast<std::uint32_t>(table)) +
               cap * per_key_heap;
    }
    return bytes;
  }

  // The home slot of a key's hash h in an index of `slots` slots (shard.h).
  static std::size_t home(std::uint32_t h, std::size_t slots) { return sharded::home(h, slots); }
  // The part of a key's hash h that its entry keeps: keys whose words are equal are told apart by their keys alone.
  static std::uint32_t hash_word(std::uint64_t h) { return static_cast<std::uint32_t>(h) & kHashBits; }

  // How many index slots find() examines for `key`, found or not: the cost of one decision's lookup, counted
  // rather than timed (flat under a flood of chosen keys: tests/store/memory/sharded_store_hostile_keys_test.cc).
  std::size_t probe_length(std::string_view key) const {
    const std::uint64_t h = hash_(key);
    const Shard& s = shard_for(h);
    std::lock_guard guard(s.lock);
    const Index* ix = s.index.load(std::memory_order_relaxed);
    if (ix == nullptr) return 0;
    std::size_t n = 1;
    for (std::size_t i = home(static_cast<std::uint32_t>(h), ix->size); ix->get(i) != 0; i = ix->next(i)) {
      const std::uint32_t v = ix->get(i);
      if (s.tag_of(v) == s.tag(static_cast<std::uint32_t>(h)) && s.at(s.id_of(v)).key.equals(key)) break;
      ++n;
    }
    return n;
  }

  struct ProbeStats {
    std::size_t keys = 0;
    std::uint64_t total = 0;  // slots examined to find every live key once
    std::size_t longest = 0;  // the most for any one key
  };
  // Over every live key, the slots a lookup examines to find it (1 when it sits in its home slot).
  ProbeStats probe_stats() const {
    ProbeStats st;
    for (std::size_t i = 0; i < shard_count(); ++i) {
      const Shard& s = shards_[i];
      std::lock_guard guard(s.lock);
      const Index* ix = s.index.load(std::memory_order_relaxed);
      if (ix == nullptr) continue;
      for (std::size_t slot = 0; slot < ix->size; ++slot) {
        if (ix->get(slot) == 0) continue;
        const std::size_t from = home(s.at(s.id_of(ix->get(slot))).hash(), ix->size);
        const std::size_t probes = (slot >= from ? slot - from : slot + ix->size - from) + 1;
        ++st.keys;
        st.total += probes;
        st.longest = std::max(st.longest, probes);
      }
    }
    return st;
  }

 private:
  static constexpr std::size_t kGroup = 16;  // update_many's keys in flight at once
  static constexpr std::size_t kDefaultShards = 64;
  static constexpr std::size_t kMinPerShard = 64;
  static constexpr std::size_t kMaxPerShard = std::size_t{1} << 29;  // index <= 2^30 slots: homes fit kHashBits
  static constexpr std::uint32_t kVisitBatch = 64;                   // for_each's entries per hold of a shard's lock

  using Entry = sharded::Entry<State>;
  using EntryHold = sharded::EntryHold<State>;
  using Chunks = sharded::Chunks<State>;
  using Found = sharded::Found<State>;
  using Shard = sharded::Shard<State>;

  // update() and update_many() for a key the lock-free lookup did not find: under the shard's lock. Out of line, so
  // that the common case above keeps its registers (a hot key's decision spilled and reloaded a dozen of them
  // otherwise).
  template <class F>
  [[gnu::noinline]] auto update_locked(Shard& s, std::string_view key, std::uint32_t h32, F& f) {
    std::lock_guard guard(s.lock);
    std::uint32_t id = s.find(key, h32);
    const bool known = id != kNil;
    if (!known) id = s.insert(key, h32);  // a new key starts unused: the next pass of the hand may take it
    EntryHold hold(s.at(id), known);
    return f(s.at(id).state);
  }

  // The entry of this thread's last_key hint, locked, if it still holds `key`; else nullptr.
  [[gnu::always_inline]] Entry* hinted(std::string_view key) {
    void* hint = last_key::find(serial_, key);
    if (hint == nullptr) return nullptr;
    Entry& e = *static_cast<Entry*>(hint);
    e.lock();
    if (e.key.equals(key)) [[likely]]
      return &e;
    e.unlock();
    return nullptr;
  }

  // The key's entry, locked, found without the shard's lock (and left as this thread's hint); nullptr when the key
  // is not tracked or the shard's lock is needed to tell.
  [[gnu::always_inline]] Entry* find_unlocked(std::string_view key, std::uint64_t h) {
    const Found found = shard_for(h).lookup(key, static_cast<std::uint32_t>(h));
    if (found.entry != nullptr) last_key::remember(serial_, key, found.entry);
    return found.entry;
  }

  // What update_many read ahead for one key.
  struct Ahead {
    std::uint64_t h;
    Shard* shard;
    std::uint32_t seq;  // the shard's sequence number, read before its index
    const Index* ix;
    Entry* entry;  // the candidate: the entry the first slot of the key's probe run with its tag names, or nullptr
  };

  // The candidate's entry, locked, if it holds the key and the shard's structure did not change since the slots
  // that named it were read (lookup()'s test, from the sequence number read then); else nullptr.
  [[gnu::always_inline]] static Entry* claim(const Ahead& a, std::string_view key) {
    Entry* e = a.entry;
    if (e == nullptr || (e->word.load(std::memory_order_relaxed) & kHashBits) != (a.h & kHashBits)) return nullptr;
    return a.shard->lock_holding(*e, a.seq, key);
  }

  // find_unlocked for a caller inside an epoch::Guard, out of line (update_many's rare path), leaving no hint.
  [[gnu::noinline]] static Entry* find_guarded(Shard& s, std::string_view key, std::uint32_t h32) {
    return s.template lookup<true>(key, h32).entry;
  }

  Shard& shard_for(std::uint64_t h) const { return shards_[shard_bits_ ? h >> (64 - shard_bits_) : 0]; }

  base::KeyHasher hash_;                                 // hash_key with the store's seed
  std::uint64_t serial_ = last_key::new_store_serial();  // this store's name in the threads' last_key hints
  unsigned shard_bits_ = 0;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace rk::store::memory::sharded

namespace rk::store::memory {
using sharded::ShardedStore;
}  // namespace rk::store::memory
