// store/memory/entry.h: one key's entry in the in-process store (sharded_store.h): its key, the algorithm's state,
// and one 32-bit word that is at once the entry's lock, the clock hand's "used" bit and the key's hash.
//
//   EntryHold<State> hold(entry, /*use=*/true);  // the entry locked for the scope, marked used as it unlocks
//   decide(entry.state);
//
// Thread safety: the state is read and written only under the entry's lock (kLockBit in its word). The key is
// written only with both its shard's lock and the entry's held, so that either is enough to read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "store/memory/compact_key.h"
#include "base/spin_lock.h"

namespace rk::store::memory::sharded {

inline constexpr std::uint32_t kLockBit = 0x80000000u;   // in an entry's word: the entry's lock
inline constexpr std::uint32_t kUsedBit = 0x40000000u;   // in an entry's word: decided on since the hand passed
inline constexpr std::uint32_t kHashBits = 0x3FFFFFFFu;  // in an entry's word: the key's hash (home bits included)

template <class State>
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
      for (unsigned i = 0; i < pause; ++i) base::cpu_relax();
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
template <class State>
struct EntryHold {
  using Entry = sharded::Entry<State>;

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

// Fetches the entry's cache line for writing, and the next one too when an entry may straddle two (over 32 bytes).
template <class State>
inline void prefetch_entry(const Entry<State>* e) {
  __builtin_prefetch(e, 1);
  if constexpr (sizeof(Entry<State>) > 32) __builtin_prefetch(reinterpret_cast<const char*>(e + 1) - 1, 1);
}

}  // namespace rk::store::memory::sharded
