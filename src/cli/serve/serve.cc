// cli/serve/serve.cc: `ratekeeper serve` from start to drain: flags read, rules loaded, the store chosen, the
// service and its listeners started, then SIGTERM or SIGINT awaited and everything stopped in order.
#include "cli/serve/serve.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <memory>

#include "base/periodic.h"
#include "dashboard/routes.h"
#include "dashboard/tracker.h"
#include "logging/log.h"
#include "rules/reloader.h"
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
  if (errors.empty() && flags.config.empty()) errors.push_back("--config is required");
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
  rules::ReloadEvents events{
      .on_success =
          [&metrics, loaded](const rules::RuleSet& set) {
            *loaded = true;
            metrics.rules_loaded(set);
            logging::log(logging::Level::kInfo, "rules loaded",
                         {{"version", set.version()}, {"domains", std::to_string(set.domains().size())},
                          {"rules", std::to_string(set.rules().size())}});
          },
      .on_failure =
          [&metrics, loaded](const std::vector<rules::ConfigError>& errors) {
            metrics.rules_rejected();
            const char* what = *loaded ? "rules rejected; keeping the last good rules" : "rules rejected";
            for (const auto& e : errors) logging::log(logging::Level::kError, what, {{"error", e.to_string()}});
          }};
  return std::make_unique<rules::Reloader>(flags.config, build, std::move(events),
                                           rules::LoadOptions{.merge_domains = flags.merge_domains,
                                                              .without_redis = flags.redis.empty()});
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
    for (const auto& [flag, value] : {std::pair{"--redis-tls-ca", &flags.redis_tls_ca},
                                      std::pair{"--redis-tls-cert", &flags.redis_tls_cert},
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
               {{"open_files", std::to_string(files.soft)}, {"raised_from", std::to_string(files.was)},
                {"max_connections", std::to_string(budget.http_max)},
                {"grpc_max_connections", std::to_string(budget.grpc_max)},
                {"admin_max_connections", std::to_string(budget.admin_max)}});
  for (const std::string& w : budget.warnings) {
    logging::log(logging::Level::kInfo, "connection cap lowered to fit the open files limit", {{"warning", w}});
  }
}

// Until SIGTERM or SIGINT; then what feeds the service stops, callers first, so that requests in flight finish.
void drain(const sigset_t& signals, std::atomic<bool>& draining, Listeners& listeners, store::remote::RemoteStore* remote,
           store::batched::Batcher* batcher, rules::Reloader& reloader, Sweeper& sweeper, StateSaver* saver) {
  int sig = 0;
  sigwait(&signals, &sig);
  logging::log(logging::Level::kInfo, "draining", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  draining = true;
  listeners.stop();
  if (remote) remote->close();  // nothing waits on it any more; its callbacks end before the service goes
  if (batcher) batcher->close();  // sends what was recorded since its last batch
  reloader.stop();
  sweeper.stop();
  if (saver) saver->stop();  // after the listeners: no decision is lost between the save and the exit
  logging::report_held_lines();
  logging::log(logging::Level::kInfo, "stopped");
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  ServeFlags flags;
  if (const int code = read_flags(args, flags); code >= 0) return code;
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
  Telemetry telemetry;  // before the service, which traces with it: destroyed after it
  if (!make_telemetry(flags, telemetry, error)) {
    std::cerr << "ratekeeper serve: " << error << "\n";
    return 2;
  }
  log_fd_budget(files, listener.budget);
  const sigset_t signals = block_stop_signals();
  auto clock = std::make_shared<SystemClock>();
  ServeMetrics metrics(!flags.grpc.empty());
  const auto reloader = make_reloader(flags, clock, metrics);
  if (!reloader->load_now().empty()) {
    std::cerr << "ratekeeper serve: the rules in " << flags.config << " are not valid (see above); not starting\n";
    return 1;
  }
  reloader->start(std::chrono::duration_cast<std::chrono::milliseconds>(flags.reload_interval));
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
                 {{"endpoint", otlp_traces_url(flags)}, {"protocol", flags.otlp_protocol},
                  {"sample_rate", std::to_string(flags.trace_sample_rate)}});
  }
  if (remote) {
    metrics.watch_remote(service);
    logging::log(logging::Level::kInfo, "sharing limits through Redis", {{"redis", remote->describe()}});
  }
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
  server::api::Hooks hooks = metrics.hooks();
  hooks.ready = [&] { return !draining.load() && reloader->current() != nullptr; };
  // The dashboard's page, JSON and what-ifs on the admin listener, behind its own-page checks and token.
  listener.admin_routes.push_back(dashboard::admin_routes(service, tracker, hooks));
  std::unique_ptr<Listeners> listeners;
  try {
    listeners = std::make_unique<Listeners>(flags, listener, service, metrics, hooks);
  } catch (const std::exception& e) {
    std::cerr << "ratekeeper serve: " << e.what() << "\n";
    return 1;
  }
  Sweeper sweeper(*reloader, flags.sweep_interval);
  drain(signals, draining, *listeners, remote.get(), batcher.get(), *reloader, sweeper, saver.get());
  return 0;
}

}  // namespace rk::cli::serve
