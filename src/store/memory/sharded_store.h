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
// not used since the hand last passed it. A key used at least once between two passes of the hand is never the one
// evicted, and each pass over a key is separated by a visit to every other key of the shard.
//
// A thread's next decision on the key it decided on last (a hot key) skips the hash and the index: last_key.h keeps,
// per thread, that key and its entry, which is locked and its key compared before it is used (entries live as long
// as the store, so a stale hint is only a lock and unlock wasted).
//
// update_many() decides a batch of keys with their index slots, then their entries, prefetched ahead (under one
// epoch::Guard, so that the tables it reads for the prefetches outlive them); each key's update then locks the entry
// its slot named, when the shard's structure has not changed since (the test a lookup makes), or finds it as alone.
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
#include <new>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ratekeeper/store.h"
#include "store/memory/compact_key.h"
#include "store/memory/epoch.h"
#include "store/memory/hash.h"
#include "store/memory/last_key.h"
#include "store/memory/spin_lock.h"

namespace rk::store {

template <class State>
class ShardedStore {
 public:
  // `options` are validated by the caller (max_keys >= 1).
  explicit ShardedStore(const StoreOptions& options) : hash_(options.hash_seed ? options.hash_seed : random_seed()) {
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

  // The home slot of a key's hash h in an index of `slots` slots: from h's high bits (multiply-shift), so the index
  // may have any size.
  static std::size_t home(std::uint32_t h, std::size_t slots) { return (std::uint64_t{h & kHashBits} * slots) >> 30; }
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
  static constexpr std::size_t kHintProbes = 16;  // update_many's prefetch gives up on longer probe runs
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  static constexpr std::size_t kDefaultShards = 64;
  static constexpr std::size_t kMinPerShard = 64;
  static constexpr std::size_t kMaxPerShard = std::size_t{1} << 29;  // index <= 2^30 slots: homes fit kHashBits
  static constexpr unsigned kChunkBits = 8;
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;
  static constexpr std::uint32_t kVisitBatch = 64;  // for_each's entries per hold of a shard's lock
  static constexpr std::uint32_t kLockBit = 0x80000000u;  // in an entry's word: the entry's lock
  static constexpr std::uint32_t kUsedBit = 0x40000000u;  // in an entry's word: decided on since the hand passed
  static constexpr std::uint32_t kHashBits = 0x3FFFFFFFu;  // in an entry's word: the key's hash (home bits included)

  struct Entry {
    CompactKey key;  // written only with both the shard's and the entry's lock held; free: the free list's link
    std::atomic<std::uint32_t> word{0};  // kLockBit | kUsedBit | the key's hash & kHashBits (0 while free)
    State state{};                       // entry lock

    bool live() const { return !key.is_free(); }  // under the shard's lock
    std::uint32_t hash() const { return word.load(std::memory_order_relaxed) & kHashBits; }
    [[gnu::always_inline]] bool try_lock() noexcept {
      std::uint32_t w = word.load(std::memory_order_relaxed);
      return !(w & kLockBit) &&
             word.compare_exchange_weak(w, w | kLockBit, std::memory_order_acquire, std::memory_order_relaxed);
    }
    [[gnu::always_inline]] void lock() noexcept {
      if (!try_lock()) lock_contended();
    }
    // The lock shares its cache line with the state it guards: a waiter that kept reading it would pull the line
    // away from the holder in the middle of its update. So waiters back off exponentially between looks.
    [[gnu::noinline]] void lock_contended() noexcept {
      for (unsigned pause = 1, round = 0;; ++round) {
        for (unsigned i = 0; i < pause; ++i) cpu_relax();
        if (pause < 64) pause *= 2;
        if (round > 32) std::this_thread::yield();
        if (try_lock()) return;
      }
    }
    // Only the holder changes the word while it is locked, so a plain store releases it.
    [[gnu::always_inline]] void unlock() noexcept {
      word.store(word.load(std::memory_order_relaxed) & ~kLockBit, std::memory_order_release);
    }
    // Unlocks after a decision, marking the key used for the clock hand in the same store.
    [[gnu::always_inline]] void unlock_used() noexcept {
      word.store((word.load(std::memory_order_relaxed) & ~kLockBit) | kUsedBit, std::memory_order_release);
    }
  };

  // Holds an entry's lock for a scope; `used` marks the key used for the clock hand as it unlocks.
  struct EntryHold {
    struct Adopt {};
    explicit EntryHold(const Entry& e, bool use = false) : entry(const_cast<Entry&>(e)), used(use) { entry.lock(); }
    EntryHold(Entry& e, bool use, Adopt) : entry(e), used(use) {}  // already locked (by a lookup)
    [[gnu::always_inline]] ~EntryHold() {
      if (used) {
        entry.unlock_used();
      } else {
        entry.unlock();
      }
    }
    EntryHold(const EntryHold&) = delete;
    EntryHold& operator=(const EntryHold&) = delete;
    Entry& entry;
    bool used;
  };

  // A table readers may hold while it is replaced: a size and that many atomics, in one allocation.
  template <class T>
  struct alignas(8) Table {
    std::uint32_t size;

    std::atomic<T>* data() { return reinterpret_cast<std::atomic<T>*>(this + 1); }
    const std::atomic<T>* data() const { return reinterpret_cast<const std::atomic<T>*>(this + 1); }
    std::size_t next(std::size_t i) const { return i + 1 == size ? 0 : i + 1; }  // linear probing's step
    T get(std::size_t i) const { return data()[i].load(std::memory_order_relaxed); }
    void put(std::size_t i, T v) { data()[i].store(v, std::memory_order_relaxed); }

    static std::size_t bytes(std::uint32_t n) { return sizeof(Table) + n * sizeof(std::atomic<T>); }
    static Table* make(std::uint32_t n) {
      static_assert(sizeof(Table) % alignof(std::atomic<T>) == 0);
      auto* t = new (::operator new(bytes(n))) Table{n};
      for (std::uint32_t i = 0; i < n; ++i) new (t->data() + i) std::atomic<T>(T{});
      return t;
    }
    static void destroy(void* p) {
      auto* t = static_cast<Table*>(p);
      for (std::uint32_t i = 0; i < t->size; ++i) t->data()[i].~atomic();
      t->~Table();
      ::operator delete(p);
    }
  };
  using Index = Table<std::uint32_t>;  // 0: empty slot; otherwise the key's tag << id_bits | (entry id + 1)
  using Chunks = Table<Entry*>;

  struct Unguarded {};  // in place of an epoch::Guard the caller holds

  struct Found {
    Entry* entry = nullptr;  // locked, when found without the shard lock
    bool absent = false;     // not tracked, known without the shard lock
  };

  struct Retired {
    void* table;
    std::uint64_t tag;
    std::size_t bytes;
    void (*destroy)(void*);
  };

  struct alignas(64) Shard {
    // Read by lookups without the lock; written (under the lock) only when the structure changes.
    std::atomic<std::uint32_t> seq{0};
    std::atomic<Index*> index{nullptr};
    std::atomic<Chunks*> chunks{nullptr};
    std::uint32_t capacity = 0;
    std::uint32_t id_bits = 0;  // an index slot's low bits: entry id + 1 (< 2^id_bits); the rest, the key's tag

    std::uint32_t id_of(std::uint32_t slot) const { return (slot & ((1u << id_bits) - 1)) - 1; }
    std::uint32_t tag_of(std::uint32_t slot) const { return slot >> id_bits; }
    // The hash's low bits (its home comes from its high ones): a probe reads the entry only when they match.
    std::uint32_t tag(std::uint32_t h) const { return (h & kHashBits) & (0xFFFFFFFFu >> id_bits); }
    std::uint32_t slot_for(std::uint32_t id, std::uint32_t h) const { return tag(h) << id_bits | (id + 1); }

    // The rest only under the lock.
    alignas(64) mutable SpinLock lock;
    std::uint32_t size = 0;
    std::uint32_t allocated = 0;  // ids below this have been handed out at least once
    std::uint32_t free_head = kNil;
    std::uint32_t hand = 0;  // the clock hand: the next entry eviction looks at
    std::uint64_t evictions = 0;
    std::uint64_t forgotten = 0;
    std::size_t key_heap_bytes = 0;
    std::vector<Retired> retired;

    Shard() = default;
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;
    ~Shard() {
      if (Chunks* c = chunks.load(std::memory_order_relaxed)) {
        for (std::uint32_t i = 0; i < c->size; ++i) free_chunk(c->data()[i].load(std::memory_order_relaxed));
        Chunks::destroy(c);
      }
      if (Index* ix = index.load(std::memory_order_relaxed)) Index::destroy(ix);
      for (const Retired& r : retired) r.destroy(r.table);
    }

    Entry& at(std::uint32_t id) const {
      return chunks.load(std::memory_order_relaxed)
          ->data()[id >> kChunkBits]
          .load(std::memory_order_relaxed)[id & (kChunk - 1)];
    }

    std::size_t heap_bytes() const {
      std::size_t b = key_heap_bytes;
      if (const Index* ix = index.load(std::memory_order_relaxed)) b += Index::bytes(ix->size);
      if (const Chunks* c = chunks.load(std::memory_order_relaxed)) {
        b += Chunks::bytes(c->size) + std::size_t{(allocated + kChunk - 1) / kChunk} * kChunk * sizeof(Entry);
      }
      for (const Retired& r : retired) b += r.bytes;
      return b;
    }

    // Without the lock: the key's entry, locked, if the shard's structure did not change
    // while it was found; `absent` if the key is certainly not tracked; neither if the caller must take the lock.
    // kGuarded: the caller holds an epoch::Guard already. (A template rather than a function around another: that
    // changed the registers of update()'s hot-key path, which does not even run this.)
    template <bool kGuarded = false>
    [[gnu::always_inline]] Found lookup(std::string_view key, std::uint32_t h) {
      // The tables read below stay allocated until the guard (the caller's, when kGuarded) ends.
      [[maybe_unused]] std::conditional_t<kGuarded, Unguarded, epoch::Guard> guard;
      Found r;
      const std::uint32_t s0 = seq.load(std::memory_order_acquire);
      if (s0 & 1u) return r;
      const Index* ix = index.load(std::memory_order_seq_cst);
      const Chunks* ch = chunks.load(std::memory_order_seq_cst);
      if (ix == nullptr || ch == nullptr) return r;
      const std::size_t slot_count = ix->size;
      const std::uint32_t chunk_count = ch->size;
      const std::atomic<std::uint32_t>* slots = ix->data();
      const std::atomic<Entry*>* table = ch->data();
      const std::uint32_t want = h & kHashBits, want_tag = tag(h);
      // The probe finds the first entry whose tag and hash match; the lock is taken after the loop, so that the
      // loop makes no call (a call inside it made the compiler keep its values on the stack). A candidate that
      // turns out to hold another key (a 31-bit hash collision) sends the caller to the shard's lock.
      Entry* e = nullptr;
      for (std::size_t i = home(h, slot_count), n = 0; n < slot_count; i = i + 1 == slot_count ? 0 : i + 1, ++n) {
        const std::uint32_t v = slots[i].load(std::memory_order_relaxed);
        if (v == 0) {
          std::atomic_thread_fence(std::memory_order_acquire);
          r.absent = seq.load(std::memory_order_relaxed) == s0;
          return r;
        }
        if (tag_of(v) != want_tag) continue;
        // A torn view (an id from a change in progress) is caught below by the sequence number; these checks
        // only keep the reads inside memory that exists.
        const std::uint32_t id = id_of(v);
        if ((id >> kChunkBits) >= chunk_count) return r;
        Entry* chunk = table[id >> kChunkBits].load(std::memory_order_acquire);
        if (chunk == nullptr) return r;
        Entry& c = chunk[id & (kChunk - 1)];
        prefetch_entry(&c);  // a 40- or 48-byte entry's second line, if it has one, along with its first
        if ((c.word.load(std::memory_order_relaxed) & kHashBits) != want) continue;
        e = &c;
        break;
      }
      if (e != nullptr) r.entry = lock_holding(*e, s0, key);
      return r;
    }

    // Entry e, locked, if it holds `key` and the shard's structure has not changed since its sequence number read
    // s0 (so that e, found through the index read after s0, is still the key's); else nullptr, e left unlocked.
    [[gnu::always_inline]] Entry* lock_holding(Entry& e, std::uint32_t s0, std::string_view key) const {
      e.lock();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq.load(std::memory_order_relaxed) != s0 || !e.key.equals(key)) [[unlikely]] {
        e.unlock();
        return nullptr;
      }
      return &e;
    }

    // For update_many's prefetches, inside an epoch::Guard that has held since `ix` was read: the entry a lookup
    // of hash h in index `ix` would read first (the first slot of its probe run whose tag matches; a key is in its
    // home slot only about half the time at a load of 4/5), or nullptr. Read without the lock, so possibly stale;
    // never outside the tables.
    Entry* entry_hint(const Index& ix, std::uint32_t h) const {
      const Chunks* ch = chunks.load(std::memory_order_seq_cst);
      if (ch == nullptr) return nullptr;
      const std::uint32_t want_tag = tag(h);
      std::size_t i = home(h, ix.size);
      for (std::size_t n = 0; n < kHintProbes; ++n, i = ix.next(i)) {
        const std::uint32_t v = ix.get(i);
        if (v == 0) return nullptr;
        if (tag_of(v) != want_tag) continue;
        const std::uint32_t id = id_of(v);  // once: id_bits is not reread after the acquire below
        if ((id >> kChunkBits) >= ch->size) return nullptr;
        Entry* chunk = ch->data()[id >> kChunkBits].load(std::memory_order_acquire);
        return chunk == nullptr ? nullptr : chunk + (id & (kChunk - 1));
      }
      return nullptr;
    }

    void begin_change() {
      seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_release);
    }
    void end_change() { seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

    // Out of line: it is the slow path of a decision (a new key, or a lookup that saw the structure change), and
    // inlined there it changed, at the compiler's whim, the registers and instructions of the fast path around it.
    [[gnu::noinline]] std::uint32_t find(std::string_view key, std::uint32_t h) const {
      const Index* ix = index.load(std::memory_order_relaxed);
      if (ix == nullptr) return kNil;
      const std::uint32_t want = h & kHashBits, want_tag = tag(h);
      for (std::size_t i = home(h, ix->size);; i = ix->next(i)) {
        const std::uint32_t v = ix->get(i);
        if (v == 0) return kNil;
        if (tag_of(v) != want_tag) continue;
        const Entry& e = at(id_of(v));
        if (e.hash() != want) continue;
        // The key is written only under this shard's lock, which is held: no entry lock needed to read it.
        if (e.key.equals(key)) return id_of(v);
      }
    }

    void place(Index* ix, std::uint32_t id) const {
      const std::uint32_t h = at(id).hash();
      std::size_t i = home(h, ix->size);
      while (ix->get(i) != 0) i = ix->next(i);
      ix->put(i, slot_for(id, h));
    }

    void retire(void* table, std::size_t bytes, void (*destroy)(void*)) {
      retired.push_back(Retired{table, epoch::retire_tag(), bytes, destroy});
    }

    void reclaim() {
      if (retired.empty()) return;
      const std::uint64_t oldest = epoch::oldest_active();
      std::erase_if(retired, [&](const Retired& r) {
        if (r.tag >= oldest) return false;
        r.destroy(r.table);
        return true;
      });
    }

    void grow_index() {
      Index* old = index.load(std::memory_order_relaxed);
      Index* ix = Index::make(next_index_size(old ? old->size : 0, capacity));
      if (old) {
        for (std::size_t i = 0; i < old->size; ++i) {
          if (const std::uint32_t v = old->get(i)) place(ix, id_of(v));
        }
      }
      index.store(ix, std::memory_order_seq_cst);
      if (old) retire(old, Index::bytes(old->size), &Index::destroy);
    }

    std::uint32_t allocate_id() {
      if (free_head != kNil) {
        const std::uint32_t id = free_head;
        free_head = at(id).key.link();
        return id;
      }
      Chunks* c = chunks.load(std::memory_order_relaxed);
      const std::uint32_t chunk = allocated >> kChunkBits;
      if (c == nullptr || chunk >= c->size) {
        Chunks* bigger = Chunks::make(c ? c->size * 2 : 4);
        if (c) {
          for (std::uint32_t i = 0; i < c->size; ++i) {
            bigger->data()[i].store(c->data()[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
          }
        }
        chunks.store(bigger, std::memory_order_seq_cst);
        if (c) retire(c, Chunks::bytes(c->size), &Chunks::destroy);
        c = bigger;
      }
      if (c->data()[chunk].load(std::memory_order_relaxed) == nullptr) {
        c->data()[chunk].store(new_chunk(), std::memory_order_release);
      }
      return allocated++;
    }

    // The clock hand's next victim: the first live key not used since the hand last passed it (clearing the used
    // bits it passes). Ends within two turns: the first clears every bit.
    std::uint32_t victim() {
      for (;;) {
        const std::uint32_t id = hand;
        hand = hand + 1 >= allocated ? 0 : hand + 1;
        Entry& e = at(id);
        if (!e.live()) continue;
        EntryHold hold(e);
        const std::uint32_t w = e.word.load(std::memory_order_relaxed);
        if (!(w & kUsedBit)) return id;
        e.word.store(w & ~kUsedBit, std::memory_order_relaxed);
      }
    }

    std::uint32_t insert(std::string_view key, std::uint32_t h) {
      begin_change();
      if (size >= capacity) {
        remove(victim());
        ++evictions;
      }
      const Index* ix = index.load(std::memory_order_relaxed);
      if (ix == nullptr || (std::size_t{size} + 1) * 5 > std::size_t{ix->size} * 4) grow_index();
      const std::uint32_t id = allocate_id();
      Entry& e = at(id);
      {
        EntryHold hold(e);  // a lookup that raced a change may be holding it for a moment
        e.key.assign(key);
        key_heap_bytes += e.key.heap_bytes();
        e.word.store(kLockBit | (h & kHashBits), std::memory_order_relaxed);
        e.state = State{};
      }
      place(index.load(std::memory_order_relaxed), id);
      ++size;
      end_change();
      reclaim();
      return id;
    }

    // Inside begin_change()/end_change().
    void remove(std::uint32_t id) {
      Index* ix = index.load(std::memory_order_relaxed);
      Entry& e = at(id);
      std::size_t i = home(e.hash(), ix->size);
      while (ix->get(i) != slot_for(id, e.hash())) i = ix->next(i);
      // Backward-shift deletion: pull later members of the probe run into the hole when their home allows it.
      for (std::size_t j = ix->next(i); ix->get(j) != 0; j = ix->next(j)) {
        const std::size_t from = home(at(id_of(ix->get(j))).hash(), ix->size);
        const bool stays = (i <= j) ? (i < from && from <= j) : (i < from || from <= j);
        if (stays) continue;
        ix->put(i, ix->get(j));
        i = j;
      }
      ix->put(i, 0);
      {
        EntryHold hold(e);
        key_heap_bytes -= e.key.heap_bytes();
        e.key.make_free(free_head);
        e.state = State{};  // frees whatever the state holds
        e.word.store(kLockBit, std::memory_order_relaxed);
      }
      free_head = id;
      --size;
    }
  };

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
    if (e.key.equals(key)) [[likely]] return &e;
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

  // Entries come in chunks aligned to a cache line, so that a 32-byte entry never straddles two.
  static Entry* new_chunk() {
    auto* chunk = static_cast<Entry*>(::operator new(kChunk * sizeof(Entry), std::align_val_t{64}));
    for (std::uint32_t i = 0; i < kChunk; ++i) new (chunk + i) Entry;
    return chunk;
  }
  static void free_chunk(Entry* chunk) {
    if (chunk == nullptr) return;
    for (std::uint32_t i = 0; i < kChunk; ++i) chunk[i].~Entry();
    ::operator delete(chunk, std::align_val_t{64});
  }
  static void prefetch_entry(const Entry* e) {
    __builtin_prefetch(e, 1);
    if constexpr (sizeof(Entry) > 32) __builtin_prefetch(reinterpret_cast<const char*>(e + 1) - 1, 1);
  }

  // An index of `slots` slots keeps capacity keys at load <= 4/5; it grows by half (fewer bytes a key than by
  // doubling), never beyond what the shard's capacity needs.
  static std::uint32_t index_slots_for(std::uint32_t capacity) { return capacity + capacity / 4 + 1; }
  static std::uint32_t next_index_size(std::uint32_t old, std::uint32_t capacity) {
    return std::min(index_slots_for(capacity), std::max<std::uint32_t>(16, old + old / 2));
  }

  Shard& shard_for(std::uint64_t h) const { return shards_[shard_bits_ ? h >> (64 - shard_bits_) : 0]; }

  KeyHasher hash_;  // hash_key with the store's seed
  std::uint64_t serial_ = last_key::new_store_serial();  // this store's name in the threads' last_key hints
  unsigned shard_bits_ = 0;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace rk::store
