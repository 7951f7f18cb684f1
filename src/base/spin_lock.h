// base/spin_lock.h: a test-and-test-and-set lock for critical sections of a few dozen nanoseconds.
//
// A shard's lock is held only around one algorithm step on one key; a futex-based mutex costs more than that
// step when uncontended. After a short spin the waiter yields, so a preempted holder is not starved.
#pragma once

#include <atomic>
#include <thread>

namespace rk::base {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
        } else {
          cpu_relax();
        }
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace rk::base
