// store/memory/last_key.h: per thread, the key it last decided on in an in-process store and that key's entry, so
// that the next decision on the same key (a hot key) goes straight to the entry: no hash, no index, no epoch guard.
//
//   if (void* e = last_key::find(serial, key)) { lock e; if its key is `key`: decide on it; else unlock }
//   ... the ordinary path finds entry e for key ...  last_key::remember(serial, key, e);
//
// A hint only. The caller locks the entry and compares its key under the entry's lock before it decides, as a
// lookup through the index does; an entry's memory lives as long as its store (chunks are freed only with the
// store), so a stale hint (the key erased, evicted, moved) costs one lock and unlock, and the decision then takes
// the ordinary path. A store is named by a serial number never handed out twice, so that a hint left by a store
// since destroyed is never followed. Keys up to kMax bytes are remembered (a longer one never matches).
//
// Thread safety: each thread reads and writes its own hint alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/memory/compact_key.h"

namespace rk::store::memory::last_key {

inline constexpr std::size_t kMax = CompactKey::kInline;

struct Hint {
  std::uint64_t store = 0;  // the store's serial; 0: none
  void* entry = nullptr;
  std::uint32_t len = 0;
  char key[kMax] = {};
};

// Trivial and constant-initialised, so that it is reached without a TLS wrapper call.
extern constinit thread_local Hint t_hint;

// A serial for a new store: never 0, never handed out twice.
std::uint64_t new_store_serial() noexcept;

// The entry this thread last used for `key` in the store numbered `store`, or nullptr.
[[gnu::always_inline]] inline void* find(std::uint64_t store, std::string_view key) {
  const Hint& h = t_hint;
  if (h.store != store || h.len != key.size() || !CompactKey::same_inline(h.key, key.data(), h.len)) return nullptr;
  return h.entry;
}

[[gnu::always_inline]] inline void remember(std::uint64_t store, std::string_view key, void* entry) {
  if (key.size() > kMax) return;
  Hint& h = t_hint;
  h.store = store;
  h.entry = entry;
  h.len = static_cast<std::uint32_t>(key.size());
  CompactKey::copy_inline(h.key, key.data(), h.len);
}

}  // namespace rk::store::memory::last_key
