// ratekeeper/concurrency.h: the `concurrency` algorithm: at most max_in_flight requests of a key at once. acquire()
// takes a slot and answers a lease; the lease gives it back when it goes out of scope (or on release()), and a
// lease nobody releases expires after lease_ttl, so a client that dies holding one cannot keep its slot for ever.
//
//   rk::ConcurrencyLimiter limiter({.max_in_flight = 10, .lease_ttl = std::chrono::seconds(30)});
//   if (rk::Lease lease = limiter.acquire("user:42")) {
//     serve();                                       // the slot is given back when `lease` goes out of scope
//   } else {
//     reply_429(lease.retry_after());
//   }
//
// A lease's id (32 hex digits: 128 bits from the operating system's random source) is what releases it, so a
// slot can be handed over and released elsewhere (lease.detach(), then limiter.release(key, id)); nobody can free a
// slot whose id they were not given. Releasing an unknown, expired or released id answers false and changes nothing.
//
// Thread safety: every member function of ConcurrencyLimiter may be called concurrently; each acquire and release
// is one atomic step on the key's leases. A Lease is one owner's: it must not outlive its limiter.
#pragma once

#include "ratekeeper/export.h"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ratekeeper/clock.h"
#include "ratekeeper/params.h"

namespace rk {

inline constexpr Nanos kDefaultLeaseTtl = std::chrono::seconds(60);
inline constexpr Nanos kMaxLeaseTtl = std::chrono::hours(24);
inline constexpr std::uint32_t kMaxInFlight = 1'000'000;

struct ConcurrencySpec {
  std::uint32_t max_in_flight = 0;     // 1 .. kMaxInFlight
  Nanos lease_ttl = kDefaultLeaseTtl;  // 1 ms .. kMaxLeaseTtl
  std::size_t max_key_bytes = 4096;    // longer keys are refused with InvalidArgument
  // About this many keys holding leases at once (in 64 shards of max_keys / 64); past it, an acquire on a new key
  // is refused (retry_after: lease_ttl) until leases expire or are released: memory stays bounded.
  std::size_t max_keys = 1'000'000;
};

// Every problem with the spec ("max_in_flight", "lease_ttl"), or none. Never throws.
RK_EXPORT std::vector<ParamError> validate(const ConcurrencySpec& spec);

class ConcurrencyLimiter;

class RK_EXPORT Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  ~Lease();

  // Whether this holds a slot (acquired, and not yet released or detached).
  explicit operator bool() const { return limiter_ != nullptr; }
  const std::string& id() const { return id_; }           // "" when refused
  Nanos retry_after() const { return retry_after_; }      // refused: until the first held lease expires
  std::uint32_t in_flight() const { return in_flight_; }  // the key's leases after this acquire

  // Gives the slot back now; false if it had expired (or this holds none).
  bool release();
  // Stops this guard from releasing; answers the id, to release with ConcurrencyLimiter::release.
  std::string detach();

 private:
  friend class ConcurrencyLimiter;
  ConcurrencyLimiter* limiter_ = nullptr;
  std::string key_;
  std::string id_;
  Nanos retry_after_{0};
  std::uint32_t in_flight_ = 0;
};

class RK_EXPORT ConcurrencyLimiter {
 public:
  // clock == nullptr means SystemClock. Throws InvalidArgument naming a bad parameter.
  explicit ConcurrencyLimiter(const ConcurrencySpec& spec, std::shared_ptr<const Clock> clock = {});
  ~ConcurrencyLimiter();
  ConcurrencyLimiter(const ConcurrencyLimiter&) = delete;
  ConcurrencyLimiter& operator=(const ConcurrencyLimiter&) = delete;

  // A slot on the key, or (when max_in_flight unexpired leases are held) a Lease that holds none. Throws
  // InvalidArgument for a key longer than max_key_bytes.
  Lease acquire(std::string_view key);
  Lease acquire_at(std::string_view key, Nanos now);

  // Frees the lease `id` on the key: true if it was held; false, changing nothing, for an unknown, expired or
  // released id, or one of another key.
  bool release(std::string_view key, std::string_view id);
  bool release_at(std::string_view key, std::string_view id, Nanos now);

  // Unexpired leases on the key.
  std::uint32_t in_flight(std::string_view key) const;
  std::uint32_t in_flight_at(std::string_view key, Nanos now) const;

  // Forgets every key whose leases have all expired; returns how many.
  std::size_t sweep();
  std::size_t sweep_at(Nanos now);

  const ConcurrencySpec& spec() const;
  const Clock& clock() const;

  struct Impl;  // hidden in concurrency_limiter.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk
