// ratekeeper/clock.h: where "now" comes from. Algorithms never read the system time themselves.
//
// Production code uses SystemClock (wall time since the Unix epoch, so fixed windows align across servers).
// Tests and simulations use ManualClock, which never moves unless told to:
//
//   auto clock = std::make_shared<rk::ManualClock>(rk::Nanos{0});
//   rk::Limiter limiter(spec, {}, clock);
//   clock->advance(std::chrono::seconds(1));
#pragma once

#include "ratekeeper/export.h"
#include <atomic>
#include <cstdint>

#include "ratekeeper/units.h"

namespace rk {

class RK_EXPORT Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since this clock's epoch. May go backwards (wall clocks do); every algorithm tolerates that.
  virtual Nanos now() const noexcept = 0;
};

class RK_EXPORT SystemClock final : public Clock {
 public:
  Nanos now() const noexcept override;
};

// Thread safety: now(), set() and advance() may be called from any thread.
class RK_EXPORT ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = Nanos{0}) : ns_(start.count()) {}
  Nanos now() const noexcept override { return Nanos{ns_.load(std::memory_order_acquire)}; }
  void set(Nanos t) noexcept { ns_.store(t.count(), std::memory_order_release); }
  void advance(Nanos d) noexcept { ns_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<std::int64_t> ns_;
};

}  // namespace rk
