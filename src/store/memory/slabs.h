// store/memory/slabs.h: memory for a large store's entries, in 2 MiB-aligned regions the kernel may back with huge
// pages (transparent huge pages asked for by madvise).
//
// Over a million keys, the entry a decision reads lies anywhere in tens of megabytes: with 4 KiB pages nearly every
// decision also misses the TLB and walks the page tables before its cache miss. One 2 MiB page covers 512 times as
// much. A bump allocator: blocks are handed out, never given back one at a time, and the regions are unmapped when
// the Slabs are destroyed (a store frees its chunks of entries only then). Without huge pages (madvise refused, THP
// off) the regions are plain anonymous memory.
//
//   Slabs slabs;
//   void* chunk = slabs.allocate(256 * sizeof(Entry));   // 64-byte aligned, zero-filled
//
// Thread safety: allocate() and the byte counts may be called from any thread (a mutex; allocation is rare).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace rk::store {

class Slabs {
 public:
  static constexpr std::size_t kRegion = std::size_t{2} << 20;

  Slabs() = default;
  ~Slabs();
  Slabs(const Slabs&) = delete;
  Slabs& operator=(const Slabs&) = delete;

  // `bytes` at most kRegion. Throws std::bad_alloc when the system has no memory to map.
  void* allocate(std::size_t bytes);
  // Mapped and not handed out: the tail of each region too small for the next block, and the current region's rest.
  std::size_t slack_bytes() const;

  // The most mapped for `blocks` blocks of `block_bytes`.
  static std::size_t worst_bytes(std::size_t blocks, std::size_t block_bytes) {
    const std::size_t per_region = kRegion / ((block_bytes + 63) & ~std::size_t{63});
    return (blocks + per_region - 1) / per_region * kRegion;
  }

 private:
  mutable std::mutex mu_;
  std::vector<char*> regions_;
  std::size_t used_ = kRegion;  // of the last region
  std::size_t handed_out_ = 0;
};

}  // namespace rk::store
