// cli/upstream_env.h: envoyproxy/ratelimit's environment (its src/settings/settings.go) as `ratekeeper serve`'s
// flags, for the binary invoked as `ratelimit` (an image's /bin/ratelimit, a link to ratekeeper). One table, one
// row per variable upstream reads: its default, and what it becomes here (docs/envoy-gateway.md prints the same).
//
//   UpstreamEnv t = translate_upstream_env({{"PORT", "8080"}, {"REDIS_URL", "redis:6379"}, ...}, has_flag);
//   if (!t.errors.empty()) ...                 // "PORT=abc: not a port (a whole number from 0 to 65535)": exit 2
//   run_serve(t.args);                         // "--http", "0.0.0.0:8080", "--grpc", "0.0.0.0:8081", ...
//   for (auto& note : t.notes) log(note);      // what was accepted without a flag, said once at start
//
// Each variable is honoured (a flag with upstream's default when unset), mapped to a documented equivalent,
// accepted because its value means what ratekeeper does anyway (a note says so), or refused with an error naming
// it and its value (memcache, a second Redis for per-second limits, a value that does not parse). A variable whose
// flag this build lacks (`has_flag` says no: a build without gRPC) is an error when set, and a note when only
// upstream's default would have applied it. Variables upstream does not read are not looked at, but for
// GRPC_SERVER_TLS_CA_CERT (Envoy Gateway sets it; upstream reads none by that name), which gets a note.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rk::cli {

struct UpstreamEnv {
  std::vector<std::string> args;    // serve's flags and their values, in order
  std::vector<std::string> notes;   // each a sentence naming the variable: accepted with no flag, and why
  std::vector<std::string> errors;  // each names the variable and its value
};

// One variable of upstream's settings.go.
struct UpstreamVariable {
  std::string_view name;
  std::string_view upstream_default;  // as settings.go writes it; "" for none
  std::string_view here;              // what it becomes in ratekeeper, for the docs
};

// Every variable upstream reads, in settings.go's order.
std::span<const UpstreamVariable> upstream_variables();

// `env`: the variables that are set (others are absent). `has_flag("--statsd")`: whether this build's serve has the
// flag.
UpstreamEnv translate_upstream_env(const std::map<std::string, std::string>& env,
                                   const std::function<bool(std::string_view flag)>& has_flag);

// Go's time.ParseDuration ("1h30m", "300ms", "1.5s", "0"; no sign) in nanoseconds; false for anything else.
bool parse_go_duration(std::string_view text, long long& nanoseconds);

}  // namespace rk::cli
