#include "store/memory/epoch.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <limits>

namespace rk::store::memory::epoch {

namespace detail {

namespace {

#if defined(__SANITIZE_THREAD__)
#define RK_EPOCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RK_EPOCH_TSAN 1
#endif
#endif

bool register_membarrier() {
#if defined(RK_EPOCH_TSAN)
  return false;
#else
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

}  // namespace

std::atomic<std::uint64_t> g_epoch{1};
constinit thread_local Local t_local;
// Decided once, before main (Guards made earlier, by other static initialisers, see false: the safe path).
const bool g_asymmetric = register_membarrier();

namespace {

std::atomic<Slot*> g_slots{nullptr};

// Gives the thread's slot back when the thread exits (t_local itself has no destructor, to stay cheap to reach).
struct Release {
  ~Release() {
    Local& l = t_local;
    if (l.slot == nullptr) return;
    l.slot->active.store(0, std::memory_order_release);
    l.slot->taken.store(false, std::memory_order_release);
    l.slot = nullptr;
  }
};

}  // namespace

Slot* take_slot() {
  static thread_local Release release;
  (void)&release;  // constructed on first use: its destructor runs at this thread's exit
  for (Slot* s = g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    bool expected = false;
    if (!s->taken.load(std::memory_order_relaxed) &&
        s->taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      return s;
    }
  }
  auto* s = new Slot;
  s->taken.store(true, std::memory_order_relaxed);
  Slot* head = g_slots.load(std::memory_order_relaxed);
  do {
    s->next = head;
  } while (!g_slots.compare_exchange_weak(head, s, std::memory_order_release, std::memory_order_relaxed));
  return s;
}

}  // namespace detail

std::uint64_t retire_tag() noexcept { return detail::g_epoch.fetch_add(1, std::memory_order_seq_cst); }

std::uint64_t oldest_active() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Should the barrier fail (a forked child whose registration did not follow it), nothing may be freed: the
  // readers' announcements are then not known to be visible. Retired tables stay until the store is destroyed.
  if (detail::g_asymmetric && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) return 0;
  std::uint64_t oldest = std::numeric_limits<std::uint64_t>::max();
  for (detail::Slot* s = detail::g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    const std::uint64_t a = s->active.load(std::memory_order_seq_cst);
    if (a != 0 && a < oldest) oldest = a;
  }
  return oldest;
}

}  // namespace rk::store::memory::epoch
