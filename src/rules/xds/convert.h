// rules/xds/convert.h: what a control plane pushes (RateLimitConfig resources in a DiscoveryResponse) as rules
// files, so that a push goes through the very checks a rules file does (rules/parse.h) and names its problems the
// same way.
//
//   std::vector<rk::rules::RulesFile> files;
//   std::string error = rk::rules::xds::response_to_files(response, files);  // "" or why the push is refused
//   auto errors = reloader.load_files(files);  // "xds:rl:5:7: descriptors[0] (foo).rate_limit: needs a unit ..."
//
// Each RateLimitConfig becomes the YAML text of a rules file of its domain and descriptors, named "xds:<its name>"
// (or "xds:#<index>" without one), one key a line, so that an error's line and column point into that text. Proto
// fields at their default mean "not given", as in envoyproxy/ratelimit: an empty value matches any value, unit
// UNKNOWN is no unit. A unit number the schema does not know is written as that number, and refused by name.
#pragma once

#include <string>
#include <vector>

#include "rules/files.h"

namespace envoy::service::discovery::v3 {
class DiscoveryResponse;
}
namespace ratelimit::config::ratelimit::v3 {
class RateLimitConfig;
}

namespace rk::rules::xds {

// The resource type ratekeeper subscribes to.
inline constexpr const char* kRateLimitConfigType = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

// One RateLimitConfig as a rules file's text.
std::string config_to_yaml(const ::ratelimit::config::ratelimit::v3::RateLimitConfig& config);

// Every resource of `response` as a rules file, in the response's order. Returns "" or why the push cannot be read
// at all (another type, a resource that does not decode); `out` is meaningful only with "".
std::string response_to_files(const ::envoy::service::discovery::v3::DiscoveryResponse& response,
                              std::vector<RulesFile>& out);

}  // namespace rk::rules::xds
