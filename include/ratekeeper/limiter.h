// ratekeeper/limiter.h: one limit applied per key, with its state in the in-process store.
//
//   rk::LimitSpec spec{.algorithm = rk::Algorithm::kEarrrl, .limit = 10, .half_life = std::chrono::seconds(10)};
//   rk::Limiter limiter(spec);                        // throws rk::InvalidArgument naming a bad parameter
//   rk::Decision d = limiter.check("203.0.113.7");    // cost 1, now from the limiter's clock
//   if (!d.allowed) reply_429(d.retry_after);
//
// Reserve and settle, for a cost known only afterwards (an AI gateway's tokens): reserve an estimate, settle what
// was used; the difference is charged (an overdraw recorded as a debt, even past what is left) or given back.
//
//   rk::Reservation r = limiter.reserve("user:42", 500);  // 500 tokens, estimated
//   if (!r.decision.allowed) return reply_429(r.decision.retry_after);
//   std::uint64_t used = call_the_model();
//   limiter.settle("user:42", r.id, used);              // refunds 500 - used, or charges used - 500
//
// Thread safety: every member function may be called concurrently; each check is one atomic read-modify-write
// of the key's state, and each reservation is settled at most once.
#pragma once

#include "ratekeeper/export.h"
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ratekeeper/clock.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"
#include "ratekeeper/store.h"

namespace rk {

struct LimiterAccess;  // internal: the library's own access to a limiter's states

inline constexpr Nanos kDefaultReservationTtl = std::chrono::seconds(60);
inline constexpr Nanos kMaxReservationTtl = std::chrono::hours(24);
// The largest estimate or actual a reservation takes (2^53: every amount a JSON number holds exactly).
inline constexpr std::uint64_t kMaxReservationAmount = std::uint64_t{1} << 53;

struct Reservation {
  Decision decision;  // the check of the estimate
  std::string id;     // allowed: 32 hex digits (128 random bits) that settle it; refused: ""
};

struct Settlement {
  bool settled = false;  // false: an unknown, expired or settled id, or another key's: nothing was changed
  Decision decision;     // the key after the settle: an overdraw's charge (refused when it overdrew), else a look
  std::uint64_t reserved = 0;
};

class RK_EXPORT Limiter {
 public:
  // clock == nullptr means SystemClock.
  explicit Limiter(const LimitSpec& spec, const StoreOptions& options = {}, std::shared_ptr<const Clock> clock = {});
  ~Limiter();
  Limiter(Limiter&&) noexcept;
  Limiter& operator=(Limiter&&) noexcept;

  // Decides one attempt of `cost` (0 is allowed: it reports without spending) and records it. `fields`: what the
  // caller reads (Fields::kAllButResetAfter skips reset_after where it costs; decision.h).
  Decision check(std::string_view key, std::uint64_t cost = 1, Fields fields = Fields::kAll);
  Decision check_at(std::string_view key, Nanos now, std::uint64_t cost = 1, Fields fields = Fields::kAll);

  // Decides keys[i] at costs[i] (1 each when `costs` is empty) and writes out[i], for every i: what check_at would
  // answer for each in turn (a key given twice sees its first attempt), all at one `now`. Faster than one check a
  // key over keys not in cache: their fetches from memory overlap. Throws InvalidArgument, deciding nothing, when
  // the sizes differ or a key is too long.
  //   std::string_view keys[] = {"user:42", "ip:203.0.113.7"};
  //   rk::Decision out[2];
  //   limiter.check_many(keys, {}, out);
  void check_many(std::span<const std::string_view> keys, std::span<const std::uint64_t> costs, std::span<Decision> out,
                  Fields fields = Fields::kAll);
  void check_many_at(std::span<const std::string_view> keys, std::span<const std::uint64_t> costs, Nanos now,
                     std::span<Decision> out, Fields fields = Fields::kAll);

  // What check would answer now, without recording anything.
  Decision peek(std::string_view key, std::uint64_t cost = 1) const;
  Decision peek_at(std::string_view key, Nanos now, std::uint64_t cost = 1) const;

  // Charges `estimate` as check does when it fits, and holds it as a reservation for `ttl` (1 ms .. 24 h); a
  // refused reserve charges nothing, whatever count_refused says. A reservation not settled within its ttl stays
  // charged as reserved. Throws InvalidArgument naming "estimate" or
  // "ttl" out of range (estimate above kMaxReservationAmount), deciding nothing.
  Reservation reserve(std::string_view key, std::uint64_t estimate, Nanos ttl = kDefaultReservationTtl);
  Reservation reserve_at(std::string_view key, Nanos now, std::uint64_t estimate, Nanos ttl = kDefaultReservationTtl);

  // Settles the reservation `id` of the key at `actual`: actual above the estimate charges the difference, recorded
  // even past what is left (a debt, bounded as count_refused's: docs/algorithms.md); below it, gives the
  // difference back (never more than the reservation took). Throws InvalidArgument naming "actual" above
  // kMaxReservationAmount, changing nothing.
  Settlement settle(std::string_view key, std::string_view id, std::uint64_t actual);
  Settlement settle_at(std::string_view key, std::string_view id, Nanos now, std::uint64_t actual);

  // Forgets the key; true if it was tracked.
  bool reset(std::string_view key);

  // Forgets every key whose state is back to fresh (and every expired reservation); returns how many keys.
  std::size_t sweep();
  std::size_t sweep_at(Nanos now);

  StoreStats stats() const;
  const LimitSpec& spec() const;
  const Clock& clock() const;

  struct Impl;  // hidden in limiter.cc

 private:
  friend struct LimiterAccess;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rk
