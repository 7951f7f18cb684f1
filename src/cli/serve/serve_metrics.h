// cli/serve/serve_metrics.h: what `serve` counts, wired to where it happens: rule reloads and each rule's store,
// the Redis store and its circuit breaker, every decision (latency, result) and every malformed request.
// Metric names and help live in metrics/names.h; this file only says when each moves.
//
//   ServeMetrics metrics(with_grpc);
//   reloader events -> metrics.rules_loaded(set) / metrics.rules_rejected()
//   server::api::Hooks hooks = metrics.hooks();   // then the caller sets hooks.ready
//
// Thread safety: every member may be called from any thread (server threads, the reloader's thread). The
// per-(domain, rule, result) counters are cached per server thread: registration takes the registry's lock, and a
// flood of requests must not queue on it. One ServeMetrics per process (the caches are per thread, not per object).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "metrics/registry.h"
#include "rules/ruleset.h"
#include "server/api/routes.h"
#include "service/service.h"

namespace rk::cli::serve {

class ServeMetrics {
 public:
  explicit ServeMetrics(bool with_grpc);

  // The rules in force: reload counters and time, and per rule its store's keys and evictions.
  void rules_loaded(const rules::RuleSet& set);
  void rules_rejected();
  // The Redis store's calls, failures and fallbacks, and the breaker's state; `service` outlives this object.
  void watch_remote(const service::Service& service);

  // Traces' spans exported and dropped, and the access log's lines dropped, each read at scrape time (null: none).
  using Count = std::function<std::uint64_t()>;
  void watch_telemetry(Count spans_exported, Count spans_dropped, Count access_log_dropped);

  // Decisions and bad requests counted, /metrics exposed; ready is the caller's.
  server::api::Hooks hooks();
  void decided(std::string_view protocol, std::string_view domain, const service::CheckResponse& r, Nanos took);
  void bad_request(std::string_view protocol, std::string_view reason);
  void grpc_answered(std::string_view code);
  void tls_reloaded(bool ok);
  void connections(int delta) { connections_.add(delta); }
  void grpc_connections(int delta) {
    if (grpc_connections_) grpc_connections_->add(delta);
  }
  // envoyproxy/ratelimit's per-descriptor counters (metrics/envoy/descriptor_stats.h), to be fed every decision.
  std::shared_ptr<service::DecisionObserver> descriptor_stats(double near_limit_ratio);

 private:
  metrics::Registry registry_;
  metrics::Counter& reload_ok_;
  metrics::Counter& reload_failed_;
  metrics::Gauge& reload_time_;
  metrics::Gauge& connections_;
  metrics::Gauge* grpc_connections_;  // null without --grpc
  metrics::Histogram* http_latency_;
  metrics::Histogram* auth_latency_;
  metrics::Histogram* grpc_latency_;  // null without --grpc
  std::mutex rule_metrics_mu_;
  std::vector<std::uint64_t> rule_metric_ids_;  // guarded by rule_metrics_mu_: the series of the rules in force
};

// The `result` label of one descriptor's decision: ok, over_limit, shadow_over_limit, no_rule or unlimited.
std::string_view result_label(const service::DescriptorStatus& st);

}  // namespace rk::cli::serve
