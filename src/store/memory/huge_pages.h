// store/memory/huge_pages.h: the in-process store's big memory on transparent huge pages (2 MiB).
//
// Why: a decision over a million keys misses the cache on its index slot and on its entry, and on 4 KiB pages each
// of those also misses the TLB (tens of megabytes span ~10,000 pages, several times what the TLB holds), so a page
// walk adds misses of its own. On 2 MiB pages the same entries span a few dozen pages, which the TLB keeps. A
// glibc tunable (glibc.malloc.hugetlb=1) does this for a whole process, but a library cannot set it for the
// programs that embed it, so the store maps its big memory itself (bench/RESULTS.md has the figures).
//
// A store's Arena gives it that memory, from the heap until the store holds a huge page's worth of entries (a small
// store costs what it did), then:
//  - Entry chunks (fixed size, never freed before the store) and index tables (replaced as a shard grows) of up to
//    256 KiB are carved from 2 MiB slabs. A slab is kept off huge pages while it fills (its untouched rest then
//    costs nothing); once full it is advised and collapsed into a huge page (MADV_COLLAPSE, Linux >= 6.1; where
//    that is refused, khugepaged collapses it later). A table given back becomes chunk-sized pieces, which the next
//    chunks take before any new slab memory: the entries grow faster than the index, so few wait there for long.
//    (A table of 256 KiB to 2 MiB, a shard of 50,000 to 400,000 keys, stays on the heap: one that did not fit would
//    leave too much of a slab to pieces.)
//  - A table of a huge page or more gets its own mapping at a 2 MiB boundary, advised before it is touched.
// Where the kernel refuses the advice (THP off or absent) the memory is ordinary pages and everything still works.
//
//   Arena arena(256 * 32);
//   void* chunk = arena.chunk();                // 64-byte aligned, 8 KiB; freed with the arena
//   void* table = arena.table(100'000);         // 64-byte aligned
//   arena.free_table(table, 100'000);
//
// Thread safety: map/unmap/mapped_bytes from any thread; an Arena's members from any thread (its own lock).
// Invariants (Arena): chunks come from the heap only while fewer than a huge page's worth and no slab exists; every
// slab but the last is closed (collapsed); `live_` counts the slab bytes handed out and not given back.
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

class Arena {
 public:
  // chunk_bytes: a multiple of 64, at most kHugePageBytes.
  explicit Arena(std::size_t chunk_bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Uninitialised memory for one chunk, 64-byte aligned, kept until the arena is destroyed. Throws std::bad_alloc.
  void* chunk();
  // Uninitialised memory for a table of `bytes`, 64-byte aligned; given back with free_table(p, bytes).
  void* table(std::size_t bytes);
  void free_table(void* p, std::size_t bytes);
  // What a table of `bytes` takes: whole pages when it has its own mapping.
  static std::size_t table_held(std::size_t bytes);

  // The slab memory beyond what is handed out (each closed slab's unused tail and given-back pieces not taken
  // again, the open slab's partly used page), and the arena's lists: with the chunks and tables, all it holds.
  std::size_t overhead_bytes() const;
  // The bytes of slabs (huge-page memory once closed).
  std::size_t slab_bytes() const;
  bool on_slab(const void* p) const;
  // overhead_bytes()'s most for a full store of `chunks` chunks and `tables` tables of `tables_bytes` made over its
  // life, the last of each shard's summing to `last_tables_bytes` (a table that does not fit closes its slab early:
  // what the slab had left becomes pieces).
  static std::size_t worst_overhead(std::size_t chunk_bytes, std::size_t chunks, std::size_t tables,
                                    std::size_t tables_bytes, std::size_t last_tables_bytes);

 private:
  bool on_heap() const;  // under lock_: slabs not begun
  // Under lock_: `bytes` from the open slab, or from a new one if they do not fit; `closed` is then the slab this
  // closed, for collapse() once the lock is released.
  char* carve(std::size_t bytes, char*& closed);
  void recycle(char* p, std::size_t bytes);  // under lock_: chunk-sized pieces to free_
  static void collapse(char* slab);

  const std::size_t chunk_bytes_;
  mutable std::mutex lock_;
  std::vector<void*> heap_;    // the first chunks, before the first slab
  std::vector<char*> slabs_;   // the last one open
  std::vector<char*> free_;    // chunk-sized pieces of given-back slab memory
  std::size_t used_ = 0;       // bytes carved from the open slab
  std::size_t live_ = 0;       // slab bytes handed out and not given back
};

}  // namespace rk::store::huge_pages
