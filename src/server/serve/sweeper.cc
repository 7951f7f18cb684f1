// server/serve/sweeper.cc: the sweeping thread.
#include "server/serve/sweeper.h"

namespace rk::serve {

Sweeper::Sweeper(const rules::Reloader& reloader, Nanos interval) {
  thread_ = std::thread([this, &reloader, interval] {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();  // a sweep takes each store's own locks, never this one
      if (auto set = reloader.current()) {
        for (const auto& r : set->rules()) {
          if (r->limiter) r->limiter->sweep();
        }
      }
      lock.lock();
    }
  });
}

Sweeper::~Sweeper() { stop(); }

void Sweeper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace rk::serve
