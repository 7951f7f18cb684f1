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
// Every algorithm but sliding_log (whose memory per key grows with its limit) can live in shared memory.
// Thread and process safety: every member function may be called concurrently from any thread of any process
// that shares the region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ratekeeper/clock.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk {

struct SharedOptions {
  std::size_t max_keys = 100'000;  // slots in the region; past it the least recently used key is evicted
  std::size_t max_key_bytes = 64;  // the slot's room for a key; longer keys are refused with InvalidArgument
  std::size_t shards = 16;         // one lock each
};

struct SharedStats {
  std::size_t keys = 0;
  std::size_t capacity = 0;
  std::uint64_t evictions = 0;   // keys dropped because the region was full (LRU)
  std::uint64_t recoveries = 0;  // times a lock was taken over from a process that died holding it
  std::size_t region_bytes = 0;
};

class SharedLimiter {
 public:
  // A new region in anonymous shared memory, shared with every process this one forks after the call.
  static SharedLimiter anonymous(const LimitSpec& spec, const SharedOptions& options = {},
                                 std::shared_ptr<const Clock> clock = {});
  // A region in a file (under /dev/shm for memory only): the first opener creates and formats it, later ones
  // attach, and must give the same spec and options, or get InvalidArgument naming what differs.
  static SharedLimiter open(const std::string& path, const LimitSpec& spec, const SharedOptions& options = {},
                            std::shared_ptr<const Clock> clock = {});
  // In memory that the caller has mapped shared (an nginx shared zone): `format` it once, then attach to it in
  // every process. The memory must stay mapped, at the same address or not, while the limiter lives.
  static SharedLimiter in_region(void* base, std::size_t bytes, bool format, const LimitSpec& spec,
                                 const SharedOptions& options = {}, std::shared_ptr<const Clock> clock = {});
  // The bytes a region with these options takes, and the most keys that fit in `bytes`.
  static std::size_t region_bytes(const SharedOptions& options);
  static std::size_t keys_that_fit(std::size_t bytes, std::size_t max_key_bytes, std::size_t shards);

  ~SharedLimiter();
  SharedLimiter(SharedLimiter&&) noexcept;
  SharedLimiter& operator=(SharedLimiter&&) noexcept;

  Decision check(std::string_view key, std::uint64_t cost = 1);
  Decision check_at(std::string_view key, Nanos now, std::uint64_t cost = 1);
  Decision peek(std::string_view key, std::uint64_t cost = 1) const;
  Decision peek_at(std::string_view key, Nanos now, std::uint64_t cost = 1) const;
  bool reset(std::string_view key);
  SharedStats stats() const;
  const LimitSpec& spec() const;

  struct Impl;  // in src/store/shm/shared_limiter.cc

 private:
  explicit SharedLimiter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk
