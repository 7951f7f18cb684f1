// store/memory/epoch.h: epoch-based reclamation for the in-process store's lock-free lookups.
//
// A decision on a key the store already tracks reads the shard's index without taking the shard's lock. The index
// (and the table of entry chunks) may meanwhile be replaced by a larger one; the old one may only be freed once no
// thread can still be reading it. Readers announce themselves with a Guard for the length of one lookup; a writer
// that unpublishes a table tags it with retire_tag() and frees it once oldest_active() is above the tag.
//
// Each thread announces in a slot of its own (a cache line no other thread writes), so a lookup writes nothing
// that another core reads: entering and leaving are one plain store each on the thread's own line. The store
// that enters must not be reordered after the lookup's first read; rather than a fence on every lookup, the rare
// reclaimer makes every running thread of the process execute one (Linux membarrier, "private expedited"), which
// orders each reader's announcement either before the reclaimer's scan or its reads after the new table was
// published. Where membarrier is unavailable (and under ThreadSanitizer, which does not model it) entering is an
// exchange instead: a full fence of its own. Slots are process-wide, reused after a thread exits, never freed.
#pragma once

#include <atomic>
#include <cstdint>

namespace rk::store::memory::epoch {

namespace detail {

struct alignas(64) Slot {
  std::atomic<std::uint64_t> active{0};  // 0: outside any Guard; otherwise the epoch the Guard entered in
  std::atomic<bool> taken{false};
  Slot* next = nullptr;  // immutable once published
};

struct Local {
  Slot* slot = nullptr;
  unsigned depth = 0;
};

extern std::atomic<std::uint64_t> g_epoch;
// True when the reclaimer fences the readers (membarrier registered): readers then enter with a plain store.
extern const bool g_asymmetric;
// Trivial and constant-initialised, so that a Guard reaches it without a TLS wrapper call.
extern constinit thread_local Local t_local;

// Takes a slot for this thread (and gives it back when the thread exits).
Slot* take_slot();

}  // namespace detail

// While a Guard lives, nothing unpublished after it was made is freed. Nests (only the outermost counts).
class Guard {
 public:
  Guard() {
    detail::Local& l = detail::t_local;
    if (l.depth++ != 0) return;
    if (l.slot == nullptr) l.slot = detail::take_slot();
    const std::uint64_t e = detail::g_epoch.load(std::memory_order_acquire);
    if (detail::g_asymmetric) {
      l.slot->active.store(e, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler's part; the CPU's is the reclaimer's
    } else {
      // An exchange: a full fence, and a read-modify-write, so the release store that ended this thread's previous
      // Guard still heads the release sequence a reclaimer reads.
      l.slot->active.exchange(e, std::memory_order_seq_cst);
    }
  }
  ~Guard() {
    detail::Local& l = detail::t_local;
    if (--l.depth == 0) l.slot->active.store(0, std::memory_order_release);
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

// Call after unpublishing something readers may hold (the replacement already published, seq_cst): returns its
// tag. It may be freed once oldest_active() > tag.
std::uint64_t retire_tag() noexcept;

// The oldest epoch a live Guard entered in, or UINT64_MAX when none is live (0 when it cannot be known).
std::uint64_t oldest_active() noexcept;

}  // namespace rk::store::memory::epoch
