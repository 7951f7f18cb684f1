// cli/serve/serve.cc: `ratekeeper serve` from start to drain: flags read, rules loaded, the store chosen, the
// service and its listeners started, then SIGTERM or SIGINT awaited, the drain, and everything stopped in order.
#include "cli/serve/serve.h"

#include <pthread.h>
#include <signal.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/periodic.h"
#include "cli/upstream_env.h"
#include "dashboard/routes.h"
#include "dashboard/tracker.h"
#include "logging/log.h"
#include "metrics/statsd.h"
#include "rules/reloader.h"
#ifdef RK_HAVE_GRPC
#include "rules/xds/client.h"
#include "server/grpc/log_routing.h"
#else
namespace rk::rules::xds {
class Client {};
}  // namespace rk::rules::xds
#endif
#include "cli/serve/fd_budget.h"
#include "cli/serve/flags.h"
#include "cli/serve/listeners.h"
#include "cli/serve/serve_metrics.h"
#include "cli/serve/state_file.h"
#include "cli/serve/sweeper.h"
#include "cli/serve/telemetry.h"
#include "service/service.h"
#include "store/batched/batcher.h"
#include "store/redis/remote.h"
#include "store/redis/shared_counters.h"

namespace rk::cli::serve {

namespace {

// -1 when the flags are good, else the exit code, having printed the help or every problem.
int read_flags(const std::vector<std::string>& args, ServeFlags& flags) {
  bool help = false;
  std::vector<std::string> errors = read_serve_flags(args, flags, help);
  if (help) {
    std::cout << serve_help();
    return 0;
  }
  // Rules come from files or from a control plane, never both: which rule would win is not a question to answer.
  if (errors.empty() && flags.config.empty() && flags.xds.server.empty()) {
    errors.push_back("--config (rules files) or --xds-server (a control plane) is required");
  }
  // The state file is restored into the rules present at the start; pushed rules arrive later.
  if (errors.empty() && !flags.state_file.empty() && !flags.xds.server.empty()) {
    errors.push_back(
        "--state-file: not with --xds-server (a state is restored into the rules present at the start, "
        "and pushed rules come later)");
  }
  if (errors.empty() && !flags.config.empty() && !flags.xds.server.empty()) {
    errors.push_back(
        "--config and --xds-server are alternatives: the rules come from files or from the control "
        "plane, give one");
  }
  if (errors.empty()) {
    if (flags.log_level) logging::set_log_level(*flags.log_level);
    logging::set_log_format(flags.log_format);
    return -1;
  }
  for (const std::string& e : errors) std::cerr << "ratekeeper serve: " << e << "\n";
  std::cerr << cli::help_hint("ratekeeper serve");
  return 2;
}

// Signals are taken by sigwait() in drain(), never by a server thread: block them before any thread starts.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Counter keys are bounded by the request limits (4,096 bytes of keys and values a descriptor, plus framing);
// the stores keep those over 64 bytes as digests. `memory_bytes`: the share of --max-memory.
StoreOptions store_options(const ServeFlags& flags, std::size_t memory_bytes) {
  return {.max_keys = flags.max_keys, .max_key_bytes = 1 << 16, .max_memory_bytes = memory_bytes};
}

// --max-memory's split (docs/security.md): 7/8 for the rules' stores, shared equally by them, 1/8 for the request
// overrides'; with --redis, one of the rules' eighths goes to the `sharing: batched` domains' keys (the batcher).
// 0 everywhere without --max-memory.
struct MemoryShares {
  std::size_t rules, overrides, batcher;
};
MemoryShares memory_shares(const ServeFlags& flags) {
  const std::size_t eighth = flags.max_memory / 8;
  const bool batcher = !flags.redis.empty();
  return {.rules = eighth * (batcher ? 6 : 7), .overrides = eighth, .batcher = batcher ? eighth : 0};
}

// The rules from --config, reloaded live, each load counted and logged. Before the first good load there are no
// last good rules to keep: a refusal then says only that.
std::unique_ptr<rules::Reloader> make_reloader(const ServeFlags& flags, std::shared_ptr<const Clock> clock,
                                               ServeMetrics& metrics) {
  const rules::BuildOptions build{.store = store_options(flags, memory_shares(flags).rules), .clock = std::move(clock)};
  auto loaded = std::make_shared<std::atomic<bool>>(false);
  rules::ReloadEvents events{.on_success =
                                 [&metrics, loaded](const rules::RuleSet& set) {
                                   *loaded = true;
                                   metrics.rules_loaded(set);
                                   logging::log(logging::Level::kInfo, "rules loaded",
                                                {{"version", set.version()},
                                                 {"domains", std::to_string(set.domains().size())},
                                                 {"rules", std::to_string(set.rules().size())}});
                                 },
                             .on_failure =
                                 [&metrics, loaded](const std::vector<rules::ConfigError>& errors) {
                                   metrics.rules_rejected();
                                   const char* what = *loaded ? "rules rejected; keeping the last good rules"
                                                              : "rules rejected";
                                   for (const auto& e : errors)
                                     logging::log(logging::Level::kError, what, {{"error", e.to_string()}});
                                 }};
  return std::make_unique<rules::Reloader>(flags.config, build, std::move(events),
                                           rules::LoadOptions{.merge_domains = flags.merge_domains,
                                                              .without_redis = flags.redis.empty(),
                                                              .skip_dotfiles = flags.skip_dotfiles});
}

// --xds-server's client, started (null without it); null with `error` for a TLS file or metadata it refuses, or
// when built without gRPC.
std::unique_ptr<rules::xds::Client> start_xds(const ServeFlags& flags, rules::Reloader& reloader, ServeMetrics& metrics,
                                              std::string& error) {
  if (flags.xds.server.empty()) return nullptr;
#ifdef RK_HAVE_GRPC
  server::grpc::route_grpc_logs();  // a failed handshake with the control plane is logged as ours are, held back
  try {
    metrics.xds_connected(false);
    auto client = std::make_unique<rules::xds::Client>(
        reloader, flags.xds,
        rules::xds::XdsEvents{.on_connected = [&metrics](bool up) { metrics.xds_connected(up); },
                              .on_push = [&metrics](bool applied, const std::string& version,
                                                    const std::string&) { metrics.xds_pushed(applied, version); }});
    client->start();
    return client;
  } catch (const std::exception& e) {
    error = e.what();
  }
#else
  (void)reloader;
  (void)metrics;
  error = "--xds-server: this ratekeeper was built without gRPC";
#endif
  return nullptr;
}

store::redis::RedisRemoteOptions redis_options(const ServeFlags& flags) {
  return {.url = flags.redis,
          .tls = {.ca_file = flags.redis_tls_ca,
                  .cert_file = flags.redis_tls_cert,
                  .key_file = flags.redis_tls_key,
                  .server_name = flags.redis_tls_server_name},
          .password_file = flags.redis_password_file,
          .caller_clock = flags.redis_local_clock,
          .timeout = flags.redis_timeout,
          .connections = flags.redis_connections,
          .spin = std::chrono::duration_cast<std::chrono::microseconds>(flags.redis_spin),
          .near_cache = flags.redis_near_cache,
          .packed_hashes = flags.redis_packed_hashes};
}

// The Redis store of --redis (null without it); null with `error` for a URL, or a TLS or password file, it refuses,
// or for a flag about Redis given without --redis.
std::shared_ptr<store::remote::RemoteStore> connect_redis(const ServeFlags& flags, std::string& error) {
  if (flags.redis.empty()) {
    for (const auto& [flag, value] :
         {std::pair{"--redis-tls-ca", &flags.redis_tls_ca}, std::pair{"--redis-tls-cert", &flags.redis_tls_cert},
          std::pair{"--redis-tls-key", &flags.redis_tls_key},
          std::pair{"--redis-tls-server-name", &flags.redis_tls_server_name},
          std::pair{"--redis-password-file", &flags.redis_password_file}}) {
      if (!value->empty()) error = std::string(flag) + ": '" + *value + "' given without --redis";
    }
    return nullptr;
  }
  try {
    return store::redis::make_redis_remote(redis_options(flags));
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}

// --state-file-key-file's key (null without it); false with `error` for a file it refuses, or given without
// --state-file.
bool state_key_file(const ServeFlags& flags, std::shared_ptr<base::SecretFile>& key, std::string& error) {
  if (flags.state_key_file.empty()) return true;
  if (flags.state_file.empty()) {
    error = "--state-file-key-file: '" + flags.state_key_file + "' given without --state-file";
    return false;
  }
  try {
    key = read_state_key(flags.state_key_file);
  } catch (const std::invalid_argument& e) {
    error = e.what();
    return false;
  }
  return true;
}

// --statsd-tags and --stats-flush-interval mean something with --statsd only, --prometheus-path with --prometheus.
std::string stats_flags_error(const ServeFlags& flags) {
  if (flags.statsd.empty() && !flags.statsd_tags.empty()) return "--statsd-tags: given without --statsd";
  if (flags.statsd.empty() && flags.stats_flush_interval_given) return "--stats-flush-interval: given without --statsd";
  if (flags.prometheus.empty() && flags.prometheus_path != "/metrics") {
    return "--prometheus-path: given without --prometheus";
  }
  return {};
}

// --statsd's sink over serve's counters (null without it), started.
std::unique_ptr<metrics::statsd::Sink> start_statsd(const ServeFlags& flags, ServeMetrics& metrics) {
  if (flags.statsd.empty()) return nullptr;
  std::string error;
  auto sink = std::make_unique<metrics::statsd::Sink>(
      metrics::statsd::SinkOptions{.address = flags.statsd,
                                   .tags = *metrics::statsd::parse_tags(flags.statsd_tags, error),  // checked
                                   .interval = flags.stats_flush_interval},
      [&metrics](metrics::statsd::Emitter& out) { metrics.statsd_lines(out); });
  metrics.watch_statsd(sink->stats());
  sink->start();
  logging::log(logging::Level::kInfo, "sending statistics to statsd", {{"statsd", flags.statsd}});
  return sink;
}

// `sharing: batched` domains' batcher over its own connections to the same Redis.
std::shared_ptr<store::batched::Batcher> make_batcher(const ServeFlags& flags, std::shared_ptr<const Clock> clock) {
  return std::make_shared<store::batched::Batcher>(
      store::redis::make_redis_shared_counters(redis_options(flags)), std::move(clock),
      store::batched::BatcherOptions{.interval = flags.redis_batch_interval,
                                     .max_keys = flags.max_keys,
                                     .max_memory_bytes = memory_shares(flags).batcher});
}

// The open files limit (RLIMIT_NOFILE), and each default cap lowered to fit it.
void log_fd_budget(const OpenFiles& files, const FdBudget& budget) {
  logging::log(logging::Level::kInfo, "file descriptors",
               {{"open_files", std::to_string(files.soft)},
                {"raised_from", std::to_string(files.was)},
                {"max_connections", std::to_string(budget.http_max)},
                {"grpc_max_connections", std::to_string(budget.grpc_max)},
                {"admin_max_connections", std::to_string(budget.admin_max)}});
  for (const std::string& w : budget.warnings) {
    logging::log(logging::Level::kInfo, "connection cap lowered to fit the open files limit", {{"warning", w}});
  }
}

// A second signal during the drain ends it; false when `d` passed without one.
bool signalled_within(const sigset_t& signals, Nanos d) {
  const auto end = std::chrono::steady_clock::now() + d;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(end - std::chrono::steady_clock::now());
    if (left <= Nanos{0}) return false;
    const timespec wait{.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000),
                        .tv_nsec = static_cast<long>(left.count() % 1'000'000'000)};
    if (sigtimedwait(&signals, nullptr, &wait) > 0) return true;  // else EAGAIN (time is up) or EINTR: look again
  }
}

// Past --shutdown-grace from the first signal, the process exits whatever is unfinished (a store that does not
// answer, a state file on a stuck disk): before the orchestrator's SIGKILL, and saying so.
class GraceWatch {
 public:
  explicit GraceWatch(Nanos grace)
      : thread_([this, end = std::chrono::steady_clock::now() + grace, grace] {
          std::unique_lock lock(mu_);
          if (cv_.wait_until(lock, end, [this] { return done_; })) return;
          logging::log(logging::Level::kError, "shutdown grace passed; exiting unfinished",
                       {{"shutdown_grace", format_seconds(grace) + "s"}});
          logging::report_held_lines();
          std::_Exit(1);
        }) {}
  ~GraceWatch() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

// Until SIGTERM or SIGINT; then not ready at once (the probes and gRPC health), still answering for --drain while
// load balancers stop sending (a second signal ends it early); then what feeds the service stops, callers first, so
// that requests in flight finish, and the state file is saved last; all within --shutdown-grace of the signal.
void drain(const sigset_t& signals, const ServeFlags& flags, std::atomic<bool>& draining, Listeners& listeners,
           store::remote::RemoteStore* remote, store::batched::Batcher* batcher, rules::Reloader& reloader,
           rules::xds::Client* xds, Sweeper& sweeper, StateSaver* saver) {
  int sig = 0;
  sigwait(&signals, &sig);
  GraceWatch watch(flags.shutdown_grace);
  draining = true;
  listeners.not_ready();
  logging::log(logging::Level::kInfo, "draining",
               {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
                {"drain", format_seconds(flags.drain) + "s"},
                {"shutdown_grace", format_seconds(flags.shutdown_grace) + "s"}});
  if (signalled_within(signals, flags.drain)) logging::log(logging::Level::kInfo, "drain ended by a second signal");
  listeners.stop();
  if (remote) remote->close();    // nothing waits on it any more; its callbacks end before the service goes
  if (batcher) batcher->close();  // sends what was recorded since its last batch
#ifdef RK_HAVE_GRPC
  if (xds) xds->stop();
#else
  (void)xds;
#endif
  reloader.stop();  // a reload under way finishes first
  sweeper.stop();
  if (saver) saver->stop();  // after the listeners: no decision is lost between the save and the exit
  logging::report_held_lines();
  logging::log(logging::Level::kInfo, "stopped");
}

}  // namespace

namespace {

int serve(const std::vector<std::string>& args, const std::vector<std::string>& notes) {
  ServeFlags flags;
  if (const int code = read_flags(args, flags); code >= 0) return code;
  for (const std::string& note : notes) {
    logging::log(logging::Level::kInfo, "upstream's environment: accepted without a flag", {{"note", note}});
  }
  // Every connection takes a file descriptor: the listeners' caps are planned against what the process may open.
  const OpenFiles files = raise_open_files_limit();
  ListenerOptions listener;
  std::string error;
  if (!listener_options(flags, files.soft, listener, error)) {
    std::cerr << "ratekeeper serve: " << error << "\n";
    return 2;
  }
  std::shared_ptr<base::SecretFile> state_key;
  if (!state_key_file(flags, state_key, error)) {
    std::cerr << "ratekeeper serve: " << error << "\n";
    return 2;
  }
  if (error = stats_flags_error(flags); !error.empty()) {
    std::cerr << "ratekeeper serve: " << error << "\n";
    return 2;
  }
  // Before any thread starts (the exporter's is the first): every thread inherits the mask, so SIGTERM and SIGINT
  // reach only the sigwait of the drain and never a thread's default action.
  const sigset_t signals = block_stop_signals();
  Telemetry telemetry;  // before the service, which traces with it: destroyed after it
  if (!make_telemetry(flags, telemetry, error)) {
    std::cerr << "ratekeeper serve: " << error << "\n";
    return 2;
  }
  log_fd_budget(files, listener.budget);
  auto clock = std::make_shared<SystemClock>();
  ServeMetrics metrics(!flags.grpc.empty());
  const auto reloader = make_reloader(flags, clock, metrics);
  if (flags.xds.server.empty()) {
    if (!reloader->load_now().empty()) {
      std::cerr << "ratekeeper serve: the rules in " << flags.config << " are not valid (see above); not starting\n";
      return 1;
    }
    reloader->start(std::chrono::duration_cast<std::chrono::milliseconds>(flags.reload_interval));
  }
  const auto xds = start_xds(flags, *reloader, metrics, error);
  if (!xds && !error.empty()) {
    std::cerr << "ratekeeper serve: " << error << "\n";
    return 2;
  }
  std::shared_ptr<store::remote::RemoteStore> remote;
  if (!(remote = connect_redis(flags, error)) && !error.empty()) {
    // An error about a TLS or password file names its own flag; the rest are about the URL.
    std::cerr << "ratekeeper serve: " << (error.starts_with("--") ? "" : "--redis: ") << error << "\n";
    return 2;
  }
  std::shared_ptr<store::batched::Batcher> batcher;
  if (remote) batcher = make_batcher(flags, clock);
  // Every decision feeds the dashboard's counters and hot keys (docs/dashboard.md) and envoyproxy/ratelimit's
  // per-descriptor counters.
  auto tracker = std::make_shared<dashboard::Tracker>();
  // Its rates of the last minutes, sampled whether a page is open or not: a page opened later draws them at once.
  base::Periodic rate_sampler;
  rate_sampler.start(dashboard::kRateSampleInterval, [&] { tracker->sample(clock->now()); });
  service::Service service(
      *reloader, clock,
      {.shadow_mode = flags.shadow_mode,
       .store = store_options(flags, memory_shares(flags).overrides),
       .remote = remote,
       .redis_failure = flags.redis_failure,
       .observer = service::observe_all({tracker, metrics.descriptor_stats(flags.near_limit_ratio)}),
       .batcher = batcher,
       .tracer = telemetry.tracer,
       .access_log = telemetry.access_log});
  ServeMetrics::Count access_log_dropped;
  if (telemetry.access_log) access_log_dropped = [log = telemetry.access_log.get()] { return log->dropped(); };
  metrics.watch_telemetry(telemetry.spans_exported, telemetry.spans_dropped, std::move(access_log_dropped));
  if (telemetry.tracer) {
    logging::log(logging::Level::kInfo, "tracing",
                 {{"endpoint", otlp_traces_url(flags)},
                  {"protocol", flags.otlp_protocol},
                  {"sample_rate", std::to_string(flags.trace_sample_rate)}});
  }
  if (remote) {
    metrics.watch_remote(service);
    logging::log(logging::Level::kInfo, "sharing limits through Redis", {{"redis", remote->describe()}});
  }
  const auto statsd = start_statsd(flags, metrics);
  // Restored before the listeners open, so that no decision is made on a key that is about to be restored.
  std::unique_ptr<StateSaver> saver;
  if (!flags.state_file.empty()) {
    saver = std::make_unique<StateSaver>(
        flags.state_file, *reloader,
        [&service](const rules::RuleSet& set, const rules::Rule& rule) {
          return !service.uses_remote(set.domain(rule.domain));
        },
        clock, flags.state_interval, state_key);
  }
  std::atomic<bool> draining{false};
  // Every listener listening: the public one answers probes while the others are still starting.
  std::atomic<bool> listening{false};
  server::api::Hooks hooks = metrics.hooks();
  // Before the control plane's first push there are no rules: not ready, unless told to answer OK until then.
  hooks.ready = [&] {
    return listening.load() && !draining.load() && (reloader->current() != nullptr || flags.ready_without_rules);
  };
  // The dashboard's page, JSON and what-ifs on the admin listener, behind its own-page checks and token.
  listener.admin_routes.push_back(dashboard::admin_routes(service, tracker, hooks));
  std::unique_ptr<Listeners> listeners;
  try {
    listeners = std::make_unique<Listeners>(flags, listener, service, metrics, hooks);
  } catch (const std::exception& e) {
    std::cerr << "ratekeeper serve: " << e.what() << "\n";
    return 1;
  }
  listening = true;
  // With rules over xDS, readiness changes at the first push: gRPC health follows it (looked at every 100 ms).
  base::Periodic grpc_health;
  if (!flags.xds.server.empty()) {
    listeners->set_grpc_serving(hooks.ready());
    grpc_health.start(std::chrono::milliseconds(100), [&] { listeners->set_grpc_serving(hooks.ready()); });
  }
  Sweeper sweeper(*reloader, flags.sweep_interval);
  drain(signals, flags, draining, *listeners, remote.get(), batcher.get(), *reloader, xds.get(), sweeper, saver.get());
  if (statsd) statsd->stop();  // a last flush: what the drain's decisions counted
  return 0;
}

}  // namespace

int run_serve(const std::vector<std::string>& args) { return serve(args, {}); }

int run_ratelimit(const std::vector<std::string>& args) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const std::size_t eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  cli::UpstreamEnv t = cli::translate_upstream_env(env, is_serve_flag);
  if (!t.errors.empty()) {
    for (const std::string& e : t.errors) std::cerr << "ratelimit: " << e << "\n";
    std::cerr << "ratelimit: envoyproxy/ratelimit's variables as ratekeeper reads them: docs/envoy-gateway.md\n";
    return 2;
  }
  t.args.insert(t.args.end(), args.begin(), args.end());
  return serve(t.args, t.notes);
}

}  // namespace rk::cli::serve
