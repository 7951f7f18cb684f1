// core/concurrency.h: the `concurrency` algorithm: at most max_in_flight leases held on a key at once, each until
// it is released or its lease_ttl runs out (so a client that dies holding one gives its slot back).
//
// Unlike the eight rate algorithms (core/algorithms.h), which decide one attempt from a small fixed state, this one
// holds a set of leases named by their ids, and its operations are acquire and release rather than a check of a
// cost: it has its own state and its own stores (library/concurrency_limiter.cc in process, a Lua script in Redis).
//
//   ConcurrencyState s;
//   if (acquire_lease(p, s, now, id).acquired) { ...; release_lease(s, later, id); }
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rk::core {

struct ConcurrencyParams {
  std::uint32_t max_in_flight = 1;
  std::int64_t lease_ttl_ns = 0;
};

using LeaseId = std::array<std::uint8_t, 16>;  // 128 random bits: what a holder proves it holds the lease with

struct HeldLease {
  LeaseId id{};
  std::int64_t expires_ns = 0;  // the lease is gone at and after this time
};

// Invariant: no two leases share an id; leases.size() <= max_in_flight after every acquire.
struct ConcurrencyState {
  std::vector<HeldLease> leases;
};

struct AcquireResult {
  bool acquired = false;
  std::uint32_t in_flight = 0;      // leases held after this acquire (counting the new one)
  std::int64_t retry_after_ns = 0;  // refused: until the first held lease expires (a release may come sooner)
};

// Drops every lease expired at `now`.
void expire_leases(ConcurrencyState& s, std::int64_t now);

// Takes a slot under `id` when fewer than max_in_flight unexpired leases are held. The id must be fresh (random).
AcquireResult acquire_lease(const ConcurrencyParams& p, ConcurrencyState& s, std::int64_t now, const LeaseId& id);

// Frees the lease `id`; false, changing nothing, if no unexpired lease has that id.
bool release_lease(ConcurrencyState& s, std::int64_t now, const LeaseId& id);

// Unexpired leases held at `now`.
std::uint32_t leases_held(const ConcurrencyState& s, std::int64_t now);

}  // namespace rk::core
