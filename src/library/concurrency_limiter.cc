// The `concurrency` algorithm's in-process store: each key's leases (core/concurrency.h) in a map, behind one of
// 64 mutexes chosen by the key's hash.
//
// Thread safety: a key's leases are read and changed only under its shard's mutex. Invariants: a key in a shard's
// map has held at least one lease since the shard was last swept; a shard sweeps itself every kSweepEvery acquires,
// so keys whose leases all expired cannot pile up beyond what that many acquires made; a shard holds at most
// keys_per_shard keys (ConcurrencySpec::max_keys), a new key past that refused until a sweep makes room.
#include "ratekeeper/concurrency.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "base/hex.h"
#include "core/concurrency.h"
#include "store/memory/random_bytes.h"

namespace rk {

namespace {

constexpr std::size_t kShards = 64;
constexpr std::uint32_t kSweepEvery = 4096;

std::string lease_text(const core::LeaseId& id) { return base::hex_text(id); }

// nullopt unless exactly 32 hex digits: such an id names no lease.
std::optional<core::LeaseId> parse_lease(std::string_view text) {
  core::LeaseId id{};
  if (!base::parse_hex(text, id)) return std::nullopt;
  return id;
}

// A full shard sweeps for room at most once a millisecond: a stream of new keys cannot make every acquire walk it.
constexpr std::int64_t kFullSweepEveryNs = 1'000'000;

struct Shard {
  std::mutex mu;
  std::unordered_map<std::string, core::ConcurrencyState> keys;
  std::uint32_t acquires = 0;
  std::int64_t full_swept_ns = INT64_MIN / 2;  // far enough from INT64_MIN that adding a millisecond cannot wrap

  std::size_t sweep(std::int64_t now) {
    return std::erase_if(keys, [now](auto& kv) { return core::leases_held(kv.second, now) == 0; });
  }
};

}  // namespace

std::vector<ParamError> validate(const ConcurrencySpec& spec) {
  std::vector<ParamError> out;
  if (spec.max_in_flight < 1 || spec.max_in_flight > kMaxInFlight) {
    out.push_back({"max_in_flight", "must be 1 to " + std::to_string(kMaxInFlight) + " (got " +
                                        std::to_string(spec.max_in_flight) + ")"});
  }
  if (spec.lease_ttl < std::chrono::milliseconds(1) || spec.lease_ttl > kMaxLeaseTtl) {
    out.push_back({"lease_ttl", "must be 1ms to 24h (got " + std::to_string(spec.lease_ttl.count()) + "ns)"});
  }
  if (spec.max_key_bytes == 0) out.push_back({"max_key_bytes", "must be at least 1"});
  if (spec.max_keys == 0) out.push_back({"max_keys", "must be at least 1"});
  return out;
}

struct ConcurrencyLimiter::Impl {
  ConcurrencySpec spec;
  core::ConcurrencyParams params;
  std::shared_ptr<const Clock> clock;
  std::size_t keys_per_shard = 1;
  std::array<Shard, kShards> shards;

