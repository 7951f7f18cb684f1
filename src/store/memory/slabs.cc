#include "store/memory/slabs.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace rk::store {

namespace {

// kRegion bytes at a kRegion-aligned address: map twice as much and unmap what lies outside.
char* map_region() {
  const std::size_t span = 2 * Slabs::kRegion;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (start + Slabs::kRegion - 1) & ~(std::uintptr_t{Slabs::kRegion} - 1);
  if (aligned > start) munmap(p, aligned - start);
  if (const std::size_t tail = start + span - (aligned + Slabs::kRegion); tail > 0) {
    munmap(reinterpret_cast<void*>(aligned + Slabs::kRegion), tail);
  }
  auto* region = reinterpret_cast<char*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(region, Slabs::kRegion, MADV_HUGEPAGE);  // a hint: refused or not, the memory is the same
#endif
  return region;
}

}  // namespace

Slabs::~Slabs() {
  for (char* r : regions_) munmap(r, kRegion);
}

void* Slabs::allocate(std::size_t bytes) {
  bytes = (bytes + 63) & ~std::size_t{63};
  std::lock_guard lock(mu_);
  if (kRegion - used_ < bytes) {
    regions_.reserve(regions_.size() + 1);  // so that push_back cannot throw with the region unrecorded
    regions_.push_back(map_region());
    used_ = 0;
  }
  char* p = regions_.back() + used_;
  used_ += bytes;
  handed_out_ += bytes;
  return p;
}

std::size_t Slabs::slack_bytes() const {
  std::lock_guard lock(mu_);
  return regions_.size() * kRegion - handed_out_;
}

}  // namespace rk::store
