// store/shm/shard_table.h: the keys of a shared store's region and their states (region.h's bytes), whatever the
// states mean: each shard's index of keys, and one update of a key's state at a time under the shard's lock. The
// rate algorithms' store (shm_store.cc) and the leases of `concurrency` (shm_leases.cc) both decide through it.
//
//   ShardTable t(region);
//   t.update(key, fresh, Mode::kChange, [](unsigned char* state, bool found) { ...; return true; }, evictable);
//
// Crash safety. A shard's index (bucket chains, LRU list, free list) is derived data: after a process dies holding
// the shard's lock, the next locker rebuilds it from the slots alone (in_use, hash, key, tick). A slot's in_use
// flag is cleared before its key is overwritten and set only once key and state are in place. A state is changed
// only after it has been saved in the shard's journal; the next locker puts a journalled state back, so a
// half-made update is undone (the process that made it died before it could answer).
//
// Corruption. Any process that maps the region can write anything into it, so nothing read from it is used
// unchecked: the header's layout is checked once on attach and then kept in this process's memory (a later write
// to the header changes nothing here); every index is checked before it addresses a slot, every chain walk stops
// at the shard's slot count, and what fails throws SharedRegionCorrupt, which releases the shard's lock on its way
// out. Every index this code writes is in range, so a shard stays addressable even when its lists are wrong.
//
// Thread safety: a shard's slots and index are read and written only under its lock; the region's layout and seed
// are this process's copies, never written after the table is made.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ratekeeper/shared.h"
#include "store/shm/region.h"
#include "store/shm/testing.h"

namespace rk::store::shm {

// A state's bytes outside the region: on the stack for a rate algorithm's, on the heap for leases.
class StateCopy {
 public:
  explicit StateCopy(std::size_t n)
      : data_(n <= kStateBytes ? small_ : (big_ = std::make_unique<unsigned char[]>(n)).get()) {}
  unsigned char* data() { return data_; }

 private:
  alignas(8) unsigned char small_[kStateBytes] = {};
  std::unique_ptr<unsigned char[]> big_;
  unsigned char* data_;
};

class ShardTable {
 public:
  explicit ShardTable(Region& region) : region_(region) {}

  enum class Mode {
    kPeek,          // f's changes are dropped; the LRU order is left alone
    kChange,        // a key not found is made from `fresh`; f's changes are kept
    kChangeIfFound  // as kChange for a key found; a key not found is not made (f sees `fresh`, nothing is kept)
  };
  struct Update {
    bool found = false;
    bool full = false;  // a new key found no slot: none free, and the least recently used one not evictable
  };
  // Under the key's shard lock: calls f(state, found) on a copy of the key's state (of `fresh` when not found;
  // layout().state_bytes, `fresh` padded with zeros). When the mode changes and f answers true, the copy is
  // journalled and written back; when f answers false, the key is freed (its state is as good as fresh). A new key
  // in a full shard takes the slot of the least recently used key of the eight least recently used for which
  // evictable(its state); else f sees `fresh`, nothing is kept, and the answer says `full`.
  template <class F, class Evictable>
  Update update(std::string_view key, std::span<const unsigned char> fresh, Mode mode, F&& f, Evictable&& evictable);

  // Frees the key's slot; false if it held none.
  bool erase(std::string_view key);
  SharedStats stats() const;

 private:
  class Locked {
   public:
    Locked(const Region& r, std::size_t s);
    ~Locked() { pthread_mutex_unlock(mu_); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    pthread_mutex_t* mu_;
  };

