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
#include <memory>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/envoy/descriptor_stats.h"
#include "metrics/registry.h"
#include "metrics/statsd.h"
#include "rules/ruleset.h"
#include "server/api/routes.h"
#include "service/service.h"

namespace rk::metrics::envoy {
class DescriptorStats;
}  // namespace rk::metrics::envoy

namespace rk::cli::serve {

class ServeMetrics {
 public:
  explicit ServeMetrics(bool with_grpc);

  // The rules in force: reload counters and time, and per rule its store's keys and evictions.
  void rules_loaded(const rules::RuleSet& set);
  void rules_rejected();
  // Rules over xDS: the stream's state, and each push applied or refused (`version`: the last applied one).
  void xds_connected(bool connected);
  void xds_pushed(bool applied, const std::string& version);
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
  // Made once: the first call's ratio holds.
  std::shared_ptr<service::DecisionObserver> descriptor_stats(double near_limit_ratio);
  // The debug listener's /stats (--debug): those counters and the rules' loads under upstream's names, one
  // `name: value` line each, sorted.
  std::string upstream_stats_text() const;

  // --statsd: upstream's statsd names over the counters above (metrics/names.h), for a metrics::statsd::Sink's
  // source; and that sink's datagrams, counted. On the sink's thread only.
  void statsd_lines(metrics::statsd::Emitter& out);
  void watch_statsd(const metrics::statsd::SinkStats& stats);

 private:
  struct GrpcTotals {
    std::uint64_t all = 0, refused = 0;  // ShouldRateLimit calls; those answered with another code than OK
  };
  GrpcTotals grpc_totals();
  std::uint64_t redis_errors() const;

  metrics::Registry registry_;
  metrics::Counter& reload_ok_;
  metrics::Counter& reload_failed_;
  metrics::Gauge& reload_time_;
  metrics::Gauge& connections_;
  metrics::Gauge* grpc_connections_;  // null without --grpc
  metrics::Histogram* http_latency_;
  metrics::Histogram* auth_latency_;
  metrics::Histogram* grpc_latency_;                                   // null without --grpc
  std::shared_ptr<metrics::envoy::DescriptorStats> descriptor_stats_;  // set once, before any decision
  const service::RemoteStats* remote_stats_ = nullptr;                 // with --redis; set before any decision
  std::vector<const metrics::envoy::KeyCounters*> statsd_keys_;        // the sink's thread only: the keys seen
  std::mutex grpc_mu_;
  std::vector<std::pair<std::string, metrics::Counter*>> grpc_codes_;  // under grpc_mu_: ShouldRateLimit's, by code
  std::mutex rule_metrics_mu_;
  std::vector<std::uint64_t> rule_metric_ids_;  // guarded by rule_metrics_mu_: the series of the rules in force
  std::mutex xds_mu_;
  std::optional<std::uint64_t> xds_version_id_;  // guarded by xds_mu_: the applied version's series
  std::string xds_version_;                      // guarded by xds_mu_
};

// The `result` label of one descriptor's decision: ok, over_limit, shadow_over_limit, no_rule or unlimited.
std::string_view result_label(const service::DescriptorStatus& st);

}  // namespace rk::cli::serve
