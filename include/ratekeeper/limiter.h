// ratekeeper/limiter.h: one limit applied per key, with its state in the in-process store.
//
//   rk::LimitSpec spec{.algorithm = rk::Algorithm::kEarrrl, .limit = 10, .half_life = std::chrono::seconds(10)};
//   rk::Limiter limiter(spec);                        // throws rk::InvalidArgument naming a bad parameter
//   rk::Decision d = limiter.check("203.0.113.7");    // cost 1, now from the limiter's clock
//   if (!d.allowed) reply_429(d.retry_after);
//
// Thread safety: every member function may be called concurrently; each check is one atomic read-modify-write
// of the key's state.
#pragma once

#include "ratekeeper/export.h"
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ratekeeper/clock.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"
#include "ratekeeper/store.h"

namespace rk {

struct LimiterAccess;  // internal: the library's own access to a limiter's states

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
  void check_many(std::span<const std::string_view> keys, std::span<const std::uint64_t> costs,
                  std::span<Decision> out, Fields fields = Fields::kAll);
  void check_many_at(std::span<const std::string_view> keys, std::span<const std::uint64_t> costs, Nanos now,
                     std::span<Decision> out, Fields fields = Fields::kAll);

  // What check would answer now, without recording anything.
  Decision peek(std::string_view key, std::uint64_t cost = 1) const;
  Decision peek_at(std::string_view key, Nanos now, std::uint64_t cost = 1) const;

  // Forgets the key; true if it was tracked.
  bool reset(std::string_view key);

  // Forgets every key whose state is back to fresh; returns how many.
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
