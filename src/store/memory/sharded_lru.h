// store/memory/sharded_lru.h: the in-process store, a bounded map from key to an algorithm's state.
//
// Keys hash (seeded) to one of a power-of-two number of shards; each shard is an open-addressing table (linear
// probing, backward-shift deletion, no tombstones) of 32-bit entry ids over entries allocated in chunks, with an
// intrusive doubly linked LRU list through the entries. A key costs one entry (24-byte key, hash, two links and
// the state) and 4-8 bytes of index.
//
// Recency is kept the way memcached keeps it: a key is moved to the front of its shard's list only if it has not
// been moved in the last capacity/8 operations on the shard. A hot key then costs no list writes (which would
// bounce its neighbours' cache lines between cores), and the order is exact to within capacity/8 operations: a
// key used at least once every 7/8 of a shard's capacity of operations is never the one evicted.
//
// Thread safety: every public member locks the shard it touches, and only that shard; the callback passed to
// update()/read() runs under the shard lock and must not call back into the store.
// Invariants (per shard): size <= capacity; every live entry is in the index exactly once and in the LRU list
// exactly once; free entries are chained through `next`; index.size() is a power of two with load <= 3/4.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "ratekeeper/store.h"
#include "store/memory/compact_key.h"
#include "store/memory/hash.h"
#include "store/memory/spin_lock.h"

namespace rk::store {

template <class State>
class ShardedLru {
 public:
  // `options` are validated by the caller (max_keys >= 1).
  explicit ShardedLru(const StoreOptions& options) : seed_(options.hash_seed ? options.hash_seed : random_seed()) {
    std::size_t n = options.shards ? std::bit_floor(options.shards) : kDefaultShards;
    while (n > 1 && options.max_keys / n < kMinPerShard) n /= 2;
    shard_bits_ = static_cast<unsigned>(std::countr_zero(n));
    shards_ = std::make_unique<Shard[]>(n);
    for (std::size_t i = 0; i < n; ++i) {
      shards_[i].capacity = static_cast<std::uint32_t>(options.max_keys / n + (i < options.max_keys % n ? 1 : 0));
      shards_[i].bump_after = shards_[i].capacity / 8;
    }
  }

  // Runs f(State&) on the key's state, creating a fresh state if the key is new (evicting the least recently
  // used key of its shard if the shard is full). Returns what f returns.
  template <class F>
  auto update(std::string_view key, F&& f) {
    const std::uint64_t h = hash_key(key, seed_);
    Shard& s = shard_for(h);
    const auto h32 = static_cast<std::uint32_t>(h);
    std::lock_guard guard(s.lock);
    std::uint32_t id = s.find(key, h32);
    ++s.ops;
    if (id == kNil) {
      id = s.insert(key, h32);
    } else {
      s.touch(id);
    }
    return f(s.at(id).state);
  }

  // Runs f(const State*) with the key's state, or nullptr if it is not tracked. Changes nothing, not even recency.
  template <class F>
  auto read(std::string_view key, F&& f) const {
    const std::uint64_t h = hash_key(key, seed_);
    Shard& s = shard_for(h);
    std::lock_guard guard(s.lock);
    const std::uint32_t id = s.find(key, static_cast<std::uint32_t>(h));
    return f(id == kNil ? static_cast<const State*>(nullptr) : &s.at(id).state);
  }

  bool erase(std::string_view key) {
    const std::uint64_t h = hash_key(key, seed_);
    Shard& s = shard_for(h);
    std::lock_guard guard(s.lock);
    const std::uint32_t id = s.find(key, static_cast<std::uint32_t>(h));
    if (id == kNil) return false;
    s.remove(id);
    return true;
  }

  // Removes every entry for which pred(const State&) is true; returns how many. Locks one shard at a time.
  template <class Pred>
  std::size_t erase_if(Pred&& pred) {
    std::size_t removed = 0;
    for (std::size_t i = 0; i < shard_count(); ++i) {
      Shard& s = shards_[i];
      std::lock_guard guard(s.lock);
      for (std::uint32_t id = s.tail; id != kNil;) {
        const std::uint32_t newer = s.at(id).prev;
        if (pred(static_cast<const State&>(s.at(id).state))) {
          s.remove(id);
          ++s.forgotten;
          ++removed;
        }
        id = newer;
      }
    }
    return removed;
  }

  StoreStats stats() const {
    StoreStats st;
    st.memory_bytes = sizeof(*this) + shard_count() * sizeof(Shard);
    for (std::size_t i = 0; i < shard_count(); ++i) {
      const Shard& s = shards_[i];
      std::lock_guard guard(s.lock);
      st.keys += s.size;
      st.evictions += s.evictions;
      st.forgotten += s.forgotten;
      st.memory_bytes += s.index.capacity() * sizeof(std::uint32_t) + s.chunks.capacity() * sizeof(void*) +
                         s.chunks.size() * kChunk * sizeof(Entry) + s.key_heap_bytes;
      if constexpr (requires(const State& x) { x.heap_bytes(); }) {
        for (std::uint32_t id = s.head; id != kNil; id = s.at(id).next) st.memory_bytes += s.at(id).state.heap_bytes();
      }
    }
    return st;
  }

  std::size_t shard_count() const { return std::size_t{1} << shard_bits_; }
  static constexpr std::size_t entry_bytes() { return sizeof(Entry); }

