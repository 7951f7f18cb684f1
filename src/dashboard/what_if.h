// dashboard/what_if.h: POST /v1/admin/simulate, the dashboard's what-if panel: a `ratekeeper simulate` scenario
// (docs/simulate.md), written as JSON, run on a simulated clock by the simulation engine (sim/simulate.h), and answered as series a
// page can plot (per client: allowed and refused attempts per time bucket, and the state sampled between them).
//
//   {"duration": "60s",
//    "limiter": {"algorithm": "earrrl", "limit": 5, "half_life": "2s"},
//    "clients": [{"name": "abuser", "pattern": "periodic", "rate": 8}]}
//
// The admin listener runs it on its own thread, so the bounds are much tighter than the command's: a what-if is a
// few seconds of CPU at most, and its answer a few hundred kilobytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace rk::dashboard {

struct WhatIfLimits {
  std::size_t max_clients = 20;         // after `count` is expanded
  double max_attempts = 200'000;        // expected, over all clients (Poisson may overshoot by a little)
  double max_sample_rows = 20'000;      // (duration / sample_every + 1) x clients
  std::size_t buckets = 120;            // the time axis of the answer
  std::size_t max_depth = 8;            // nesting of the JSON body
  std::chrono::milliseconds max_time{2000};
};

struct WhatIfError {
  std::string field;  // "limiter.algorithm", "clients[0].rate", "" for the body as a whole
  std::string message;
};

// The answer's JSON, or what is wrong with the request.
std::variant<std::string, WhatIfError> run_what_if(std::string_view body, const WhatIfLimits& limits = {});

}  // namespace rk::dashboard
