// store/shm/shm_leases.cc: SharedConcurrencyLimiter (include/ratekeeper/shared.h): the `concurrency` algorithm's
// leases (core/concurrency.h) in a shared region, each key's in its slot, changed through the region's shard table
// (shard_table.h: one update at a time per shard, undone if its process dies in it).
//
// A slot's state, in LeaseBytes' layout: the number of leases n, then n of (id, expiry). The core's functions decide
// on it read into a ConcurrencyState and written back. Invariant: a key has a slot only while it holds an unexpired
// lease or did at its last change (the change that leaves none frees the slot), and a slot whose leases have not
// all expired is never evicted.
//
// Thread and process safety: every operation is one update under its key's shard lock.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "base/hash.h"
#include "base/hex.h"
#include "core/concurrency.h"
#include "ratekeeper/shared.h"
#include "store/memory/random_bytes.h"
#include "store/shm/layout.h"
#include "store/shm/region.h"
#include "store/shm/shard_table.h"

namespace rk {

namespace {

using store::shm::Region;
using store::shm::ShardTable;

// A slot's state: count, then the leases. Read and written with memcpy (the region's bytes are 8-aligned only).
struct LeaseBytes {
  static constexpr std::size_t kHeader = 8;
  static constexpr std::size_t kLease = sizeof(core::LeaseId) + sizeof(std::int64_t);

  static std::size_t state_bytes(std::uint32_t max_in_flight) { return kHeader + kLease * max_in_flight; }

  // The leases in `bytes`, at most max_in_flight of them whatever the count says (another process may write it).
  static core::ConcurrencyState read(const unsigned char* bytes, std::uint32_t max_in_flight) {
    std::uint32_t n = 0;
    std::memcpy(&n, bytes, sizeof n);
    core::ConcurrencyState s;
    s.leases.resize(std::min(n, max_in_flight));
    for (std::size_t i = 0; i < s.leases.size(); ++i) {
      const unsigned char* p = bytes + kHeader + i * kLease;
      std::memcpy(s.leases[i].id.data(), p, sizeof(core::LeaseId));
      std::memcpy(&s.leases[i].expires_ns, p + sizeof(core::LeaseId), sizeof(std::int64_t));
    }
    return s;
  }

  static void write(const core::ConcurrencyState& s, unsigned char* bytes) {
    const auto n = static_cast<std::uint32_t>(s.leases.size());
    std::memcpy(bytes, &n, sizeof n);
    for (std::size_t i = 0; i < s.leases.size(); ++i) {
      unsigned char* p = bytes + kHeader + i * kLease;
      std::memcpy(p, s.leases[i].id.data(), sizeof(core::LeaseId));
      std::memcpy(p + sizeof(core::LeaseId), &s.leases[i].expires_ns, sizeof(std::int64_t));
    }
  }
};

constexpr unsigned char kFresh[LeaseBytes::kHeader] = {};  // no leases

std::size_t state_bytes_for(std::uint32_t max_in_flight) {
  return LeaseBytes::state_bytes(std::min(max_in_flight, kMaxSharedInFlight));
}

void check_spec(const ConcurrencySpec& spec) {
  if (spec.max_in_flight < 1 || spec.max_in_flight > kMaxSharedInFlight) {
    throw InvalidArgument("max_in_flight: must be 1 to " + std::to_string(kMaxSharedInFlight) +
                          " in shared memory (got " + std::to_string(spec.max_in_flight) + ")");
  }
  ConcurrencySpec sized = spec;  // the options size the region: the spec's own bounds do not apply
  sized.max_keys = sized.max_key_bytes = 1;
  const auto errors = validate(sized);
  if (!errors.empty()) throw InvalidArgument(errors.front().param + ": " + errors.front().message);
}

}  // namespace

struct SharedConcurrencyLimiter::Impl {
  Impl(std::unique_ptr<Region> r, const ConcurrencySpec& s, const SharedOptions& o, std::shared_ptr<const Clock> c)
      : region(std::move(r)),
        table(*region),
        spec(s),
        options(o),
        params{s.max_in_flight, s.lease_ttl.count()},
        clock(c ? std::move(c) : std::make_shared<SystemClock>()) {}

  void check_key(std::string_view key) const {
    if (key.size() > options.max_key_bytes) {
      throw InvalidArgument("key is " + std::to_string(key.size()) + " bytes, above the shared store's limit of " +
                            std::to_string(options.max_key_bytes) + " (SharedOptions::max_key_bytes)");
    }
  }

  // Runs op on the key's leases; keeps them if any is left unexpired, else frees the key's slot.
  template <class Op>
  ShardTable::Update change(std::string_view key, std::int64_t now, ShardTable::Mode mode, Op&& op) {
    return table.update(
        key, kFresh, mode,
        [&](unsigned char* bytes, bool) {
          core::ConcurrencyState s = LeaseBytes::read(bytes, params.max_in_flight);
          op(s);
          core::expire_leases(s, now);
          LeaseBytes::write(s, bytes);
          return !s.leases.empty();
        },
        [&](const unsigned char* bytes) {
          return core::leases_held(LeaseBytes::read(bytes, params.max_in_flight), now) == 0;
        });
  }