  // How many index slots find() examines for `key`, found or not: the cost of one decision's lookup, counted
  // rather than timed (tests/unit/hostile_keys_test.cc shows it stays flat under a flood of chosen keys).
  std::size_t probe_length(std::string_view key) const {
    const std::uint64_t h = hash_key(key, seed_);
    const Shard& s = shard_for(h);
    std::lock_guard guard(s.lock);
    if (s.index.empty()) return 0;
    std::size_t n = 1;
    for (std::size_t i = static_cast<std::uint32_t>(h) & s.mask(); s.index[i] != 0; i = (i + 1) & s.mask()) {
      const Entry& e = s.at(s.index[i] - 1);
      if (e.hash == static_cast<std::uint32_t>(h) && e.key.view() == key) break;
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
      for (std::size_t slot = 0; slot < s.index.size(); ++slot) {
        if (s.index[slot] == 0) continue;
        const std::size_t home = s.at(s.index[slot] - 1).hash & s.mask();
        const std::size_t probes = ((slot - home) & s.mask()) + 1;
        ++st.keys;
        st.total += probes;
        st.longest = std::max(st.longest, probes);
      }
    }
    return st;
  }

 private:
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  static constexpr std::size_t kDefaultShards = 64;
  static constexpr std::size_t kMinPerShard = 64;
  static constexpr unsigned kChunkBits = 8;
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;

  struct Entry {
    CompactKey key;
    std::uint32_t hash = 0;
    std::uint32_t moved = 0;    // the shard's `ops` when this entry was last moved to the front
    std::uint32_t prev = kNil;  // towards the most recently used
    std::uint32_t next = kNil;  // towards the least recently used; the free list's link
    State state{};
  };

  struct alignas(64) Shard {
    mutable SpinLock lock;
    std::vector<std::uint32_t> index;  // 0: empty slot; otherwise entry id + 1
    std::vector<std::unique_ptr<Entry[]>> chunks;
    std::uint32_t capacity = 0;
    std::uint32_t bump_after = 0;  // capacity / 8: how stale recency may get before a move to the front
    std::uint32_t ops = 0;         // updates on this shard (wraps; only differences are used)
    std::uint32_t size = 0;
    std::uint32_t allocated = 0;  // ids below this have been handed out at least once
    std::uint32_t free_head = kNil;
    std::uint32_t head = kNil;  // most recently used
    std::uint32_t tail = kNil;  // least recently used
    std::uint64_t evictions = 0;
    std::uint64_t forgotten = 0;
    std::size_t key_heap_bytes = 0;

    Entry& at(std::uint32_t id) { return chunks[id >> kChunkBits][id & (kChunk - 1)]; }
    const Entry& at(std::uint32_t id) const { return chunks[id >> kChunkBits][id & (kChunk - 1)]; }
    std::size_t mask() const { return index.size() - 1; }

    std::uint32_t find(std::string_view key, std::uint32_t h) const {
      if (index.empty()) return kNil;
      for (std::size_t i = h & mask();; i = (i + 1) & mask()) {
        const std::uint32_t slot = index[i];
        if (slot == 0) return kNil;
        const Entry& e = at(slot - 1);
        if (e.hash == h && e.key.view() == key) return slot - 1;
      }
    }

    void place(std::uint32_t id) {
      std::size_t i = at(id).hash & mask();
      while (index[i] != 0) i = (i + 1) & mask();
      index[i] = id + 1;
    }

    void grow() {
      std::vector<std::uint32_t> old = std::move(index);
      index.assign(std::max<std::size_t>(16, old.size() * 2), 0);
      for (std::uint32_t slot : old) {
        if (slot != 0) place(slot - 1);
      }
    }

    void link_front(std::uint32_t id) {
      Entry& e = at(id);
      e.prev = kNil;
      e.next = head;
      if (head != kNil) at(head).prev = id;
      head = id;
      if (tail == kNil) tail = id;
    }

    void unlink(std::uint32_t id) {
      Entry& e = at(id);
      if (e.prev != kNil) at(e.prev).next = e.next; else head = e.next;
      if (e.next != kNil) at(e.next).prev = e.prev; else tail = e.prev;
    }

    void touch(std::uint32_t id) {
      Entry& e = at(id);
      if (head == id || ops - e.moved <= bump_after) return;
      e.moved = ops;
      unlink(id);
      link_front(id);
    }

    std::uint32_t insert(std::string_view key, std::uint32_t h) {
      if (size >= capacity) {
        remove(tail);
        ++evictions;
      }
      if ((std::size_t{size} + 1) * 4 > index.size() * 3) grow();
      std::uint32_t id;
      if (free_head != kNil) {
        id = free_head;
        free_head = at(id).next;
      } else {
        if ((allocated >> kChunkBits) == chunks.size()) chunks.push_back(std::make_unique<Entry[]>(kChunk));
        id = allocated++;
      }
      Entry& e = at(id);
      e.key.assign(key);
      key_heap_bytes += e.key.heap_bytes();
      e.hash = h;
      e.moved = ops;
      e.state = State{};
      place(id);
      link_front(id);
      ++size;
      return id;
    }

    void remove(std::uint32_t id) {
      Entry& e = at(id);
      std::size_t i = e.hash & mask();
      while (index[i] != id + 1) i = (i + 1) & mask();
      // Backward-shift deletion: pull later members of the probe run into the hole when their home allows it.
      for (std::size_t j = (i + 1) & mask(); index[j] != 0; j = (j + 1) & mask()) {
        const std::size_t home = at(index[j] - 1).hash & mask();
        const bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        index[i] = index[j];
        i = j;
      }
      index[i] = 0;
      unlink(id);
      key_heap_bytes -= e.key.heap_bytes();
      e.key.release();
      e.state = State{};  // frees whatever the state holds
      e.next = free_head;
      free_head = id;
      --size;
    }
  };

  Shard& shard_for(std::uint64_t h) const { return shards_[shard_bits_ ? h >> (64 - shard_bits_) : 0]; }

  std::uint64_t seed_;
  unsigned shard_bits_ = 0;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace rk::store