  Shard& shard(std::string_view key) { return shards[std::hash<std::string_view>{}(key) % kShards]; }
  void check_key(std::string_view key) const {
    if (key.size() > spec.max_key_bytes) {
      throw InvalidArgument("key: " + std::to_string(key.size()) + " bytes, longer than max_key_bytes (" +
                            std::to_string(spec.max_key_bytes) + ")");
    }
  }
};

ConcurrencyLimiter::ConcurrencyLimiter(const ConcurrencySpec& spec, std::shared_ptr<const Clock> clock)
    : impl_(std::make_unique<Impl>()) {
  const std::vector<ParamError> errors = validate(spec);
  if (!errors.empty()) throw InvalidArgument(errors.front().param + ": " + errors.front().message);
  impl_->spec = spec;
  impl_->params = {spec.max_in_flight, spec.lease_ttl.count()};
  impl_->keys_per_shard = std::max<std::size_t>(1, spec.max_keys / kShards);
  impl_->clock = clock ? std::move(clock) : std::make_shared<SystemClock>();
}

ConcurrencyLimiter::~ConcurrencyLimiter() = default;

Lease ConcurrencyLimiter::acquire(std::string_view key) { return acquire_at(key, impl_->clock->now()); }

Lease ConcurrencyLimiter::acquire_at(std::string_view key, Nanos now) {
  impl_->check_key(key);
  core::LeaseId id;
  store::memory::random_bytes(id);
  Shard& s = impl_->shard(key);
  core::AcquireResult r;
  {
    std::lock_guard lock(s.mu);
    if (++s.acquires % kSweepEvery == 0) s.sweep(now.count());
    auto it = s.keys.find(std::string(key));
    const bool may_sweep = now.count() < s.full_swept_ns || now.count() >= s.full_swept_ns + kFullSweepEveryNs;
    if (it == s.keys.end() && s.keys.size() >= impl_->keys_per_shard && may_sweep) {
      s.full_swept_ns = now.count();
      s.sweep(now.count());
    }
    if (it == s.keys.end() && s.keys.size() >= impl_->keys_per_shard) {
      Lease full;  // no room for another key: refused, as a key whose slots are all held
      full.retry_after_ = impl_->spec.lease_ttl;
      return full;
    }
    if (it == s.keys.end()) it = s.keys.emplace(std::string(key), core::ConcurrencyState{}).first;
    r = core::acquire_lease(impl_->params, it->second, now.count(), id);
  }
  Lease lease;
  lease.in_flight_ = r.in_flight;
  if (!r.acquired) {
    lease.retry_after_ = Nanos{r.retry_after_ns};
    return lease;
  }
  lease.limiter_ = this;
  lease.key_ = std::string(key);
  lease.id_ = lease_text(id);
  return lease;
}

bool ConcurrencyLimiter::release(std::string_view key, std::string_view id) {
  return release_at(key, id, impl_->clock->now());
}

bool ConcurrencyLimiter::release_at(std::string_view key, std::string_view id, Nanos now) {
  const std::optional<core::LeaseId> parsed = parse_lease(id);
  if (!parsed || key.size() > impl_->spec.max_key_bytes) return false;
  Shard& s = impl_->shard(key);
  std::lock_guard lock(s.mu);
  const auto it = s.keys.find(std::string(key));
  if (it == s.keys.end()) return false;
  const bool released = core::release_lease(it->second, now.count(), *parsed);
  if (it->second.leases.empty()) s.keys.erase(it);
  return released;
}

std::uint32_t ConcurrencyLimiter::in_flight(std::string_view key) const { return in_flight_at(key, clock().now()); }

std::uint32_t ConcurrencyLimiter::in_flight_at(std::string_view key, Nanos now) const {
  Shard& s = impl_->shard(key);
  std::lock_guard lock(s.mu);
  const auto it = s.keys.find(std::string(key));
  return it == s.keys.end() ? 0 : core::leases_held(it->second, now.count());
}

std::size_t ConcurrencyLimiter::sweep() { return sweep_at(impl_->clock->now()); }

std::size_t ConcurrencyLimiter::sweep_at(Nanos now) {
  std::size_t n = 0;
  for (Shard& s : impl_->shards) {
    std::lock_guard lock(s.mu);
    n += s.sweep(now.count());
  }
  return n;
}

const ConcurrencySpec& ConcurrencyLimiter::spec() const { return impl_->spec; }
const Clock& ConcurrencyLimiter::clock() const { return *impl_->clock; }

Lease::Lease(Lease&& other) noexcept { *this = std::move(other); }

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    limiter_ = std::exchange(other.limiter_, nullptr);
    key_ = std::move(other.key_);
    id_ = std::move(other.id_);
    retry_after_ = other.retry_after_;
    in_flight_ = other.in_flight_;
  }
  return *this;
}

Lease::~Lease() { release(); }

bool Lease::release() {
  ConcurrencyLimiter* l = std::exchange(limiter_, nullptr);
  if (l == nullptr) return false;
  try {
    return l->release(key_, id_);
  } catch (...) {
    return false;  // a destructor must not throw; the lease then expires after its TTL
  }
}

std::string Lease::detach() {
  limiter_ = nullptr;
  return id_;
}

}  // namespace rk
