// base/periodic.h: a thread that runs one task every interval until stopped: the rules' reloader polling the
// files, serve's sweeper forgetting idle keys.
//
//   Periodic poll;
//   poll.start(std::chrono::milliseconds(250), [&] { reloader.poll_once(); });
//   ...
//   poll.stop();   // or let it go out of scope
//
// Thread safety: start() once, from one thread; stop() from any thread, any number of times: it returns once the
// thread is gone, a task under way finished. The task runs with no lock of Periodic's held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace rk::base {

class Periodic {
 public:
  Periodic() = default;
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;
  ~Periodic() { stop(); }

  // The first run is one interval after start. A second start() while running does nothing.
  void start(std::chrono::nanoseconds interval, std::function<void()> task);
  void stop();

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace rk::base
