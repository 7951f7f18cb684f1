#include "base/periodic.h"

namespace rk::base {

void Periodic::start(std::chrono::nanoseconds interval, std::function<void()> task) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, interval, task = std::move(task)] {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();  // the task takes its own locks, never this one
      task();
      lock.lock();
    }
  });
}

void Periodic::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace rk::base
