#include "store/memory/last_key.h"

#include <atomic>

namespace rk::store::memory::last_key {

constinit thread_local Hint t_hint;

std::uint64_t new_store_serial() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace rk::store::memory::last_key