  static void repair(const Region& r, std::size_t s);
  static std::size_t bucket_of(const Layout& l, std::uint64_t hash) { return (hash >> 32) % l.buckets_per_shard; }
  [[noreturn]] void corrupt(std::size_t s, const std::string& what) const;
  std::uint32_t index(std::size_t s, const std::uint32_t& in_region, const char* what) const;
  std::uint32_t* chain_link(std::size_t s, std::size_t b, std::uint32_t stop_at, std::uint64_t hash,
                            std::string_view key) const;
  std::uint32_t find(std::size_t s, std::uint64_t hash, std::string_view key) const;
  void lru_unlink(ShardHeader& sh, std::size_t s, SlotHead& slot);
  void lru_push_front(ShardHeader& sh, std::size_t s, std::uint32_t i);
  void touch(std::size_t s, std::uint32_t i);
  void remove(std::size_t s, std::uint32_t i);
  void free_slot(std::size_t s, std::uint32_t i);
  static constexpr std::size_t kEvictionCandidates = 8;
  // A slot for a new key: a free one, or one of the least recently used if evictable(its state); kNil if neither.
  template <class Evictable>
  std::uint32_t take_slot(std::size_t s, Evictable&& evictable);
  void place(std::size_t s, std::uint32_t i, std::uint64_t hash, std::string_view key,
             std::span<const unsigned char> fresh);
  std::size_t shard_of(std::string_view key, std::uint64_t& hash) const;

  Region& region_;
};

template <class Evictable>
std::uint32_t ShardTable::take_slot(std::size_t s, Evictable&& evictable) {
  ShardHeader& sh = region_.shard(s);
  std::uint32_t i = index(s, sh.free_head, "the free list's head");
  if (i != kNil) {
    sh.free_head = index(s, region_.slot(s, i).lru_next, "a free list link");
    return i;
  }
  // Full: of the few least recently used keys, the oldest that may go. A bounded walk, so that a shard full of
  // keys that may not go costs a new key at most kEvictionCandidates looks.
  i = index(s, sh.lru_tail, "the LRU list's tail");
  if (i == kNil) corrupt(s, "it has neither a free slot nor a key to evict");
  for (std::size_t looked = 0; i != kNil && looked < kEvictionCandidates; ++looked) {
    SlotHead& slot = region_.slot(s, i);
    if (evictable(static_cast<const unsigned char*>(Region::state_of(slot)))) {
      remove(s, i);
      ++sh.evictions;
      return i;
    }
    i = index(s, slot.lru_prev, "an LRU link");
  }
  return kNil;
}

template <class F, class Evictable>
ShardTable::Update ShardTable::update(std::string_view key, std::span<const unsigned char> fresh, Mode mode, F&& f,
                                      Evictable&& evictable) {
  std::uint64_t hash = 0;
  const std::size_t s = shard_of(key, hash);
  const std::size_t bytes = region_.layout().state_bytes;
  Locked lock(region_, s);
  Update u;
  std::uint32_t i = find(s, hash, key);
  u.found = i != kNil;
  const bool record = mode != Mode::kPeek;
  if (i == kNil && mode == Mode::kChange) {
    i = take_slot(s, evictable);
    if (i == kNil) u.full = true;
    else place(s, i, hash, key, fresh);
  } else if (i != kNil && record) {
    touch(s, i);  // a peek leaves the LRU order alone
  }
  StateCopy copy(bytes);
  if (i == kNil) {
    std::memcpy(copy.data(), fresh.data(), std::min(fresh.size(), bytes));
    f(copy.data(), false);
    return u;
  }
  unsigned char* state = Region::state_of(region_.slot(s, i));
  std::memcpy(copy.data(), state, bytes);
  const bool keep = f(copy.data(), u.found);
  if (!record) return u;
  if (!keep) {
    remove(s, i);
    free_slot(s, i);
    return u;
  }
  // Journal, write, clear: a death in between is undone by the next locker.
  ShardHeader& sh = region_.shard(s);
  std::memcpy(region_.journal(s), state, bytes);
  sh.journal_slot.store(i, std::memory_order_release);
  store::shm_testing::reached(store::shm_testing::Stage::kJournalled);
  std::memcpy(state, copy.data(), bytes);
  store::shm_testing::reached(store::shm_testing::Stage::kWritten);
  sh.journal_slot.store(kNil, std::memory_order_release);
  return u;
}

}  // namespace rk::store::shm
