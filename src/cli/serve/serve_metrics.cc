// cli/serve/serve_metrics.cc: serve's metrics, registered once and moved where things happen.
#include "cli/serve/serve_metrics.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "logging/log.h"
#include "metrics/envoy/descriptor_stats.h"
#include "metrics/names.h"
#include "ratekeeper/ratekeeper.h"
#include "store/batched/batcher.h"

namespace rk::cli::serve {

namespace n = metrics::names;

namespace {

metrics::Histogram* latency_for(metrics::Registry& registry, const char* protocol) {
  return &registry.histogram(n::kDecisionDuration.name, n::kDecisionDuration.help, n::kDecisionDurationBuckets,
                             {{"protocol", protocol}});
}

}  // namespace

std::string_view result_label(const service::DescriptorStatus& st) {
  if (st.unlimited) return "unlimited";
  if (!st.has_limit) return "no_rule";
  if (st.shadowed) return "shadow_over_limit";
  return st.code == service::Code::kOverLimit ? "over_limit" : "ok";
}

ServeMetrics::ServeMetrics(bool with_grpc)
    : reload_ok_(registry_.counter(n::kConfigReloads.name, n::kConfigReloads.help, {{"result", "success"}})),
      reload_failed_(registry_.counter(n::kConfigReloads.name, n::kConfigReloads.help, {{"result", "failure"}})),
      reload_time_(registry_.gauge(n::kConfigLastReloadSuccess.name, n::kConfigLastReloadSuccess.help)),
      connections_(registry_.gauge(n::kHttpConnections.name, n::kHttpConnections.help)),
      grpc_connections_(with_grpc ? &registry_.gauge(n::kGrpcConnections.name, n::kGrpcConnections.help) : nullptr),
      http_latency_(latency_for(registry_, "http")),
      auth_latency_(latency_for(registry_, "auth")),
      grpc_latency_(with_grpc ? latency_for(registry_, "grpc") : nullptr) {
  registry_.gauge(n::kBuildInfo.name, n::kBuildInfo.help, {{"version", rk_version()}}).set(1);
  // What Envoy Gateway's mapping of upstream's statsd names gives, over the same counters (no second count).
  registry_.counter_fn(n::kEnvoyConfigLoadSuccess.name, n::kEnvoyConfigLoadSuccess.help, {},
                       [this] { return reload_ok_.value(); });
  registry_.counter_fn(n::kEnvoyConfigLoadError.name, n::kEnvoyConfigLoadError.help, {},
                       [this] { return reload_failed_.value(); });
  if (with_grpc) {
    registry_.counter_fn(n::kEnvoyTotalRequests.name, n::kEnvoyTotalRequests.help, {{"grpc_method", "ShouldRateLimit"}},
                         [this] { return grpc_totals().all; });
    registry_.counter_fn(n::kEnvoyShouldRateLimitError.name, n::kEnvoyShouldRateLimitError.help,
                         {{"err_type", "service_error"}}, [this] { return grpc_totals().refused; });
  }
}

ServeMetrics::GrpcTotals ServeMetrics::grpc_totals() {
  GrpcTotals t;
  std::lock_guard lock(grpc_mu_);
  for (const auto& [code, c] : grpc_codes_) {
    t.all += c->value();
    if (code != "OK") t.refused += c->value();
  }
  return t;
}

std::uint64_t ServeMetrics::redis_errors() const {
  return remote_stats_ ? remote_stats_->unavailable.load() + remote_stats_->errors.load() : 0;
}

void ServeMetrics::rules_loaded(const rules::RuleSet& set) {
  reload_ok_.inc();
  reload_time_.set(std::chrono::duration<double>(set.loaded_at().time_since_epoch()).count());
  std::lock_guard lock(rule_metrics_mu_);
  for (auto id : rule_metric_ids_) registry_.unregister(id);
  rule_metric_ids_.clear();
  for (const auto& r : set.rules()) {
    if (!r->limiter) continue;
    std::weak_ptr<Limiter> weak = r->limiter;  // the series outlive neither the rule nor its limiter
    const metrics::Labels labels = {{"domain", r->domain}, {"rule", r->path}};
    rule_metric_ids_.push_back(registry_.gauge_fn(n::kStoreKeys.name, n::kStoreKeys.help, labels, [weak] {
      auto l = weak.lock();
      return l ? static_cast<double>(l->stats().keys) : 0.0;
    }));
    rule_metric_ids_.push_back(registry_.counter_fn(n::kStoreEvictions.name, n::kStoreEvictions.help, labels, [weak] {
      auto l = weak.lock();
      return l ? l->stats().evictions : std::uint64_t{0};
    }));
  }
}

void ServeMetrics::rules_rejected() { reload_failed_.inc(); }

void ServeMetrics::xds_connected(bool connected) {
  for (const char* result : {"applied", "refused"}) {  // both series from the start, at 0
    registry_.counter(n::kXdsPushes.name, n::kXdsPushes.help, {{"result", result}});
  }
  registry_.gauge(n::kXdsConnected.name, n::kXdsConnected.help).set(connected ? 1 : 0);
}

void ServeMetrics::xds_pushed(bool applied, const std::string& version) {
  registry_.counter(n::kXdsPushes.name, n::kXdsPushes.help, {{"result", applied ? "applied" : "refused"}}).inc();
  if (!applied) return;
  std::lock_guard lock(xds_mu_);
  if (xds_version_id_ && version == xds_version_) return;
  if (xds_version_id_) registry_.unregister(*xds_version_id_);
  xds_version_ = version;
  xds_version_id_ =
      registry_.gauge_fn(n::kXdsVersion.name, n::kXdsVersion.help, {{"version", version}}, [] { return 1.0; });
}

void ServeMetrics::watch_telemetry(Count spans_exported, Count spans_dropped, Count access_log_dropped) {
  if (spans_exported && spans_dropped) {
    registry_.counter_fn(n::kTraceSpans.name, n::kTraceSpans.help, {{"result", "exported"}}, std::move(spans_exported));
    registry_.counter_fn(n::kTraceSpans.name, n::kTraceSpans.help, {{"result", "dropped"}}, std::move(spans_dropped));
  }
  if (access_log_dropped) {
    registry_.counter_fn(n::kAccessLogDropped.name, n::kAccessLogDropped.help, {}, std::move(access_log_dropped));
  }
}

void ServeMetrics::watch_remote(const service::Service& service) {
  const service::RemoteStats& rs = service.remote_stats();
  remote_stats_ = &rs;
  registry_.counter_fn(n::kEnvoyShouldRateLimitError.name, n::kEnvoyShouldRateLimitError.help,
                       {{"err_type", "redis_error"}}, [this] { return redis_errors(); });
  registry_.counter_fn(n::kRemoteCalls.name, n::kRemoteCalls.help, {}, [&rs] { return rs.calls.load(); });
  registry_.counter_fn(n::kRemoteFailures.name, n::kRemoteFailures.help, {{"result", "unavailable"}},
                       [&rs] { return rs.unavailable.load(); });
  registry_.counter_fn(n::kRemoteFailures.name, n::kRemoteFailures.help, {{"result", "error"}},
                       [&rs] { return rs.errors.load(); });
  if (const store::remote::RemoteStore* store = service.options().remote.get()) {
    registry_.counter_fn(n::kRemoteTlsFailures.name, n::kRemoteTlsFailures.help, {},
                         [store] { return store->tls_failures(); });
    registry_.counter_fn(n::kRemoteSpins.name, n::kRemoteSpins.help, {{"result", "answered"}},
                         [store] { return store->spins().answered; });
    registry_.counter_fn(n::kRemoteSpins.name, n::kRemoteSpins.help, {{"result", "idle"}},
                         [store] { return store->spins().idle; });
  }
  for (auto p : {rules::FailurePolicy::kFailOpen, rules::FailurePolicy::kFailClosed, rules::FailurePolicy::kLocal}) {
    registry_.counter_fn(n::kRemoteFallbacks.name, n::kRemoteFallbacks.help,
                         {{"policy", std::string(rules::failure_policy_name(p))}},
                         [&rs, p] { return rs.fallbacks[static_cast<int>(p)].load(); });
  }
  if (const store::batched::Batcher* b = service.batcher()) {
    const store::batched::BatcherStats& bs = b->stats();
    registry_.counter_fn(n::kBatches.name, n::kBatches.help, {}, [&bs] { return bs.batches.load(); });
    registry_.counter_fn(n::kBatchKeys.name, n::kBatchKeys.help, {}, [&bs] { return bs.keys_sent.load(); });
    registry_.counter_fn(n::kBatchFailedKeys.name, n::kBatchFailedKeys.help, {}, [&bs] { return bs.failed.load(); });
    registry_.gauge_fn(n::kBatchLag.name, n::kBatchLag.help, {}, [&bs] { return to_seconds(Nanos{bs.lag_ns.load()}); });
    registry_.gauge_fn(n::kBatchedKeys.name, n::kBatchedKeys.help, {},
                       [&bs] { return static_cast<double>(bs.keys.load()); });
    registry_.gauge_fn(n::kBatchedBytes.name, n::kBatchedBytes.help, {},
                       [&bs] { return static_cast<double>(bs.bytes.load()); });
  }
  registry_.gauge_fn(n::kBreakerState.name, n::kBreakerState.help, {},
                     [&service] { return service.breaker() ? static_cast<double>(service.breaker()->state()) : 0.0; });
  registry_.counter_fn(n::kBreakerOpened.name, n::kBreakerOpened.help, {},
                       [&service] { return service.breaker() ? service.breaker()->opened() : std::uint64_t{0}; });
}

server::api::Hooks ServeMetrics::hooks() {
  server::api::Hooks hooks;
  hooks.decided = [this](std::string_view protocol, std::string_view domain, const service::CheckResponse& r,
                         Nanos took) { decided(protocol, domain, r, took); };
  hooks.bad_request = [this](std::string_view protocol, std::string_view reason) { bad_request(protocol, reason); };
  hooks.metrics = [this] { return registry_.expose(); };
  return hooks;
}

void ServeMetrics::decided(std::string_view protocol, std::string_view domain, const service::CheckResponse& r,
                           Nanos took) {
  metrics::Histogram* h = protocol == "auth" ? auth_latency_ : protocol == "grpc" ? grpc_latency_ : http_latency_;
  if (h) h->observe(std::chrono::duration<double>(took).count());
  thread_local std::unordered_map<std::string, metrics::Counter*> cache;
  thread_local std::string id;
  // The series this thread counted last, asked before the map: a server's decisions mostly repeat one.
  thread_local std::string last_id;
  thread_local metrics::Counter* last = nullptr;
  // A domain no rules file names is labelled "(unknown)": label values must not come from clients unchecked.
  // Looked up only for a status without a rule (a matched rule names its domain).
  std::optional<bool> known;
  const auto is_known = [&] {
    if (!known) known = r.rules && r.rules->domain(domain) != nullptr;
    return *known;
  };
  for (const service::DescriptorStatus& st : r.statuses) {
    const std::string_view d = st.rule ? std::string_view(st.rule->domain) : is_known() ? domain : "(unknown)";
    const std::string_view rule = st.rule ? std::string_view(st.rule->path) : std::string_view();
    const std::string_view result = result_label(st);
    id.assign(d).append(1, '\n').append(rule).append(1, '\n').append(result);
    if (last && id == last_id) {
      last->inc();
      continue;
    }
    metrics::Counter*& c = cache[id];
    if (!c) {
      c = &registry_.counter(
          n::kDecisions.name, n::kDecisions.help,
          {{"domain", std::string(d)}, {"rule", std::string(rule)}, {"result", std::string(result)}});
    }
    c->inc();
    last_id = id;
    last = c;
  }
  if (logging::log_enabled(logging::Level::kDebug)) {
    logging::log(logging::Level::kDebug, "decision",
                 {{"protocol", std::string(protocol)},
                  {"domain", std::string(domain)},
                  {"code", std::string(service::code_name(r.overall))}});
  }
}

void ServeMetrics::bad_request(std::string_view protocol, std::string_view reason) {
  thread_local std::unordered_map<std::string, metrics::Counter*> cache;  // as decided()'s
  thread_local std::string id;
  id.assign(protocol).append(1, '\n').append(reason);
  metrics::Counter*& c = cache[id];
  if (!c) {
    c = &registry_.counter(n::kBadRequests.name, n::kBadRequests.help,
                           {{"protocol", std::string(protocol)}, {"reason", std::string(reason)}});
  }
  c->inc();
}

void ServeMetrics::grpc_answered(std::string_view code) {
  thread_local std::unordered_map<std::string, metrics::Counter*> cache;  // as decided()'s
  metrics::Counter*& c = cache[std::string(code)];
  if (!c) {
    c = &registry_.counter(n::kGrpcRequests.name, n::kGrpcRequests.help,
                           {{"method", "ShouldRateLimit"}, {"code", std::string(code)}});
    std::lock_guard lock(grpc_mu_);
    if (std::none_of(grpc_codes_.begin(), grpc_codes_.end(), [&](const auto& e) { return e.second == c; })) {
      grpc_codes_.emplace_back(code, c);
    }
  }
  c->inc();
  if (code != "OK") bad_request("grpc", "invalid_argument");
}

void ServeMetrics::tls_reloaded(bool ok) {  // rare: the registry's lock each time is no cost
  registry_.counter(n::kTlsReloads.name, n::kTlsReloads.help, {{"result", ok ? "success" : "failure"}}).inc();
}

std::shared_ptr<service::DecisionObserver> ServeMetrics::descriptor_stats(double near_limit_ratio) {
  if (!descriptor_stats_) {
    descriptor_stats_ = std::make_shared<metrics::envoy::DescriptorStats>(
        registry_, metrics::envoy::DescriptorStatsOptions{.near_limit_ratio = near_limit_ratio});
  }
  return descriptor_stats_;
}

std::string ServeMetrics::upstream_stats_text() const {
  std::vector<std::string> lines;
  if (descriptor_stats_) lines = descriptor_stats_->stats_lines();
  lines.push_back("ratelimit.service.config_load_success: " + std::to_string(reload_ok_.value()));
  lines.push_back("ratelimit.service.config_load_error: " + std::to_string(reload_failed_.value()));
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

void ServeMetrics::statsd_lines(metrics::statsd::Emitter& out) {
  if (descriptor_stats_) {
    for (const auto* k : descriptor_stats_->keys_since(statsd_keys_.size())) statsd_keys_.push_back(k);
  }
  std::string name;
  for (const metrics::envoy::KeyCounters* k : statsd_keys_) {
    const metrics::Counter* counters[] = {&k->total, &k->over, &k->near, &k->within, &k->shadow};
    for (std::size_t i = 0; i < n::kStatsdDescriptorStats.size(); ++i) {
      name.assign(n::kStatsdRateLimit).append(k->key).append(1, '.').append(n::kStatsdDescriptorStats[i]);
      out.counter(name, counters[i]->value());
    }
  }
  out.counter(n::kStatsdConfigLoadSuccess, reload_ok_.value());
  out.counter(n::kStatsdConfigLoadError, reload_failed_.value());
  if (remote_stats_) out.counter(n::kStatsdRedisError, redis_errors());
  if (grpc_latency_) {
    const GrpcTotals t = grpc_totals();
    out.counter(n::kStatsdTotalRequests, t.all);
    out.counter(n::kStatsdServiceError, t.refused);
    out.timer(n::kStatsdResponseTime, *grpc_latency_);
  }
}

void ServeMetrics::watch_statsd(const metrics::statsd::SinkStats& stats) {
  registry_.counter_fn(n::kStatsdDatagrams.name, n::kStatsdDatagrams.help, {{"result", "sent"}},
                       [&stats] { return stats.sent.load(); });
  registry_.counter_fn(n::kStatsdDatagrams.name, n::kStatsdDatagrams.help, {{"result", "dropped"}},
                       [&stats] { return stats.dropped.load(); });
}

}  // namespace rk::cli::serve
