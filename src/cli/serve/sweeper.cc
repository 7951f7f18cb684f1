// cli/serve/sweeper.cc: the sweeping thread.
#include "cli/serve/sweeper.h"

namespace rk::cli::serve {

Sweeper::Sweeper(const rules::Reloader& reloader, Nanos interval) {
  sweep_.start(interval, [&reloader] {
    if (auto set = reloader.current()) {
      for (const auto& r : set->rules()) {
        if (r->limiter) r->limiter->sweep();
      }
    }
  });
}

Sweeper::~Sweeper() { stop(); }

void Sweeper::stop() { sweep_.stop(); }

}  // namespace rk::cli::serve
