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
constexpr std::size_t kMaxSlabTable = kHugePageBytes / 8;

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

Arena::Arena(std::size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}

Arena::~Arena() {
  for (void* chunk : heap_) ::operator delete(chunk, std::align_val_t{64});
  for (char* slab : slabs_) unmap(slab, kHugePageBytes);
}

bool Arena::on_heap() const { return slabs_.empty() && heap_.size() * chunk_bytes_ < kHugePageBytes; }

char* Arena::carve(std::size_t bytes, char*& closed) {
  const std::size_t size = (bytes + 63) / 64 * 64;
  if (slabs_.empty() || used_ + size > kHugePageBytes) {
    if (!slabs_.empty()) {
      recycle(slabs_.back() + used_, kHugePageBytes - used_);
      closed = slabs_.back();
    }
    make_room(slabs_);
    char* slab = reserve(kHugePageBytes);
    // Not on a huge page while it fills, even where THP is "always": its untouched rest costs nothing.
    madvise(slab, kHugePageBytes, MADV_NOHUGEPAGE);
    slabs_.push_back(slab);
    used_ = 0;
  }
  char* p = slabs_.back() + used_;
  used_ += size;
  live_ += bytes;
  if (kHugePageBytes - used_ < chunk_bytes_) closed = slabs_.back();  // nothing more fits: closed already
  return p;
}

void Arena::recycle(char* p, std::size_t bytes) {
  for (std::size_t off = 0; off + chunk_bytes_ <= bytes; off += chunk_bytes_) {
    make_room(free_);
    free_.push_back(p + off);
  }
}

// A closed slab becomes one huge page: advised (which lifts the NOHUGEPAGE, and lets khugepaged take it later if
// the collapse is refused), then collapsed now. Outside the lock: the collapse copies 2 MiB (~0.4 ms here), and
// other shards need not wait for it. Readers of its entries meanwhile wait in the kernel a moment; their memory is
// unchanged.
void Arena::collapse(char* slab) {
  if (slab == nullptr) return;
  madvise(slab, kHugePageBytes, MADV_HUGEPAGE);
  madvise(slab, kHugePageBytes, kMadvCollapse);
}

void* Arena::chunk() {
  char* closed = nullptr;
  void* p;
  {
    std::lock_guard guard(lock_);
    if (!free_.empty()) {
      p = free_.back();
      free_.pop_back();
      live_ += chunk_bytes_;
      return p;
    }
    if (on_heap()) {
      make_room(heap_);  // so that push_back cannot throw after the allocation
      p = ::operator new(chunk_bytes_, std::align_val_t{64});
      heap_.push_back(p);
      return p;
    }
    p = carve(chunk_bytes_, closed);
  }
  collapse(closed);
  return p;
}

void* Arena::table(std::size_t bytes) {
  if (bytes >= kHugePageBytes) return map(bytes);
  char* closed = nullptr;
  void* p;
  {
    std::lock_guard guard(lock_);
    // A table smaller than a chunk stays on the heap (given back, it would make no piece), and so does one of more
    // than an eighth of a slab (one that did not fit would close a slab early, leaving too much of it to pieces).
    if (on_heap() || bytes < chunk_bytes_ || bytes > kMaxSlabTable) return ::operator new(bytes);
    p = carve(bytes, closed);
  }
  collapse(closed);
  return p;
}

void Arena::free_table(void* p, std::size_t bytes) {
  if (bytes >= kHugePageBytes) return unmap(p, bytes);
  if (bytes >= chunk_bytes_ && bytes <= kMaxSlabTable) {
    std::lock_guard guard(lock_);
    const auto* c = static_cast<const char*>(p);
    const bool slab = std::any_of(slabs_.begin(), slabs_.end(), [c](const char* s) {
      return c >= s && c < s + kHugePageBytes;
    });
    if (slab) {
      live_ -= bytes;
      recycle(static_cast<char*>(p), bytes);
      return;
    }
  }
  ::operator delete(p);
}

std::size_t Arena::table_held(std::size_t bytes) { return bytes >= kHugePageBytes ? mapped_size(bytes) : bytes; }

std::size_t Arena::overhead_bytes() const {
  std::lock_guard guard(lock_);
  const std::size_t lists = (heap_.capacity() + slabs_.capacity() + free_.capacity()) * sizeof(void*);
  if (slabs_.empty()) return lists;
  const bool open = kHugePageBytes - used_ >= chunk_bytes_;
  const std::size_t held = (slabs_.size() - 1) * kHugePageBytes + (open ? mapped_size(used_) : kHugePageBytes);
  return lists + held - live_;
}

std::size_t Arena::slab_bytes() const {
  std::lock_guard guard(lock_);
  return slabs_.size() * kHugePageBytes;
}

bool Arena::on_slab(const void* p) const {
  std::lock_guard guard(lock_);
  const auto* c = static_cast<const char*>(p);
  return std::any_of(slabs_.begin(), slabs_.end(), [c](const char* s) { return c >= s && c < s + kHugePageBytes; });
}

std::size_t Arena::worst_overhead(std::size_t chunk_bytes, std::size_t chunks, std::size_t tables,
                                  std::size_t tables_bytes, std::size_t last_tables_bytes) {
  // Given-back tables' pieces are counted by the store's worst case as the tables they were; early closes' remains
  // are at most the last tables (those of earlier rounds are taken by the entries added between rounds: a shard's
  // index grows by half when its keys reach 4/5 of it, so 2/5 of its size in new keys, 32 bytes or more each, come
  // before its next table of 6 bytes a slot, and its replaced one of 4, are carved). Each closed slab leaves less
  // than a chunk unused; each table is carved in whole cache lines.
  const std::size_t carved = chunks * chunk_bytes + tables_bytes + last_tables_bytes;
  const std::size_t slabs = carved / (kHugePageBytes - chunk_bytes) + 1;
  const std::size_t pieces = (tables_bytes + last_tables_bytes) / chunk_bytes;  // free_'s most
  const std::size_t lists = (std::max<std::size_t>(8, 2 * (kHugePageBytes / chunk_bytes)) +
                             std::max<std::size_t>(8, 2 * slabs) + std::max<std::size_t>(8, 2 * pieces)) *
                            sizeof(void*);
  return lists + slabs * chunk_bytes + tables * 64 + last_tables_bytes + page_bytes();
}

}  // namespace rk::store::huge_pages
