// store/memory/huge_pages.h: the in-process store's big memory on transparent huge pages (2 MiB).
//
// Why: a decision over a million keys misses the cache on its index slot and on its entry, and on 4 KiB pages each
// of those also misses the TLB (tens of megabytes span ~10,000 pages, several times what the TLB holds), so a page
// walk adds misses of its own. On 2 MiB pages the same entries span a few dozen pages, which the TLB keeps. A
// glibc tunable (glibc.malloc.hugetlb=1) does this for a whole process, but a library cannot set it for the
// programs that embed it, so the store maps its big memory itself (bench/RESULTS.md has the figures).
//
// Two kinds of memory:
//  - A table (an index) of at least a huge page: map() gives it memory at a 2 MiB boundary, advised with
//    madvise(MADV_HUGEPAGE) before it is touched, so its pages fault in whole; unmap() returns it.
//  - Entry chunks (fixed size, never freed before their store): a ChunkArena hands them out, from the heap until the
//    store holds a huge page's worth (a small store costs what it did), then carved from 2 MiB slabs. A slab is kept
//    off huge pages while it fills (its untouched rest then costs nothing); once full it is advised and collapsed
//    into a huge page (MADV_COLLAPSE, Linux >= 6.1; where that is refused, khugepaged collapses it later).
// Where the kernel refuses the advice (THP off or absent) the memory is ordinary pages and everything still works.
//
//   ChunkArena arena(256 * 32);
//   void* chunk = arena.allocate();  // 64-byte aligned, 8 KiB; freed with the arena
//
// Thread safety: map/unmap/mapped_bytes from any thread; a ChunkArena's members from any thread (its own lock).
// Invariants (ChunkArena): the heap holds chunks only while fewer than a huge page's worth; every slab but the
// last is full; `used_` <= kHugePageBytes.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace rk::store::huge_pages {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` of zeroed memory at a kHugePageBytes boundary, advised for huge pages. Throws std::bad_alloc.
void* map(std::size_t bytes);
void unmap(void* p, std::size_t bytes);
// What map(bytes) takes: bytes rounded up to whole (small) pages.
std::size_t mapped_size(std::size_t bytes);
// Bytes this process has mapped through map() and ChunkArena's slabs, now (malloc's statistics do not see them).
std::size_t mapped_bytes();

class ChunkArena {
 public:
  // chunk_bytes: a multiple of 64, at most kHugePageBytes.
  explicit ChunkArena(std::size_t chunk_bytes);
  ~ChunkArena();
  ChunkArena(const ChunkArena&) = delete;
  ChunkArena& operator=(const ChunkArena&) = delete;

  // Uninitialised memory for one chunk, 64-byte aligned, kept until the arena is destroyed. Throws std::bad_alloc.
  void* allocate();
  // The memory taken beyond chunk_bytes for every chunk handed out: each full slab's tail (what is left when
  // chunk_bytes does not divide a huge page), the last slab's partly used page, and the lists of chunks and slabs.
  std::size_t overhead_bytes() const;
  // The bytes of slabs (huge-page memory once full).
  std::size_t slab_bytes() const;
  bool on_slab(const void* p) const;
  // overhead_bytes()'s most, with `chunks` chunks handed out.
  static std::size_t worst_overhead(std::size_t chunk_bytes, std::size_t chunks);

 private:
  const std::size_t chunk_bytes_;
  mutable std::mutex lock_;
  std::vector<void*> heap_;  // the first chunks, before the first slab
  std::vector<char*> slabs_;
  std::size_t used_ = 0;  // bytes handed out of the last slab
};

}  // namespace rk::store::huge_pages
