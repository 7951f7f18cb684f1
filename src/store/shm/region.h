// store/shm/region.h: a shared store's region as this process sees it (where it is mapped; the layout and seed it
// formatted, or checked when it attached), and the checks made before a region is used: the options asked for,
// and a region made elsewhere, whose header is believed only once every field agrees with the others.
//
//   check_options(spec, options);                   // InvalidArgument naming what is wrong
//   Region r(base, bytes, /*owned=*/false);
//   format_region(r, layout_for(...), spec, seed);  // a new region; or, for one made elsewhere:
//   attach_region(r, spec, options);                // InvalidArgument naming what differs, both values
//
// The region's bytes are layout.h's; its file region_file.h's; the store that decides in it shm_store.h's.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#include "ratekeeper/shared.h"
#include "store/shm/layout.h"

namespace rk::store::shm {

// The region, and this process's view of it: where it is mapped, its layout and seed as checked when this
// process attached (never read from the region again), and whether this object unmaps it.
class Region {
 public:
  Region(unsigned char* base, std::size_t bytes, bool owned) : base_(base), bytes_(bytes), owned_(owned) {}
  ~Region() {
    if (owned_) ::munmap(base_, bytes_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  void adopt(const Layout& l, std::uint64_t seed) {
    layout_ = l;
    seed_ = seed;
  }
  const Layout& layout() const { return layout_; }
  std::uint64_t seed() const { return seed_; }
  RegionHeader& header() const { return *reinterpret_cast<RegionHeader*>(base_); }
  ShardHeader& shard(std::size_t s) const {
    return *reinterpret_cast<ShardHeader*>(base_ + layout_.shards_offset + s * layout_.shard_stride);
  }
  std::uint32_t* buckets(std::size_t s) const {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(&shard(s)) + sizeof(ShardHeader));
  }
  // Shard s's slot i (shard-local; i < slots_per_shard, checked by the caller).
  SlotHead& slot(std::size_t s, std::uint32_t i) const {
    return *reinterpret_cast<SlotHead*>(base_ + layout_.slots_offset +
                                        (s * layout_.slots_per_shard + i) * layout_.slot_stride);
  }
  static unsigned char* state_of(SlotHead& slot) {
    return reinterpret_cast<unsigned char*>(&slot) + round8(sizeof(SlotHead));
  }
  static char* key_of(SlotHead& slot) { return reinterpret_cast<char*>(state_of(slot) + kStateBytes); }
  unsigned char* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }

 private:
  unsigned char* base_;
  std::size_t bytes_;
  bool owned_;
  Layout layout_{};
  std::uint64_t seed_ = 0;
};

// Throws InvalidArgument naming what is wrong with the spec (validate(), and what shared memory cannot run) or with
// the options (each out of its range).
void check_options(const LimitSpec& spec, const SharedOptions& o);

// Formats `l.bytes` bytes at r.base() as a new region for `spec`, and adopts its layout and seed.
void format_region(Region& r, const Layout& l, const LimitSpec& spec, std::uint64_t seed);

// Checks a region made elsewhere against what this process expects of it, then adopts its layout and seed.
void attach_region(Region& r, const LimitSpec& spec, const SharedOptions& o);

}  // namespace rk::store::shm
