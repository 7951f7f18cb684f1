#include "store/memory/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>

namespace rk::store::huge_pages {

namespace {

#ifdef MADV_COLLAPSE
constexpr int kMadvCollapse = MADV_COLLAPSE;
#else
constexpr int kMadvCollapse = 25;  // Linux >= 6.1's number; older kernels answer EINVAL, which is ignored
#endif

std::atomic<std::size_t> g_mapped{0};

std::size_t page_bytes() {
  static const std::size_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  return page;
}

// `bytes` (whole pages) at a huge page's boundary: mmap as much again, then the unaligned ends are given back.
char* reserve(std::size_t bytes) {
  void* p = mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (aligned > start) munmap(p, aligned - start);
  const std::uintptr_t end = start + bytes + kHugePageBytes;
  if (end > aligned + bytes) munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
  g_mapped.fetch_add(bytes, std::memory_order_relaxed);
  return reinterpret_cast<char*>(aligned);
}

// Room for one more element, made before the memory it will hold is taken (so that push_back cannot throw after).
template <class T>
void make_room(std::vector<T>& v) {
  if (v.size() == v.capacity()) v.reserve(std::max<std::size_t>(8, v.size() * 2));
}

}  // namespace

std::size_t mapped_size(std::size_t bytes) { return (bytes + page_bytes() - 1) / page_bytes() * page_bytes(); }

void* map(std::size_t bytes) {
  const std::size_t size = mapped_size(bytes);
  char* p = reserve(size);
  madvise(p, size, MADV_HUGEPAGE);  // refused where THP is off or absent: then ordinary pages
  return p;
}

void unmap(void* p, std::size_t bytes) {
  const std::size_t size = mapped_size(bytes);
  munmap(p, size);
  g_mapped.fetch_sub(size, std::memory_order_relaxed);
}

std::size_t mapped_bytes() { return g_mapped.load(std::memory_order_relaxed); }

ChunkArena::ChunkArena(std::size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}

ChunkArena::~ChunkArena() {
  for (void* chunk : heap_) ::operator delete(chunk, std::align_val_t{64});
  for (char* slab : slabs_) unmap(slab, kHugePageBytes);
}

void* ChunkArena::allocate() {
  char* full = nullptr;
  void* chunk;
  {
    std::lock_guard guard(lock_);
    if (slabs_.empty() && heap_.size() * chunk_bytes_ < kHugePageBytes) {
      make_room(heap_);
      chunk = ::operator new(chunk_bytes_, std::align_val_t{64});
      heap_.push_back(chunk);
      return chunk;
    }
    if (slabs_.empty() || used_ + chunk_bytes_ > kHugePageBytes) {
      make_room(slabs_);
      char* slab = reserve(kHugePageBytes);
      // Not on a huge page while it fills, even where THP is "always": its untouched rest costs nothing.
      madvise(slab, kHugePageBytes, MADV_NOHUGEPAGE);
      slabs_.push_back(slab);
      used_ = 0;
    }
    chunk = slabs_.back() + used_;
    used_ += chunk_bytes_;
    if (used_ + chunk_bytes_ > kHugePageBytes) full = slabs_.back();
  }
  // A full slab becomes one huge page: advised (which lifts the NOHUGEPAGE, and lets khugepaged take it later if
  // the collapse is refused), then collapsed now. Outside the lock: the collapse copies 2 MiB, and other shards'
  // inserts need not wait for it. Readers of its entries meanwhile wait in the kernel a moment; their memory is
  // unchanged.
  if (full != nullptr) {
    madvise(full, kHugePageBytes, MADV_HUGEPAGE);
    madvise(full, kHugePageBytes, kMadvCollapse);
  }
  return chunk;
}

std::size_t ChunkArena::overhead_bytes() const {
  std::lock_guard guard(lock_);
  const std::size_t lists = heap_.capacity() * sizeof(void*) + slabs_.capacity() * sizeof(char*);
  if (slabs_.empty()) return lists;
  const std::size_t tail = kHugePageBytes % chunk_bytes_;
  const bool last_full = used_ + chunk_bytes_ > kHugePageBytes;
  return lists + (slabs_.size() - 1) * tail + (last_full ? kHugePageBytes - used_ : mapped_size(used_) - used_);
}

std::size_t ChunkArena::slab_bytes() const {
  std::lock_guard guard(lock_);
  return slabs_.size() * kHugePageBytes;
}

bool ChunkArena::on_slab(const void* p) const {
  std::lock_guard guard(lock_);
  const auto* c = static_cast<const char*>(p);
  for (const char* slab : slabs_) {
    if (c >= slab && c < slab + kHugePageBytes) return true;
  }
  return false;
}

std::size_t ChunkArena::worst_overhead(std::size_t chunk_bytes, std::size_t chunks) {
  const std::size_t per_slab = kHugePageBytes / chunk_bytes;
  const std::size_t slabs = chunks / per_slab + 1;
  const std::size_t lists = (std::max<std::size_t>(8, 2 * per_slab) + std::max<std::size_t>(8, 2 * slabs)) * 8;
  return lists + slabs * (kHugePageBytes % chunk_bytes) + page_bytes();
}

}  // namespace rk::store::huge_pages
