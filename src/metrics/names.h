// metrics/names.h: every metric the service exports, in one list, so that no name is spelled twice.
//
//   namespace n = rk::metrics::names;
//   auto& c = registry.counter(n::kConfigReloads.name, n::kConfigReloads.help, {{"result", "success"}});
//
// A counter's name ends in _total (except envoyproxy/ratelimit's own names, kept as its users know them), a unit's
// name is in the metric's (seconds, not ms). Each entry names its labels in its comment; the registry insists that
// every series of a metric has the same ones.
#pragma once

#include <array>
#include <string_view>
#include <vector>

namespace rk::metrics::names {

struct Name {
  std::string_view name;
  std::string_view help;
};

// counter {domain, rule, result}; result is ok, over_limit, shadow_over_limit (over the limit under a shadow
// rule: counted, not refused), unlimited or no_rule.
inline constexpr Name kDecisions{"ratekeeper_decisions_total",
                                 "Decisions per descriptor, by domain, rule and result (ok, over_limit, "
                                 "shadow_over_limit, unlimited, no_rule)."};
// histogram {protocol}, with kDecisionDurationBuckets.
inline constexpr Name kDecisionDuration{"ratekeeper_decision_duration_seconds",
                                        "Time to decide one request, by protocol."};
// 1 microsecond to 1 second in steps of 1, 2.5, 5.
inline const std::vector<double> kDecisionDurationBuckets = {1e-6,   2.5e-6, 5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4,
                                                             2.5e-4, 5e-4,   1e-3, 2.5e-3, 5e-3,   1e-2, 2.5e-2,
                                                             5e-2,   0.1,    0.25, 0.5,    1.0};
// gauge {domain, rule}, computed at scrape time.
inline constexpr Name kStoreKeys{"ratekeeper_store_keys", "Keys tracked in the in-process store, by domain and rule."};
// counter {domain, rule}, computed at scrape time (Registry::counter_fn).
inline constexpr Name kStoreEvictions{
    "ratekeeper_store_evictions_total",
    "Keys evicted because a rule's store was full (CLOCK: not used since the hand last passed)."};
// counter {result}: success or failure.
inline constexpr Name kConfigReloads{"ratekeeper_config_reloads_total", "Rules reloads, by result."};
// gauge, no labels.
inline constexpr Name kConfigLastReloadSuccess{"ratekeeper_config_last_reload_success_timestamp_seconds",
                                               "When the active rules were loaded (Unix time)."};
// counter {result}: applied or refused (NACKed, the rules in force kept); with --xds-server only.
inline constexpr Name kXdsPushes{"ratekeeper_xds_pushes_total",
                                 "Rules pushed by the xDS control plane, by result (applied, refused)."};
// gauge, no labels; with --xds-server only.
inline constexpr Name kXdsConnected{"ratekeeper_xds_connected",
                                    "1 while the stream to the xDS control plane is open, else 0."};
// gauge {version}, always 1: the version_info of the last push applied; with --xds-server only, once one is.
inline constexpr Name kXdsVersion{"ratekeeper_xds_applied_version_info",
                                  "Always 1; the version_info of the last push applied is a label."};
// counter {result}: success or failure (the files kept as they were: unreadable, or a key not matching).
inline constexpr Name kTlsReloads{"ratekeeper_tls_reloads_total",
                                  "Rotated TLS certificate files read for the HTTP listeners, by result."};
// counter {route, code}.
inline constexpr Name kHttpRequests{"ratekeeper_http_requests_total", "HTTP requests, by route and status code."};
// counter {protocol, reason}.
inline constexpr Name kBadRequests{"ratekeeper_bad_requests_total",
                                   "Requests refused as malformed, by protocol and reason."};
// gauge, no labels.
inline constexpr Name kHttpConnections{"ratekeeper_http_connections", "Open HTTP connections on the public listener."};
// gauge, no labels; with --grpc only.
inline constexpr Name kGrpcConnections{"ratekeeper_grpc_connections", "Open connections on the gRPC listener."};
// counter {method, code}.
inline constexpr Name kGrpcRequests{"ratekeeper_grpc_requests_total", "gRPC requests, by method and status code."};
// counter, no labels: batches of decisions sent to the remote store (Redis).
inline constexpr Name kRemoteCalls{"ratekeeper_redis_calls_total", "Batches of decisions sent to Redis."};
// counter {result}: unavailable (no answer in time, not connected, breaker open) or error (Redis refused the op).
inline constexpr Name kRemoteFailures{"ratekeeper_redis_failures_total",
                                      "Descriptors Redis did not decide, by result (unavailable, error)."};
// counter, no labels: TLS handshakes with Redis that failed (wrong CA, wrong name, expired certificate, no TLS).
inline constexpr Name kRemoteTlsFailures{"ratekeeper_redis_tls_handshake_failures_total",
                                         "TLS handshakes with Redis that failed (the log says why)."};
// counter {result}: answered or idle: the Redis client's spins (--redis-spin) that met an answer, or found none.
inline constexpr Name kRemoteSpins{"ratekeeper_redis_spins_total",
                                   "Polls for Redis's answers before sleeping (--redis-spin), by result."};
// counter {policy}: fail_open, fail_closed or local.
inline constexpr Name kRemoteFallbacks{"ratekeeper_redis_fallbacks_total",
                                       "Descriptors decided by the domain's failure policy instead of Redis."};
// gauge, no labels: 0 closed, 1 open, 2 half-open.
inline constexpr Name kBreakerState{"ratekeeper_redis_breaker_state",
                                    "The Redis circuit breaker: 0 closed, 1 open, 2 half-open (one probe out)."};
// counter, no labels.
inline constexpr Name kBreakerOpened{"ratekeeper_redis_breaker_opened_total",
                                     "Times the Redis circuit breaker opened."};
// sharing: batched (docs/redis.md). counter, no labels: syncs sent (a batch, or one key's first fetch).
inline constexpr Name kBatches{"ratekeeper_redis_batches_total", "Batches of shared counters sent to Redis."};
// counter, no labels: keys in them together; keys per batch = this / batches.
inline constexpr Name kBatchKeys{"ratekeeper_redis_batch_keys_total", "Keys sent in batches to Redis, together."};
// counter, no labels.
inline constexpr Name kBatchFailedKeys{"ratekeeper_redis_batch_failed_keys_total",
                                       "Keys of batches Redis did not answer (decided locally meanwhile)."};
// gauge, no labels.
inline constexpr Name kBatchLag{"ratekeeper_redis_batch_lag_seconds",
                                "From sending the last answered batch to absorbing its answer."};
// gauge, no labels.
inline constexpr Name kBatchedKeys{"ratekeeper_redis_batched_keys", "Keys of batched domains held in this process."};
inline constexpr Name kBatchedBytes{
    "ratekeeper_redis_batched_bytes",
    "What the batched domains' keys held in this process cost, in bytes (as --max-memory counts it)."};
// gauge {version}, always 1.
inline constexpr Name kBuildInfo{"ratekeeper_build_info", "Always 1; the version is a label."};

// envoyproxy/ratelimit's per-descriptor counters, named as its Prometheus mapping names them
// (src/stats/prom/default_mapper.yaml), so its dashboards keep working: upstream's names, without _total. Each is a
// counter {domain, key1, key2}: the first three parts of upstream's stats key "<domain>.<key>_<value>...", key2
// empty for a one-entry descriptor (Prometheus reads an empty label as an absent one). metrics/envoy/ fills them.
inline constexpr Name kEnvoyTotalHits{
    "ratelimit_service_rate_limit_total_hits",
    "envoyproxy/ratelimit's total_hits: hits counted against the descriptor's limit."};
inline constexpr Name kEnvoyOverLimit{"ratelimit_service_rate_limit_over_limit",
                                      "envoyproxy/ratelimit's over_limit: hits over the descriptor's limit."};
inline constexpr Name kEnvoyNearLimit{"ratelimit_service_rate_limit_near_limit",
                                      "envoyproxy/ratelimit's near_limit: hits within the limit, past its near-limit "
                                      "ratio (--near-limit-ratio, default 0.8)."};
inline constexpr Name kEnvoyWithinLimit{"ratelimit_service_rate_limit_within_limit",
                                        "envoyproxy/ratelimit's within_limit: hits within the descriptor's limit."};
inline constexpr Name kEnvoyShadowMode{"ratelimit_service_rate_limit_shadow_mode",
                                       "envoyproxy/ratelimit's shadow_mode: hits over the limit of a shadow_mode rule, "
                                       "let through."};

// The rest of what Envoy Gateway's statsd_exporter mapping makes of upstream's statsd names (docs/envoy-gateway.md),
// computed from the counters above: counters, no labels; the requests {grpc_method}; the errors {err_type}:
// service_error (gRPC requests refused as bad) and, with --redis, redis_error (descriptors Redis did not decide).
inline constexpr Name kEnvoyConfigLoadSuccess{"ratelimit_service_config_load_success",
                                              "envoyproxy/ratelimit's config_load_success: rules loaded."};
inline constexpr Name kEnvoyConfigLoadError{"ratelimit_service_config_load_error",
                                            "envoyproxy/ratelimit's config_load_error: rules refused."};
inline constexpr Name kEnvoyTotalRequests{"ratelimit_service_total_requests",
                                          "envoyproxy/ratelimit's total_requests: gRPC calls, by method."};
inline constexpr Name kEnvoyShouldRateLimitError{
    "ratelimit_service_should_rate_limit_error",
    "envoyproxy/ratelimit's should_rate_limit errors: service_error (requests refused as bad), redis_error "
    "(descriptors Redis did not decide)."};

// counter {result}: sent or dropped (refused by the kernel, rejected by a down daemon's port, or the address not
// resolved). With --statsd only.
inline constexpr Name kStatsdDatagrams{"ratekeeper_statsd_datagrams_total",
                                       "Datagrams of statistics for --statsd, by result (sent, dropped)."};

// envoyproxy/ratelimit's statsd names (gostats' scopes), sent by --statsd (metrics/statsd.h): each descriptor's
// five counters under kStatsdRateLimit + <sanitized stats key> + "." + the stat's name, the service's and the gRPC
// server's own under the names below.
inline constexpr std::string_view kStatsdRateLimit = "ratelimit.service.rate_limit.";
inline constexpr std::array<std::string_view, 5> kStatsdDescriptorStats = {"total_hits", "over_limit", "near_limit",
                                                                           "within_limit", "shadow_mode"};
inline constexpr std::string_view kStatsdConfigLoadSuccess = "ratelimit.service.config_load_success";
inline constexpr std::string_view kStatsdConfigLoadError = "ratelimit.service.config_load_error";
// Requests the Redis store did not decide (decided by the domain's failure policy), and requests refused as bad.
inline constexpr std::string_view kStatsdRedisError = "ratelimit.service.call.should_rate_limit.redis_error";
inline constexpr std::string_view kStatsdServiceError = "ratelimit.service.call.should_rate_limit.service_error";
// counter, and timer (milliseconds) of ShouldRateLimit calls, as upstream's gRPC interceptor names them.
inline constexpr std::string_view kStatsdTotalRequests = "ratelimit_server.ShouldRateLimit.total_requests";
inline constexpr std::string_view kStatsdResponseTime = "ratelimit_server.ShouldRateLimit.response_time";
// counter {result}: exported (taken by the collector) or dropped (the exporter's queue full, or the collector
// down, slow or refusing), computed at scrape time.
inline constexpr Name kTraceSpans{"ratekeeper_trace_spans_total",
                                  "Spans of sampled decisions, by result (exported, dropped)."};
// counter, computed at scrape time.
inline constexpr Name kAccessLogDropped{"ratekeeper_access_log_dropped_total",
                                        "Access log lines not written: past the access log's own rate limit."};

// All of the above, for tests that check the list as a whole.
inline constexpr std::array kAll = {kDecisions,
                                    kDecisionDuration,
                                    kStoreKeys,
                                    kStoreEvictions,
                                    kConfigReloads,
                                    kConfigLastReloadSuccess,
                                    kHttpRequests,
                                    kBadRequests,
                                    kHttpConnections,
                                    kGrpcConnections,
                                    kGrpcRequests,
                                    kRemoteCalls,
                                    kRemoteFailures,
                                    kRemoteTlsFailures,
                                    kRemoteSpins,
                                    kRemoteFallbacks,
                                    kBreakerState,
                                    kBreakerOpened,
                                    kBuildInfo,
                                    kEnvoyTotalHits,
                                    kEnvoyOverLimit,
                                    kEnvoyNearLimit,
                                    kEnvoyWithinLimit,
                                    kEnvoyShadowMode,
                                    kEnvoyConfigLoadSuccess,
                                    kEnvoyConfigLoadError,
                                    kEnvoyTotalRequests,
                                    kEnvoyShouldRateLimitError,
                                    kStatsdDatagrams,
                                    kTraceSpans,
                                    kAccessLogDropped};

}  // namespace rk::metrics::names
