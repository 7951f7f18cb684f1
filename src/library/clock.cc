#include "ratekeeper/clock.h"

#include <chrono>

namespace rk {

Nanos SystemClock::now() const noexcept {
  return std::chrono::duration_cast<Nanos>(std::chrono::system_clock::now().time_since_epoch());
}

}  // namespace rk
