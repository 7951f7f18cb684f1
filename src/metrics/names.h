// metrics/names.h: every metric the service exports, in one list, so that no name is spelled twice.
#pragma once

#include <string_view>
#include <vector>

namespace rk::metrics::names {

struct Name {
  std::string_view name;
  std::string_view help;
};

inline constexpr Name kDecisions{"ratekeeper_decisions_total",
                                 "Decisions per descriptor, by domain, rule and result (ok, over_limit, "
                                 "shadow_over_limit, unlimited, no_rule)."};
inline constexpr Name kDecisionDuration{"ratekeeper_decision_duration_seconds",
                                        "Time to decide one request, by protocol."};
inline const std::vector<double> kDecisionDurationBuckets = {1e-6, 2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                                             5e-4, 1e-3,   2.5e-3, 5e-3, 1e-2,   0.1,  1.0};
inline constexpr Name kStoreKeys{"ratekeeper_store_keys", "Keys tracked in the in-process store, by domain and rule."};
inline constexpr Name kStoreEvictions{"ratekeeper_store_evictions_total",
                                      "Keys evicted because a rule's store was full (least recently used)."};
inline constexpr Name kConfigReloads{"ratekeeper_config_reloads_total", "Rules reloads, by result."};
inline constexpr Name kConfigLastReloadSuccess{"ratekeeper_config_last_reload_success_timestamp_seconds",
                                               "When the active rules were loaded (Unix time)."};
inline constexpr Name kHttpConnections{"ratekeeper_http_connections", "Open HTTP connections on the public listener."};
inline constexpr Name kBadRequests{"ratekeeper_bad_requests_total", "Requests refused as malformed, by protocol and reason."};
inline constexpr Name kGrpcRequests{"ratekeeper_grpc_requests_total", "gRPC requests, by method and status code."};
inline constexpr Name kBuildInfo{"ratekeeper_build_info", "Always 1; the version is a label."};

}  // namespace rk::metrics::names
