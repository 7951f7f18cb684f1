// ratekeeper/shared.h: one limit whose state several processes on one host share, without Redis: a fixed-size
// region of shared memory, the way nginx's limit_req_zone shares its counters among workers.
//
//   auto limiter = rk::SharedLimiter::anonymous(spec, {.max_keys = 100'000});   // before fork(): children share it
//   auto limiter = rk::SharedLimiter::open("/dev/shm/api-limits", spec);        // unrelated processes share a file
//   rk::Decision d = limiter.check("203.0.113.7");
//
// The region holds a fixed number of keys in fixed-size slots (keys of up to max_key_bytes, stored whole, so keys
// never collide) and evicts the least recently used key when full. Each shard of it has a robust process-shared
// mutex: a process killed in the middle of an update leaves the mutex to the next process, which undoes the
// half-made update from the shard's journal and rebuilds the shard's index, so nothing wedges and no state is torn.
//
// A file region is made whole in an unnamed (or randomly named) file and linked into place, so no one attaches to a
// half-made one, and nothing is held after open() returns. open() refuses a file that is a symbolic link, belongs
// to another user, or lets group or others do more than SharedOptions::mode allows; every region is checked on
// attach (magic, version, sizes against what is mapped), and every index read from it is checked on use, so a
// corrupted region gives SharedRegionCorrupt naming what is wrong, never a crash or a hang (docs/security.md).
//
// Every algorithm but sliding_log (whose memory per key grows with its limit) can live in shared memory.
// Thread and process safety: every member function may be called concurrently from any thread of any process
// that shares the region.
#pragma once

#include "ratekeeper/export.h"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ratekeeper/clock.h"
#include "ratekeeper/concurrency.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk {

struct SharedOptions {
  std::size_t max_keys = 100'000;  // slots in the region; past it the least recently used key is evicted
  std::size_t max_key_bytes = 64;  // the slot's room for a key; longer keys are refused with InvalidArgument
  std::size_t shards = 16;         // one lock each
  // open() only: the permissions of the file it creates (exactly these, whatever the umask), and the most an
  // existing file may grant group and others. 0660 lets a group share a region; the owner needs read and write.
  unsigned mode = 0600;
};

// A region whose contents break the store's invariants (an index out of range, a bucket chain that loops): some
// process wrote into it what ratekeeper never writes. The shard's lock is released; other shards still work.
class RK_EXPORT SharedRegionCorrupt : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SharedStats {
  std::size_t keys = 0;
  std::size_t capacity = 0;
  std::uint64_t evictions = 0;   // keys dropped because the region was full (LRU)
  std::uint64_t recoveries = 0;  // times a lock was taken over from a process that died holding it
  std::size_t region_bytes = 0;
};

class RK_EXPORT SharedLimiter {
 public:
  // A new region in anonymous shared memory, shared with every process this one forks after the call.
  static SharedLimiter anonymous(const LimitSpec& spec, const SharedOptions& options = {},
                                 std::shared_ptr<const Clock> clock = {});
  // A region in a file (under /dev/shm for memory only): the first opener creates and formats it, later ones
  // attach, at once, in this process or another, and must give the same spec and options, or get
  // InvalidArgument naming what differs (both values). A file that is unsafe to trust (see above) or not a sound
  // region is refused with InvalidArgument naming the reason.
  static SharedLimiter open(const std::string& path, const LimitSpec& spec, const SharedOptions& options = {},
                            std::shared_ptr<const Clock> clock = {});
  // In memory that the caller has mapped shared (an nginx shared zone): `format` it once, then attach to it in
  // every process. The memory must stay mapped, at the same address or not, while the limiter lives. Attaching
  // checks the header against `bytes` (InvalidArgument naming the field).
  static SharedLimiter in_region(void* base, std::size_t bytes, bool format, const LimitSpec& spec,
                                 const SharedOptions& options = {}, std::shared_ptr<const Clock> clock = {});
  // The bytes a region with these options takes, and the most keys that fit in `bytes`.
  static std::size_t region_bytes(const SharedOptions& options);
  static std::size_t keys_that_fit(std::size_t bytes, std::size_t max_key_bytes, std::size_t shards);

