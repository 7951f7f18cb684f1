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

// The binary invoked as `ratelimit` (a link to it, as envoyproxy/ratelimit's image runs /bin/ratelimit): upstream's
// environment (cli/upstream_env.h) as serve's flags, then `args` (serve's flags too) on top, and serve. A variable
// that does not parse, or that cannot mean here what it means upstream, stops the start naming it: exit 2.
int run_ratelimit(const std::vector<std::string>& args);

// `ratekeeper check-config PATH`: 0 if the rules are valid, 1 with every error (file:line:column: reason).
int run_check_config(const std::vector<std::string>& args);

}  // namespace rk::cli::serve