  std::unique_ptr<Region> region;
  ShardTable table;
  ConcurrencySpec spec;
  SharedOptions options;
  core::ConcurrencyParams params;
  std::shared_ptr<const Clock> clock;
};

std::size_t SharedConcurrencyLimiter::region_bytes(std::uint32_t max_in_flight, const SharedOptions& o) {
  return store::shm::layout_for(o.max_keys, o.max_key_bytes, o.shards, state_bytes_for(max_in_flight)).bytes;
}

std::size_t SharedConcurrencyLimiter::keys_that_fit(std::size_t bytes, std::uint32_t max_in_flight,
                                                    std::size_t max_key_bytes, std::size_t shards) {
  if (max_in_flight < 1 || max_in_flight > kMaxSharedInFlight) return 0;
  return store::shm::keys_that_fit(bytes, max_key_bytes, shards, state_bytes_for(max_in_flight));
}

SharedConcurrencyLimiter SharedConcurrencyLimiter::in_region(void* base, std::size_t bytes, bool format,
                                                             const ConcurrencySpec& spec, const SharedOptions& o,
                                                             std::shared_ptr<const Clock> c) {
  check_spec(spec);
  store::shm::check_sizes(o);
  if (base == nullptr || reinterpret_cast<std::uintptr_t>(base) % 8 != 0) {
    throw InvalidArgument("the region's base must be non-null and 8-byte aligned");
  }
  const store::shm::Layout l =
      store::shm::layout_for(o.max_keys, o.max_key_bytes, o.shards, state_bytes_for(spec.max_in_flight));
  const store::shm::StoredSpec stored = store::shm::stored_spec(spec.max_in_flight, spec.lease_ttl);
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(base), bytes, false);
  if (format) {
    if (bytes < l.bytes) {
      throw InvalidArgument("the region is " + std::to_string(bytes) + " bytes; " + std::to_string(o.max_keys) +
                            " keys of " + std::to_string(o.max_key_bytes) + " bytes with " +
                            std::to_string(spec.max_in_flight) + " leases each need " + std::to_string(l.bytes));
    }
    store::shm::format_region(*region, l, stored, base::random_seed());
  } else {
    store::shm::attach_region(*region, stored, l);
  }
  return SharedConcurrencyLimiter(std::make_unique<Impl>(std::move(region), spec, o, std::move(c)));
}

SharedConcurrencyLimiter::SharedConcurrencyLimiter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SharedConcurrencyLimiter::~SharedConcurrencyLimiter() = default;
SharedConcurrencyLimiter::SharedConcurrencyLimiter(SharedConcurrencyLimiter&&) noexcept = default;
SharedConcurrencyLimiter& SharedConcurrencyLimiter::operator=(SharedConcurrencyLimiter&&) noexcept = default;

SharedLease SharedConcurrencyLimiter::acquire(std::string_view key) { return acquire_at(key, impl_->clock->now()); }

SharedLease SharedConcurrencyLimiter::acquire_at(std::string_view key, Nanos now) {
  impl_->check_key(key);
  core::LeaseId id;
  store::memory::random_bytes(id);
  core::AcquireResult r;
  const ShardTable::Update u = impl_->change(key, now.count(), ShardTable::Mode::kChange, [&](auto& s) {
    r = core::acquire_lease(impl_->params, s, now.count(), id);
  });
  SharedLease out;
  if (u.full) {  // no slot for another key: refused, as a key whose slots are all held
    out.retry_after = impl_->spec.lease_ttl;
    return out;
  }
  out.acquired = r.acquired;
  out.in_flight = r.in_flight;
  out.retry_after = Nanos{r.retry_after_ns};
  if (r.acquired) out.id = base::hex_text(id);
  return out;
}

bool SharedConcurrencyLimiter::release(std::string_view key, std::string_view id) {
  return release_at(key, id, impl_->clock->now());
}

bool SharedConcurrencyLimiter::release_at(std::string_view key, std::string_view id, Nanos now) {
  core::LeaseId parsed{};
  if (key.size() > impl_->options.max_key_bytes || !base::parse_hex(id, parsed)) return false;
  bool released = false;
  impl_->change(key, now.count(), ShardTable::Mode::kChangeIfFound,
                [&](auto& s) { released = core::release_lease(s, now.count(), parsed); });
  return released;
}

std::uint32_t SharedConcurrencyLimiter::in_flight(std::string_view key) const {
  return in_flight_at(key, impl_->clock->now());
}

std::uint32_t SharedConcurrencyLimiter::in_flight_at(std::string_view key, Nanos now) const {
  impl_->check_key(key);
  std::uint32_t held = 0;
  impl_->change(key, now.count(), ShardTable::Mode::kPeek, [&](auto& s) { held = core::leases_held(s, now.count()); });
  return held;
}

SharedStats SharedConcurrencyLimiter::stats() const { return impl_->table.stats(); }
const ConcurrencySpec& SharedConcurrencyLimiter::spec() const { return impl_->spec; }

}  // namespace rk