  ~SharedLimiter();
  SharedLimiter(SharedLimiter&&) noexcept;
  SharedLimiter& operator=(SharedLimiter&&) noexcept;

  // Each throws InvalidArgument for a key above max_key_bytes, SharedRegionCorrupt for a corrupted shard.
  Decision check(std::string_view key, std::uint64_t cost = 1);
  Decision check_at(std::string_view key, Nanos now, std::uint64_t cost = 1);
  Decision peek(std::string_view key, std::uint64_t cost = 1) const;
  Decision peek_at(std::string_view key, Nanos now, std::uint64_t cost = 1) const;
  bool reset(std::string_view key);
  SharedStats stats() const;
  const LimitSpec& spec() const;

  struct Impl;  // in src/store/shm/shm_store.h

 private:
  explicit SharedLimiter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The `concurrency` algorithm (ratekeeper/concurrency.h) in shared memory: at most max_in_flight leases of a key at
// once among every process that shares the region (the workers of one nginx).
//
//   auto leases = rk::SharedConcurrencyLimiter::in_region(zone, bytes, format, {.max_in_flight = 10,
//                                                           .lease_ttl = std::chrono::seconds(60)});
//   rk::SharedLease lease = leases.acquire("203.0.113.7");
//   if (lease.acquired) { serve(); leases.release("203.0.113.7", lease.id); }
//
// A key's slot holds its leases (8 + 24 * max_in_flight bytes of state), so max_in_flight is at most
// kMaxSharedInFlight here. A key holds a slot only while it has leases: the last release frees it. A new key when
// the region's shard is full takes the slot of one of its eight least recently used keys whose leases have all
// expired; else the acquire is refused (retry_after: lease_ttl), so no held lease is ever evicted. A process that
// dies holding leases leaves them to expire after lease_ttl; one that dies inside an acquire or release is undone
// as check() is. The spec's max_keys and max_key_bytes are not used: the options size the region, as for
// SharedLimiter.
inline constexpr std::uint32_t kMaxSharedInFlight = 4096;

struct SharedLease {
  bool acquired = false;
  std::string id;               // 32 hex digits: what releases it; "" when refused
  Nanos retry_after{0};         // refused: until the first held lease expires (a release may come sooner)
  std::uint32_t in_flight = 0;  // the key's leases after this acquire
};

class RK_EXPORT SharedConcurrencyLimiter {
 public:
  // As SharedLimiter::in_region. InvalidArgument naming a bad parameter, or what differs from the region's.
  static SharedConcurrencyLimiter in_region(void* base, std::size_t bytes, bool format, const ConcurrencySpec& spec,
                                            const SharedOptions& options = {}, std::shared_ptr<const Clock> clock = {});
  static std::size_t region_bytes(std::uint32_t max_in_flight, const SharedOptions& options);
  static std::size_t keys_that_fit(std::size_t bytes, std::uint32_t max_in_flight, std::size_t max_key_bytes,
                                   std::size_t shards);

  ~SharedConcurrencyLimiter();
  SharedConcurrencyLimiter(SharedConcurrencyLimiter&&) noexcept;
  SharedConcurrencyLimiter& operator=(SharedConcurrencyLimiter&&) noexcept;

  // Each throws InvalidArgument for a key above max_key_bytes, SharedRegionCorrupt for a corrupted shard.
  SharedLease acquire(std::string_view key);
  SharedLease acquire_at(std::string_view key, Nanos now);
  // True if the lease was held; false, changing nothing, for an unknown, expired or released id, or another key's.
  bool release(std::string_view key, std::string_view id);
  bool release_at(std::string_view key, std::string_view id, Nanos now);
  std::uint32_t in_flight(std::string_view key) const;
  std::uint32_t in_flight_at(std::string_view key, Nanos now) const;
  SharedStats stats() const;
  const ConcurrencySpec& spec() const;

  struct Impl;  // in src/store/shm/shm_leases.cc

 private:
  explicit SharedConcurrencyLimiter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk
