// service/wait_for.h: an asynchronous call of the Service's, waited for: `start` is given the callback that takes
// its one result, and wait_for returns that result once it has run (on any thread). For tests and tools, never a
// server's event loop.
//
//   return wait_for<LeaseResult>([&](LeaseDone done) { acquire_async(request, std::move(done)); });
#pragma once

#include <future>
#include <utility>

namespace rk::service {

template <class Result, class F>
Result wait_for(F&& start) {
  std::promise<Result> promise;
  auto future = promise.get_future();
  start([&promise](Result r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace rk::service
