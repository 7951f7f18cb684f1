// dashboard/what_if.h: POST /v1/admin/simulate, the dashboard's what-if panel: a `ratekeeper simulate` scenario
// (docs/simulate.md), written as JSON, run on a simulated clock by the simulation engine (sim/simulate.h), and
// answered as series a page can plot (per client: allowed and refused attempts per time bucket, and the state
// sampled between them).
//
//   {"duration": "60s",
//    "limiter": {"algorithm": "earrrl", "limit": 5, "half_life": "2s"},
//    "clients": [{"name": "abuser", "pattern": "periodic", "rate": 8}]}
//
// Every size is bounded from the request before anything is made of it (WhatIfLimits: the body, the clients after
// `count`, names, the duration, expected attempts and samples), much tighter than the command's. A WhatIfRunner runs
// what-ifs off the admin listener's thread, one at a time, each within a time budget; at most a few tens of
// megabytes, all of it freed when the answer is made.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

namespace rk::dashboard {

struct WhatIfLimits {
  std::size_t max_body_bytes = 16 * 1024;
  std::size_t max_depth = 8;                 // nesting of the JSON body
  std::chrono::hours max_duration{24 * 7};   // the scenario's duration
  std::size_t max_clients = 20;              // after `count` is expanded
  std::size_t max_name_bytes = 256;          // a client's name or key
  double max_attempts = 200'000;             // expected, over all clients (Poisson may overshoot by a little)
  double max_sample_rows = 20'000;           // (duration / sample_every + 1) x clients
  std::size_t buckets = 120;                 // the time axis of the answer
  std::chrono::milliseconds max_time{2000};  // the run's budget: past it, the run is stopped
};

struct WhatIfError {
  std::string field;  // "limiter.algorithm", "clients[0].rate", "" for the body as a whole
  std::string message;
  int status = 400;  // 503: the what-if did not run to its end for the server's sake (it is stopping)
};

using WhatIfResult = std::variant<std::string, WhatIfError>;

// The answer's JSON, or what is wrong with the request. `stop` ends a run at its next step (503).
WhatIfResult run_what_if(std::string_view body, const WhatIfLimits& limits = {}, std::stop_token stop = {});

// What-ifs off the caller's thread: one worker runs them one at a time. One asked for while another runs is
// refused, not queued (the admin listener answers 503 with Retry-After: retry_after()), so that what waits is
// bounded by one budget and one body.
//
//   WhatIfRunner runner;
//   if (!runner.submit(std::string(body), [reply](WhatIfResult r) { ... })) { /* busy: 503 */ }
//
// Thread safety: submit() from any thread; `done` runs on the worker's thread, after the runner has become free
// again. The destructor stops a run in progress at its next step, answers it and any what-if not yet started
// (503), and joins the worker.
class WhatIfRunner {
 public:
  explicit WhatIfRunner(WhatIfLimits limits = {});
  ~WhatIfRunner();
  WhatIfRunner(const WhatIfRunner&) = delete;
  WhatIfRunner& operator=(const WhatIfRunner&) = delete;

  // False, and `done` dropped uncalled, when a what-if is running or about to.
  bool submit(std::string body, std::function<void(WhatIfResult)> done);
  // When to ask again: the budget, in whole seconds rounded up.
  std::chrono::seconds retry_after() const;

 private:
  struct Job {
    std::string body;
    std::function<void(WhatIfResult)> done;
  };
  void work(std::stop_token stop);

  const WhatIfLimits limits_;
  std::mutex mu_;
  std::condition_variable_any wake_;
  std::optional<Job> job_;  // under mu_: taken by the worker
  bool running_ = false;    // under mu_
  std::jthread worker_;     // last: started once the rest exists, stopped and joined first
};

}  // namespace rk::dashboard
