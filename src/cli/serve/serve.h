// cli/serve/serve.h: `ratekeeper serve` and `ratekeeper check-config`, the one place that wires the clock, the
// rules and their reloader, the service, metrics and the listeners together. Beside it: flags.h (every flag, and
// the command line over settings.h's files), serve_metrics.h, listeners.h, sweeper.h, and check_config.cc.
#pragma once

#include <string>
#include <vector>

namespace rk::cli::serve {

// `ratekeeper serve --config PATH [--http ADDR:PORT] [--admin ADDR:PORT] ...`; returns the exit code. Runs until
// SIGTERM or SIGINT, then drains in-flight requests and returns 0.
int run_serve(const std::vector<std::string>& args);

// `ratekeeper check-config PATH`: 0 if the rules are valid, 1 with every error (file:line:column: reason).
int run_check_config(const std::vector<std::string>& args);

}  // namespace rk::cli::serve
