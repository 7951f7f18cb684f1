// store/shm/shm_store.h: the shared store's decisions: SharedLimiter::Impl, made for the spec's algorithm over a
// checked region (region.h). Each decision is one update of the key's state in the region's shard table
// (shard_table.h: locked per shard, journalled, undone if its process dies in it, every index checked).
//
// Thread safety: as the shard table's; the spec, options and parameters are never written after the store is made.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "ratekeeper/shared.h"
#include "store/shm/region.h"

namespace rk {

struct SharedLimiter::Impl {
  Impl(std::unique_ptr<store::shm::Region> r, const LimitSpec& s, const SharedOptions& o,
       std::shared_ptr<const Clock> c)
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
