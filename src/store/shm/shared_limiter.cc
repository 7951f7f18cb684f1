// store/shm/shared_limiter.cc: SharedLimiter (include/ratekeeper/shared.h), the API of the shared-memory store:
// a region made, opened or attached to (region.h, region_file.h), the store that decides in it (shm_store.h), and
// the calls passed on to it.
#include "ratekeeper/shared.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include "base/hash.h"
#include "store/shm/layout.h"
#include "store/shm/region.h"
#include "store/shm/region_file.h"
#include "store/shm/shm_store.h"

namespace rk {

namespace {

using store::shm::attach_region;
using store::shm::check_options;
using store::shm::format_region;
using store::shm::Layout;
using store::shm::layout_for;
using store::shm::make_store;
using store::shm::Region;

}  // namespace

std::size_t SharedLimiter::region_bytes(const SharedOptions& o) {
  return layout_for(o.max_keys, o.max_key_bytes, o.shards).bytes;
}

std::size_t SharedLimiter::keys_that_fit(std::size_t bytes, std::size_t max_key_bytes, std::size_t shards) {
  return store::shm::keys_that_fit(bytes, max_key_bytes, shards, store::shm::kStateBytes);
}

SharedLimiter SharedLimiter::anonymous(const LimitSpec& spec, const SharedOptions& o, std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  void* p = ::mmap(nullptr, l.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mmap of " + std::to_string(l.bytes) + " bytes of shared memory");
  }
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(p), l.bytes, true);
  format_region(*region, l, spec, base::random_seed());
  return SharedLimiter(make_store(std::move(region), spec, o, std::move(c)));
}

SharedLimiter SharedLimiter::open(const std::string& path, const LimitSpec& spec, const SharedOptions& o,
                                  std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  const std::uint64_t seed = base::random_seed();
  const store::shm::MappedFile file = store::shm::map_region_file(path, l.bytes, o.mode, [&](unsigned char* base) {
    Region scratch(base, l.bytes, false);
    format_region(scratch, l, spec, seed);
  });
  auto region = std::make_unique<Region>(file.base, file.bytes, true);
  if (file.created) {
    region->adopt(l, seed);
  } else {
    try {
      attach_region(*region, spec, o);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(path + ": " + e.what());
    }
  }
  return SharedLimiter(make_store(std::move(region), spec, o, std::move(c)));
}

SharedLimiter SharedLimiter::in_region(void* base, std::size_t bytes, bool format, const LimitSpec& spec,
                                       const SharedOptions& o, std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  if (base == nullptr || reinterpret_cast<std::uintptr_t>(base) % 8 != 0) {
    throw InvalidArgument("the region's base must be non-null and 8-byte aligned");
  }
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(base), bytes, false);
  if (format) {
    if (bytes < l.bytes) {
      throw InvalidArgument("the region is " + std::to_string(bytes) + " bytes; " + std::to_string(o.max_keys) +
                            " keys of " + std::to_string(o.max_key_bytes) + " bytes need " + std::to_string(l.bytes));
    }
    format_region(*region, l, spec, base::random_seed());
  } else {
    attach_region(*region, spec, o);
  }
  return SharedLimiter(make_store(std::move(region), spec, o, std::move(c)));
}

SharedLimiter::SharedLimiter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SharedLimiter::~SharedLimiter() = default;
SharedLimiter::SharedLimiter(SharedLimiter&&) noexcept = default;
SharedLimiter& SharedLimiter::operator=(SharedLimiter&&) noexcept = default;

Decision SharedLimiter::check(std::string_view key, std::uint64_t cost) {
  return check_at(key, impl_->clock->now(), cost);
}
Decision SharedLimiter::check_at(std::string_view key, Nanos now, std::uint64_t cost) {
  return impl_->decide(key, now.count(), cost, true);
}
Decision SharedLimiter::peek(std::string_view key, std::uint64_t cost) const {
  return peek_at(key, impl_->clock->now(), cost);
}
Decision SharedLimiter::peek_at(std::string_view key, Nanos now, std::uint64_t cost) const {
  return impl_->decide(key, now.count(), cost, false);
}
bool SharedLimiter::reset(std::string_view key) { return impl_->reset(key); }
SharedStats SharedLimiter::stats() const { return impl_->stats(); }
const LimitSpec& SharedLimiter::spec() const { return impl_->spec; }

}  // namespace rk
