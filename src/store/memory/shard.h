// store/memory/shard.h: one shard of the in-process store (sharded_store.h, whose opening says how a decision
// finds its key and what every shard keeps true): an open-addressing index of 32-bit slots over entries
// (entry.h) allocated in chunks, the shard's lock, its CLOCK hand and its counters; the lock-free lookup, and
// insertion, eviction and removal under the lock.
//
// Thread safety: seq, index and chunks are read without the lock (a lookup, an update_many's prefetch); everything
// else, and every write, is under the shard's lock. A table a lookup may still be reading is retired, not freed,
// until every epoch::Guard older than its retirement has ended (epoch.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>
#include <type_traits>
#include <vector>

#include "store/memory/entry.h"
#include "store/memory/epoch.h"
#include "base/spin_lock.h"

namespace rk::store::memory::sharded {

inline constexpr std::size_t kHintProbes = 16;  // update_many's prefetch gives up on longer probe runs
inline constexpr std::uint32_t kNil = 0xFFFFFFFFu;
// The most used keys one eviction's search passes (clearing their bits): a key used once every size / kHandStep
// evictions of its shard is never the one evicted (sharded_store.h).
inline constexpr std::uint32_t kHandStep = 8;
inline constexpr unsigned kChunkBits = 8;
inline constexpr std::uint32_t kChunk = 1u << kChunkBits;

// The home slot of a key's hash h in an index of `slots` slots: from h's high bits (multiply-shift), so the index
// may have any size.
inline std::size_t home(std::uint32_t h, std::size_t slots) { return (std::uint64_t{h & kHashBits} * slots) >> 30; }

// An index of `slots` slots keeps capacity keys at load <= 4/5; it grows by half (fewer bytes a key than by
// doubling), never beyond what the shard's capacity needs.
inline std::uint32_t index_slots_for(std::uint32_t capacity) { return capacity + capacity / 4 + 1; }
inline std::uint32_t next_index_size(std::uint32_t old, std::uint32_t capacity) {
  return std::min(index_slots_for(capacity), std::max<std::uint32_t>(16, old + old / 2));
}

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
template <class State>
using Chunks = Table<Entry<State>*>;

struct Unguarded {};  // in place of an epoch::Guard the caller holds

template <class State>
struct Found {
  Entry<State>* entry = nullptr;  // locked, when found without the shard lock
  bool absent = false;            // not tracked, known without the shard lock
};

template <class State>
struct alignas(64) Shard {
  using Entry = sharded::Entry<State>;
  using EntryHold = sharded::EntryHold<State>;
  using Chunks = sharded::Chunks<State>;
  using Found = sharded::Found<State>;

  // A table replaced while lookups may still read it, freed once no epoch::Guard as old as its tag remains.
  struct Retired {
    void* table;
    std::uint64_t tag;
    std::size_t bytes;
    void (*destroy)(void*);
  };

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
  alignas(64) mutable base::SpinLock lock;
  std::uint32_t size = 0;
  std::uint32_t allocated = 0;  // ids below this have been handed out at least once
  std::uint32_t free_head = kNil;
  std::uint32_t hand = 0;       // the clock hand: the next entry eviction looks at
  std::uint32_t newest = kNil;  // the entry insert() filled last, while it holds that key; else kNil
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

  // The clock hand's next victim: the first live key not used since the hand last passed it, clearing the used bits
  // it passes; but one search clears at most kHandStep of them, so that a whole turn of the hand takes at least
  // size / kHandStep evictions, and a key cleared by one search is not taken by the next a moment later. When those
  // kHandStep keys were all used, the victim is the key inserted last (the shard's newest: every other key has
  // outlived it), or, were it gone, the first of them.
  std::uint32_t victim() {
    const std::uint32_t most = std::min(kHandStep, size);
    std::uint32_t first = kNil;
    for (std::uint32_t passed = 0;;) {
      const std::uint32_t id = hand;
      hand = hand + 1 >= allocated ? 0 : hand + 1;
      Entry& e = at(id);
      if (!e.live()) continue;
      EntryHold hold(e);
      const std::uint32_t w = e.word.load(std::memory_order_relaxed);
      if (!(w & kUsedBit)) return id;
      e.word.store(w & ~kUsedBit, std::memory_order_relaxed);
      if (first == kNil) first = id;
      if (++passed == most) return newest != kNil ? newest : first;
    }
  }

  std::uint32_t insert(std::string_view key, std::uint32_t h) {
    begin_change();
    if (size >= capacity) {
      remove(victim());
      ++evictions;
    }
    newest = kNil;
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
    newest = id;
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
    if (newest == id) newest = kNil;
  }

  // Entries come in chunks aligned to a cache line, so that a 32-byte entry never straddles two.
  static Entry* new_chunk() {
    auto* chunk = static_cast<Entry*>(::operator new (kChunk * sizeof(Entry), std::align_val_t{64}));
    for (std::uint32_t i = 0; i < kChunk; ++i) new (chunk + i) Entry;
    return chunk;
  }
  static void free_chunk(Entry* chunk) {
    if (chunk == nullptr) return;
    for (std::uint32_t i = 0; i < kChunk; ++i) chunk[i].~Entry();
    ::operator delete (chunk, std::align_val_t{64});
  }
};

}  // namespace rk::store::memory::sharded
