// cli/serve/sweeper.h: forgets keys whose state is back to fresh, every interval, so that idle keys cost
// nothing; the stores' CLOCK eviction bounds the rest.
//
//   Sweeper sweeper(reloader, flags.sweep_interval);   // sweeps on a thread of its own
//   ...
//   sweeper.stop();                                     // or let it go out of scope
//
// Thread safety: stop() may be called from any thread; the sweeping thread reads only reloader.current().
#pragma once

#include "base/periodic.h"
#include "ratekeeper/units.h"
#include "rules/reloader.h"

namespace rk::cli::serve {

class Sweeper {
 public:
  Sweeper(const rules::Reloader& reloader, Nanos interval);
  ~Sweeper();
  void stop();  // returns once the thread is gone; idempotent

 private:
  base::Periodic sweep_;
};

}  // namespace rk::cli::serve
