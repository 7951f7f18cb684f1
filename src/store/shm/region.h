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
  // Shard s's journal: the old state of the slot its journal_slot names, layout().state_bytes of it.
  unsigned char* journal(std::size_t s) const {
    return reinterpret_cast<unsigned char*>(&shard(s)) + layout_.journal_offset;
  }
  static unsigned char* state_of(SlotHead& slot) {
    return reinterpret_cast<unsigned char*>(&slot) + round8(sizeof(SlotHead));
  }
  char* key_of(SlotHead& slot) const { return reinterpret_cast<char*>(state_of(slot) + layout_.state_bytes); }
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
// The options' part of that: max_keys, max_key_bytes and shards each in range.
void check_sizes(const SharedOptions& o);

// The most keys whose layout fits in `bytes` (0 for options out of range).
std::size_t keys_that_fit(std::size_t bytes, std::size_t key_bytes, std::size_t shards, std::size_t state_bytes);

// What a region says it limits: a rate limit's spec, or a `concurrency` limit's (kConcurrencyCode).
StoredSpec stored_spec(const LimitSpec& spec);
StoredSpec stored_spec(std::uint32_t max_in_flight, Nanos lease_ttl);

// Formats `l.bytes` bytes at r.base() as a new region for `spec`, and adopts its layout and seed.
void format_region(Region& r, const Layout& l, const LimitSpec& spec, std::uint64_t seed);
void format_region(Region& r, const Layout& l, const StoredSpec& spec, std::uint64_t seed);

// Checks a region made elsewhere against what this process expects of it (`mine`: the layout its options make),
// then adopts its layout and seed.
void attach_region(Region& r, const LimitSpec& spec, const SharedOptions& o);
void attach_region(Region& r, const StoredSpec& spec, const Layout& mine);

}  // namespace rk::store::shm
