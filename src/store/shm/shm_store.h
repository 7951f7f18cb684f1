// store/shm/shm_store.h: the shared store's decisions: SharedLimiter::Impl, made for the spec's algorithm over a
// checked region (region.h). An update locks its key's shard (a robust, process-shared mutex), journals the old
// state, writes the new one and clears the journal.
//
// Crash safety. A shard's index (bucket chains, LRU list, free list) is derived data: after a process dies holding
// the shard's lock, the next locker rebuilds it from the slots alone (in_use, hash, key, tick). A slot's in_use
// flag is cleared before its key is overwritten and set only once key and state are in place. A state is changed
// only after it has been saved in the shard's journal; the next locker puts a journalled state back, so a
// half-made update is undone (the process that made it died before it could answer).
//
// Corruption. Any process that maps the region can write anything into it, so nothing read from it is used
// unchecked: the header's layout is checked once on attach and then kept in this process's memory (a later write
// to the header changes nothing here); every index is checked before it addresses a slot, every chain walk stops
// at the shard's slot count, and what fails throws SharedRegionCorrupt, which releases the shard's lock on its way
// out. Every index this code writes is in range, so a shard stays addressable even when its lists are wrong.
//
// Thread safety: a shard's slots and index are read and written only under its lock; the region's layout and seed
// are this process's copies, never written after the store is made.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "ratekeeper/shared.h"
#include "store/shm/region.h"

namespace rk {

struct SharedLimiter::Impl {
  Impl(std::unique_ptr<store::shm::Region> r, const LimitSpec& s, const SharedOptions& o, std::shared_ptr<const Clock> c)
      : region(std::move(r)), spec(s), options(o), clock(c ? std::move(c) : std::make_shared<SystemClock>()) {}
  virtual ~Impl() = default;
  virtual Decision decide(std::string_view key, std::int64_t now, std::uint64_t cost, bool record) = 0;
  virtual bool reset(std::string_view key) = 0;
  virtual SharedStats stats() = 0;

  std::unique_ptr<store::shm::Region> region;
  LimitSpec spec;
  SharedOptions options;
  std::shared_ptr<const Clock> clock;
};

namespace store::shm {

// The store for spec's algorithm over region `r`, whose options check_options() has accepted.
std::unique_ptr<SharedLimiter::Impl> make_store(std::unique_ptr<Region> r, const LimitSpec& spec,
                                                const SharedOptions& o, std::shared_ptr<const Clock> c);

}  // namespace store::shm

}  // namespace rk
