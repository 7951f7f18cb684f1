#include "server/serve/serve.h"

#include <pthread.h>
#include <yaml-cpp/yaml.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "ratekeeper/ratekeeper.h"
#include "metrics/envoy/descriptor_stats.h"
#include "metrics/names.h"
#include "metrics/registry.h"
#include "rules/reloader.h"
#include "server/api/routes.h"
#include "logging/log.h"
#include "store/redis/remote.h"
#include "service/service.h"
#include "server/http/server.h"
#include "dashboard/tracker.h"
#ifdef RK_HAVE_GRPC
#include "server/grpc/rls_server.h"
#endif

namespace rk::serve {

namespace {

struct ServeFlags {
  std::string config;
  std::string http = "127.0.0.1:8080";
  std::string admin = "127.0.0.1:9090";
  std::string grpc;  // empty: no gRPC listener
  bool grpc_headers = false;
  int threads = 2;
  std::size_t max_connections = 10000;
  std::size_t max_connections_per_ip = 256;
  std::vector<std::string> per_ip_exempt = {"127.0.0.0/8", "::1"};
  Nanos busy_idle_timeout = std::chrono::seconds(5);
  int grpc_max_message_bytes = 64 * 1024;
  int grpc_max_streams_per_connection = 256;
  int grpc_max_watch_streams = 1024;
  bool shadow_mode = false;
  bool merge_domains = false;
  double near_limit_ratio = 0.8;  // envoyproxy/ratelimit's NEAR_LIMIT_RATIO, for its per-descriptor counters
  std::size_t max_keys = 1'000'000;
  std::size_t max_memory = 0;  // bytes; 0: bounded by max_keys alone
  Nanos reload_interval = std::chrono::milliseconds(250);
  Nanos sweep_interval = std::chrono::seconds(10);
  Nanos header_timeout = std::chrono::seconds(10);
  std::string redis;  // empty: every domain in memory
  bool redis_local_clock = false;
  bool redis_near_cache = false;
  Nanos redis_timeout = std::chrono::milliseconds(100);
  int redis_connections = 2;
  rules::FailurePolicy redis_failure = rules::FailurePolicy::kFailOpen;
  api::ForwardAuthOptions forward;  // --proxy, --ipv4-prefix, --ipv6-prefix (and the two path switches below)
  bool keep_path_params = false;
  bool path_case_insensitive = false;
  std::vector<std::string> admin_hosts;
};

const char* kServeUsage =
    "usage: ratekeeper serve --config PATH [flags]\n"
    "  --settings FILE          a YAML mapping of these flags without their dashes (redis: URL, ...);\n"
    "                           flags given on the command line win over the file\n"
    "  --config PATH            a rules file, or a directory of them (reloaded live)\n"
    "  --http ADDR:PORT         decision API and forward-auth (default 127.0.0.1:8080)\n"
    "  --admin ADDR:PORT        metrics, rules, admin API (default 127.0.0.1:9090)\n"
    "  --grpc ADDR:PORT         Envoy's rate-limit gRPC API and gRPC health (off unless given)\n"
    "  --grpc-response-headers  add the RateLimit header fields to gRPC answers\n"
    "  --threads N              HTTP threads per listener (default 2)\n"
    "  --max-connections N      HTTP connections at once (default 10000)\n"
    "  --max-connections-per-ip N  of those, from one IPv4 address or IPv6 /64 (default 256; 0: no limit)\n"
    "  --per-ip-exempt LIST     addresses or CIDR ranges of proxies in front, which only --max-connections\n"
    "                           bounds (default 127.0.0.0/8,::1)\n"
    "  --busy-idle-timeout DUR  idle connections are closed after this from 3/4 of --max-connections on\n"
    "                           (default 5s)\n"
    "  --grpc-max-message-bytes N, --grpc-max-streams-per-connection N, --grpc-max-watch-streams N\n"
    "                           gRPC bounds (defaults 65536, 256, 1024)\n"
    "  --shadow-mode            count everything, refuse nothing\n"
    "  --merge-domains          the files of one domain make one domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG)\n"
    "  --near-limit-ratio R     the share of a limit past which hits count as near_limit in envoyproxy/ratelimit's\n"
    "                           per-descriptor counters (NEAR_LIMIT_RATIO; default 0.8)\n"
    "  --max-keys N             keys tracked per rule before LRU eviction (default 1000000)\n"
    "  --max-memory BYTES       the stores' budget (e.g. 512MiB): 7/8 shared equally by the rules, 1/8 by\n"
    "                           request overrides; each store holds fewer keys if its share needs it (default: none)\n"
    "  --reload-interval DUR    how often the rules are checked for changes (default 250ms)\n"
    "  --header-timeout DUR     a request's head must arrive within this (default 10s)\n"
    "  --redis URL              share limits through Redis: redis://[user:pass@]host:port[/db],\n"
    "                           redis+cluster://h1:p1,h2:p2, redis+sentinel://h:p/primary (default: in memory)\n"
    "  --redis-clock SOURCE     redis (default: Redis's own TIME) or local (this server's clock)\n"
    "  --redis-timeout DUR      per command; past it the domain's failure policy decides (default 100ms)\n"
    "  --redis-connections N    connections per Redis node (default 2)\n"
    "  --redis-failure POLICY   fail_open (default), fail_closed or local, for domains that name none\n"
    "  --redis-near-cache       answer keys Redis refused until a known time here, without a round trip\n"
    "  --proxy KIND             who calls /v1/auth: none (default: no header believed), nginx, traefik,\n"
    "                           caddy or envoy; only that proxy's headers, from a trusted proxy, are read\n"
    "  --ipv4-prefix N          forward-auth keys IPv4 clients by their /N (default 32)\n"
    "  --ipv6-prefix N          forward-auth keys IPv6 clients by their /N (default 64)\n"
    "  --keep-path-params       keep ';' parameters in forward-auth paths (default: /a;x=1 is /a)\n"
    "  --path-case-insensitive  fold forward-auth paths to lower case (for case-insensitive backends)\n"
    "  --admin-hosts NAMES      host names (comma-separated) the admin listener answers to, besides IP\n"
    "                           addresses and localhost names\n"
    "  --log-level LEVEL        debug, info (default) or error\n";

// "536870912", "512MiB", "2GiB", "64KiB": bytes, at most 2^50.
std::optional<std::size_t> parse_bytes(std::string_view s) {
  std::size_t n = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || p == s.data()) return std::nullopt;
  const std::string_view unit(p, static_cast<std::size_t>(s.data() + s.size() - p));
  unsigned shift = 0;
  if (unit == "KiB") shift = 10;
  else if (unit == "MiB") shift = 20;
  else if (unit == "GiB") shift = 30;
  else if (!unit.empty()) return std::nullopt;
  if (n > (std::size_t{1} << (50 - shift))) return std::nullopt;
  return n << shift;
}

bool split_address(const std::string& s, std::string& host, std::uint16_t& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned v = 0;
  const char* b = s.data() + colon + 1;
  const char* e = s.data() + s.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc{} || p != e || v > 65535 || b == e) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

// The flags that take no value, by name without their dashes (as a settings file names them).
struct Switch {
  std::string_view name;
  bool ServeFlags::*field;
};
constexpr Switch kSwitches[] = {{"shadow-mode", &ServeFlags::shadow_mode},
                                {"redis-near-cache", &ServeFlags::redis_near_cache},
                                {"grpc-response-headers", &ServeFlags::grpc_headers},
                                {"keep-path-params", &ServeFlags::keep_path_params},
                                {"path-case-insensitive", &ServeFlags::path_case_insensitive},

                                {"merge-domains", &ServeFlags::merge_domains}};

const Switch* find_switch(std::string_view name) {
  for (const Switch& s : kSwitches) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool apply_flags(const std::vector<std::string>& args, ServeFlags& f, std::string& error);

// A settings file's mapping as the command-line flags it stands for, placed before the real ones so that those win.
bool settings_to_flags(const std::string& path, std::vector<std::string>& out, std::string& error) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    error = "--settings: cannot read " + path;
    return false;
  } catch (const YAML::Exception& e) {
    error = path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) + ": " + e.msg;
    return false;
  }
  if (root.IsNull()) return true;
  if (!root.IsMap()) {
    error = path + ": a settings file is a mapping of flag names to values (redis: redis://127.0.0.1:6379)";
    return false;
  }
  const auto where = [&](const YAML::Node& n) {
    return path + ":" + std::to_string(n.Mark().line + 1) + ":" + std::to_string(n.Mark().column + 1) + ": ";
  };
  for (const auto& item : root) {
    const auto key = item.first.Scalar();
    if (!item.second.IsScalar()) {
      error = where(item.second) + "setting '" + key + "' takes a single value";
      return false;
    }
    const auto value = item.second.Scalar();
    if (key == "settings" || key.empty() || key.starts_with("-")) {
      error = where(item.first) + "'" + key + "' is not a setting (flag names without their dashes)";
      return false;
    }
    if (find_switch(key)) {
      if (value == "true") out.push_back("--" + key);
      else if (value != "false") {
        error = where(item.second) + "setting '" + key + "' is true or false, not '" + value + "'";
        return false;
      }
      continue;
    }
    ServeFlags scratch;  // each setting is checked on its own, so that an error can name its line
    if (!apply_flags({"--" + key + "=" + value}, scratch, error)) {
      error = where(item.first) + error;
      return false;
    }
    out.push_back("--" + key + "=" + value);
  }
  return true;
}

enum class Taken { kNotMine, kYes, kBad };

// The bounds on connections and streams; kBad sets `error`.
Taken apply_connection_flag(const std::string& name, const std::string& value, ServeFlags& f, std::string& error) {
  if (name == "--per-ip-exempt") {
    std::vector<std::string> list;
    for (std::size_t at = 0; at <= value.size();) {
      const std::size_t comma = std::min(value.find(',', at), value.size());
      list.push_back(value.substr(at, comma - at));
      at = comma + 1;
    }
    try {
      http::check_per_ip_exempt(list);
    } catch (const std::invalid_argument& e) {
      error = "--per-ip-exempt: " + std::string(e.what()).substr(std::string_view(e.what()).find('\''));
      return Taken::kBad;
    }
    f.per_ip_exempt = std::move(list);
  } else if (name == "--busy-idle-timeout") {
    const auto d = parse_duration(value);
    if (!d || *d < std::chrono::milliseconds(100) || *d > std::chrono::hours(1)) {
      error = name + ": '" + value + "' is not a duration from 100ms to 1h";
      return Taken::kBad;
    }
    f.busy_idle_timeout = *d;
  } else {
    struct Bound {
      const char* flag;
      unsigned long long min, max;
    };
    static constexpr Bound kBounds[] = {{"--max-connections", 1, 1'000'000},
                                        {"--max-connections-per-ip", 0, 1'000'000},
                                        {"--grpc-max-message-bytes", 1024, 64 << 20},
                                        {"--grpc-max-streams-per-connection", 1, 65536},
                                        {"--grpc-max-watch-streams", 1, 1'000'000}};
    const Bound* b = std::find_if(std::begin(kBounds), std::end(kBounds), [&](const Bound& k) { return name == k.flag; });
    if (b == std::end(kBounds)) return Taken::kNotMine;
    unsigned long long n = 0;
    const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || p != value.data() + value.size() || n < b->min || n > b->max) {
      error = name + ": '" + value + "' is not a whole number from " + std::to_string(b->min) + " to " +
              std::to_string(b->max);
      return Taken::kBad;
    }
    if (b == &kBounds[0]) f.max_connections = n;
    else if (b == &kBounds[1]) f.max_connections_per_ip = n;
    else if (b == &kBounds[2]) f.grpc_max_message_bytes = static_cast<int>(n);
    else if (b == &kBounds[3]) f.grpc_max_streams_per_connection = static_cast<int>(n);
    else f.grpc_max_watch_streams = static_cast<int>(n);
  }
  return Taken::kYes;
}

bool apply_flags(const std::vector<std::string>& args, ServeFlags& f, std::string& error) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    bool inline_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      inline_value = true;
    }
    if (const Switch* sw = name.starts_with("--") ? find_switch(std::string_view(name).substr(2)) : nullptr) {
      f.*(sw->field) = true;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        error = name + " needs a value";
        return false;
      }
      value = args[++i];
    }
    if (name == "--config") {
      f.config = value;
    } else if (name == "--http") {
      f.http = value;
    } else if (name == "--admin") {
      f.admin = value;
    } else if (name == "--grpc") {
      f.grpc = value;
    } else if (name == "--redis") {
      f.redis = value;
    } else if (name == "--near-limit-ratio") {
      double r = -1;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), r);
      if (ec != std::errc{} || end != value.data() + value.size() || !(r >= 0 && r <= 1)) {
        error = "--near-limit-ratio: '" + value + "' is not a number from 0 to 1";
        return false;
      }
      f.near_limit_ratio = r;
    } else if (name == "--redis-clock") {
      if (value != "redis" && value != "local") {
        error = "--redis-clock: '" + value + "' is not redis or local";
        return false;
      }
      f.redis_local_clock = value == "local";
    } else if (name == "--redis-failure") {
      const auto p = rules::parse_failure_policy(value);
      if (!p) {
        error = "--redis-failure: '" + value + "' is not fail_open, fail_closed or local";
        return false;
      }
      f.redis_failure = *p;
    } else if (name == "--redis-timeout") {
      const auto d = parse_duration(value);
      if (!d || *d < std::chrono::milliseconds(1) || *d > std::chrono::seconds(60)) {
        error = "--redis-timeout: '" + value + "' is not a duration from 1ms to 60s";
        return false;
      }
      f.redis_timeout = *d;
    } else if (name == "--threads" || name == "--max-keys" || name == "--redis-connections") {
      unsigned long long n = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      const unsigned long long max = name == "--threads" ? 64 : name == "--redis-connections" ? 64 : (1ull << 40);
      if (ec != std::errc{} || p != value.data() + value.size() || n < 1 || n > max) {
        error = name + ": '" + value + "' is not a whole number from 1 to " + std::to_string(max);
        return false;
      }
      if (name == "--threads") f.threads = static_cast<int>(n);
      else if (name == "--redis-connections") f.redis_connections = static_cast<int>(n);
      else f.max_keys = static_cast<std::size_t>(n);
    } else if (name == "--max-memory") {
      const auto bytes = parse_bytes(value);
      if (!bytes || *bytes < (1u << 20)) {
        error = "--max-memory: '" + value + "' is not a size of at least 1MiB (a number of bytes, or with KiB, MiB, GiB)";
        return false;
      }
      f.max_memory = *bytes;
    } else if (name == "--reload-interval" || name == "--header-timeout") {
      const auto d = parse_duration(value);
      if (!d || *d < std::chrono::milliseconds(10)) {
        error = name + ": '" + value + "' is not a duration of at least 10ms";
        return false;
      }
      (name == "--reload-interval" ? f.reload_interval : f.header_timeout) = *d;
    } else if (name == "--proxy") {
      const auto kind = api::parse_proxy_kind(value);
      if (!kind) {
        error = "--proxy: '" + value + "' is not none, nginx, traefik, caddy or envoy";
        return false;
      }
      f.forward.proxy = *kind;
    } else if (name == "--ipv4-prefix" || name == "--ipv6-prefix") {
      const int max = name == "--ipv4-prefix" ? 32 : 128;
      int n = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || p != value.data() + value.size() || n < 1 || n > max) {
        error = name + ": '" + value + "' is not a prefix length from 1 to " + std::to_string(max);
        return false;
      }
      (max == 32 ? f.forward.prefixes.ipv4 : f.forward.prefixes.ipv6) = n;
    } else if (name == "--admin-hosts") {
      f.admin_hosts.clear();  // the last one given wins, as for every flag
      for (std::size_t start = 0; start <= value.size();) {
        const std::size_t end = std::min(value.find(',', start), value.size());
        std::string host = value.substr(start, end - start);
        if (host.empty() || host.find_first_of(" \t:/[]") != std::string::npos) {
          error = "--admin-hosts: '" + host + "' is not a host name (names without port, comma-separated)";
          return false;
        }
        f.admin_hosts.push_back(std::move(host));
        start = end + 1;
      }
    } else if (const Taken t = apply_connection_flag(name, value, f, error); t != Taken::kNotMine) {
      if (t == Taken::kBad) return false;
    } else if (name == "--log-level") {
      logging::Level l;
      if (!logging::parse_log_level(value, l)) {
        error = "--log-level: '" + value + "' is not debug, info or error";
        return false;
      }
      logging::set_log_level(l);
    } else {
      error = "unknown flag " + name;
      return false;
    }
  }
  return true;
}

bool parse_flags(const std::vector<std::string>& given, ServeFlags& f, std::string& error) {
  // Settings files' values go in front of the command line's flags, so that those win.
  std::vector<std::string> args, rest;
  for (std::size_t i = 0; i < given.size(); ++i) {
    std::string file;
    if (given[i] == "--settings") {
      if (i + 1 >= given.size()) {
        error = "--settings needs a value";
        return false;
      }
      file = given[++i];
    } else if (given[i].starts_with("--settings=")) {
      file = given[i].substr(11);
    } else {
      rest.push_back(given[i]);
      continue;
    }
    if (!settings_to_flags(file, args, error)) return false;
  }
  args.insert(args.end(), rest.begin(), rest.end());
  if (!apply_flags(args, f, error)) return false;
  if (f.config.empty()) {
    error = "--config is required";
    return false;
  }
  return true;
}

std::string_view result_label(const service::DescriptorStatus& st) {
  if (st.unlimited) return "unlimited";
  if (!st.has_limit) return "no_rule";
  if (st.shadowed) return "shadow_over_limit";
  return st.code == service::Code::kOverLimit ? "over_limit" : "ok";
}

}  // namespace

namespace {

bool asks_for_help(const std::vector<std::string>& args) {
  return args.size() == 1 && (args[0] == "--help" || args[0] == "-h");
}

}  // namespace

int run_check_config(const std::vector<std::string>& args) {
  constexpr const char* kUsage =
      "usage: ratekeeper check-config [--merge-domains] [--settings FILE] PATH\n"
      "  PATH: a rules file or a directory of them (else the settings file's config)\n";
  if (asks_for_help(args)) {
    std::cout << kUsage;
    return 0;
  }
  // The rules as `serve` would load them: PATH, else the settings file's config, merged as it says.
  std::vector<std::string> given;
  std::string path;
  bool usage = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--merge-domains" || args[i].starts_with("--settings=")) {
      given.push_back(args[i]);
    } else if (args[i] == "--settings" && i + 1 < args.size()) {
      given.push_back(args[i]);
      given.push_back(args[++i]);
    } else if (!args[i].starts_with("-") && path.empty()) {
      path = args[i];
    } else {
      usage = true;
    }
  }
  if (!path.empty()) given.push_back("--config=" + path);
  ServeFlags flags;
  std::string error;
  if (usage || !parse_flags(given, flags, error)) {
    if (!error.empty()) std::cerr << "ratekeeper check-config: " << error << "\n";
    std::cerr << kUsage;
    return 2;
  }
  std::vector<rules::DomainConfig> domains;
  const auto errors = rules::load_rules(flags.config, domains, {.merge_domains = flags.merge_domains});
  for (const auto& e : errors) std::cerr << e.to_string() << "\n";
  if (!errors.empty()) return 1;
  std::size_t rules = 0;
  for (const auto& d : domains) {
    std::function<void(const std::vector<rules::Descriptor>&)> count = [&](const auto& list) {
      for (const auto& x : list) {
        rules += x.rate_limit ? 1 : 0;
        count(x.descriptors);
      }
    };
    count(d.descriptors);
  }
  std::cout << flags.config << ": " << domains.size() << " domain(s), " << rules << " rule(s), valid\n";
  return 0;
}

int run_serve(const std::vector<std::string>& args) {
  if (asks_for_help(args)) {
    std::cout << kServeUsage;
    return 0;
  }
  ServeFlags flags;
  std::string error;
  if (!parse_flags(args, flags, error)) {
    std::cerr << "ratekeeper serve: " << error << "\n" << kServeUsage;
    return 2;
  }
  http::ServerOptions public_options, admin_options;
  if (!split_address(flags.http, public_options.address, public_options.port) ||
      !split_address(flags.admin, admin_options.address, admin_options.port)) {
    std::cerr << "ratekeeper serve: --http and --admin take ADDR:PORT (like 127.0.0.1:8080)\n";
    return 2;
  }
  flags.forward.path = {.strip_params = !flags.keep_path_params, .fold_case = flags.path_case_insensitive};
  public_options.threads = flags.threads;
  public_options.max_connections = flags.max_connections;
  public_options.max_connections_per_ip = flags.max_connections_per_ip;
  public_options.per_ip_exempt = flags.per_ip_exempt;
  public_options.busy_idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.busy_idle_timeout);
  public_options.header_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(flags.header_timeout);
  admin_options.threads = 1;

  // Signals are taken by sigwait below, never by a server thread: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto clock = std::make_shared<SystemClock>();
  metrics::Registry registry;
  namespace n = metrics::names;
  registry.gauge(n::kBuildInfo.name, n::kBuildInfo.help, {{"version", rk_version()}}).set(1);
  metrics::Counter& reload_ok = registry.counter(n::kConfigReloads.name, n::kConfigReloads.help, {{"result", "success"}});
  metrics::Counter& reload_failed = registry.counter(n::kConfigReloads.name, n::kConfigReloads.help, {{"result", "failure"}});
  metrics::Gauge& reload_time = registry.gauge(n::kConfigLastReloadSuccess.name, n::kConfigLastReloadSuccess.help);

  std::mutex rule_metrics_mu;
  std::vector<std::uint64_t> rule_metric_ids;
  auto publish_rule_gauges = [&](const rules::RuleSet& set) {
    std::lock_guard lock(rule_metrics_mu);
    for (auto id : rule_metric_ids) registry.unregister(id);
    rule_metric_ids.clear();
    for (const auto& r : set.rules()) {
      if (!r->limiter) continue;
      std::weak_ptr<Limiter> weak = r->limiter;
      const metrics::Labels labels = {{"domain", r->domain}, {"rule", r->path}};
      rule_metric_ids.push_back(registry.gauge_fn(n::kStoreKeys.name, n::kStoreKeys.help, labels, [weak] {
        auto l = weak.lock();
        return l ? static_cast<double>(l->stats().keys) : 0.0;
      }));
      rule_metric_ids.push_back(registry.counter_fn(n::kStoreEvictions.name, n::kStoreEvictions.help, labels, [weak] {
        auto l = weak.lock();
        return l ? l->stats().evictions : std::uint64_t{0};
      }));
    }
  };

  // Counter keys are bounded by the request limits (4,096 bytes of keys and values a descriptor, plus framing);
  // the stores keep those over 64 bytes as digests.
  rules::BuildOptions build{.store = StoreOptions{.max_keys = flags.max_keys,
                                                  .max_key_bytes = 1 << 16,
                                                  .max_memory_bytes = flags.max_memory / 8 * 7},
                            .clock = clock};
  StoreOptions override_store = build.store;
  override_store.max_memory_bytes = flags.max_memory / 8;
  rules::Reloader reloader(
      flags.config, build,
      {.on_success =
           [&](const rules::RuleSet& set) {
             reload_ok.inc();
             reload_time.set(std::chrono::duration<double>(set.loaded_at().time_since_epoch()).count());
             publish_rule_gauges(set);
             logging::log(logging::Level::kInfo, "rules loaded",
                 {{"version", set.version()}, {"domains", std::to_string(set.domains().size())},
                  {"rules", std::to_string(set.rules().size())}});
           },
       .on_failure =
           [&](const std::vector<rules::ConfigError>& errors) {
             reload_failed.inc();
             for (const auto& e : errors) logging::log(logging::Level::kError, "rules rejected; keeping the last good rules", {{"error", e.to_string()}});
           }},
      {.merge_domains = flags.merge_domains});
  if (!reloader.load_now().empty()) {
    std::cerr << "ratekeeper serve: the rules in " << flags.config << " are not valid (see above); not starting\n";
    return 1;
  }
  reloader.start(std::chrono::duration_cast<std::chrono::milliseconds>(flags.reload_interval));

  std::shared_ptr<store::RemoteStore> remote;
  if (!flags.redis.empty()) {
    try {
      remote = redis::make_redis_remote({.url = flags.redis,
                                  .caller_clock = flags.redis_local_clock,
                                  .timeout = flags.redis_timeout,
                                  .connections = flags.redis_connections,
                                  .near_cache = flags.redis_near_cache});
    } catch (const std::exception& e) {
      std::cerr << "ratekeeper serve: --redis: " << e.what() << "\n";
      return 2;
    }
  }
  // The dashboard's counters and hot keys, fed by every decision (docs/dashboard.md).
  auto tracker = std::make_shared<dashboard::Tracker>();
  // envoyproxy/ratelimit's per-descriptor counters (metrics/envoy/descriptor_stats.h), fed by every decision too.
  auto descriptor_stats = std::make_shared<metrics::envoy::DescriptorStats>(
      registry, metrics::envoy::DescriptorStatsOptions{.near_limit_ratio = flags.near_limit_ratio});
  service::Service service(reloader, clock,
                  service::ServiceOptions{.shadow_mode = flags.shadow_mode,
                                 .store = override_store,
                                 .remote = remote,
                                 .redis_failure = flags.redis_failure,
                                 .observer = service::observe_all({tracker, descriptor_stats})});
  if (remote) {
    const service::RemoteStats& rs = service.remote_stats();
    registry.counter_fn(n::kRemoteCalls.name, n::kRemoteCalls.help, {}, [&rs] { return rs.calls.load(); });
    registry.counter_fn(n::kRemoteFailures.name, n::kRemoteFailures.help, {{"result", "unavailable"}},
                        [&rs] { return rs.unavailable.load(); });
    registry.counter_fn(n::kRemoteFailures.name, n::kRemoteFailures.help, {{"result", "error"}},
                        [&rs] { return rs.errors.load(); });
    for (auto p : {rules::FailurePolicy::kFailOpen, rules::FailurePolicy::kFailClosed, rules::FailurePolicy::kLocal}) {
      registry.counter_fn(n::kRemoteFallbacks.name, n::kRemoteFallbacks.help,
                          {{"policy", std::string(rules::failure_policy_name(p))}},
                          [&rs, p] { return rs.fallbacks[static_cast<int>(p)].load(); });
    }
    registry.gauge_fn(n::kBreakerState.name, n::kBreakerState.help, {},
                      [&service] { return service.breaker() ? static_cast<double>(service.breaker()->state()) : 0.0; });
    registry.counter_fn(n::kBreakerOpened.name, n::kBreakerOpened.help, {},
                        [&service] { return service.breaker() ? service.breaker()->opened() : std::uint64_t{0}; });
    logging::log(logging::Level::kInfo, "sharing limits through Redis", {{"redis", remote->describe()}});
  }
  std::atomic<bool> draining{false};

  auto latency_for = [&](const char* protocol) {
    return &registry.histogram(n::kDecisionDuration.name, n::kDecisionDuration.help, n::kDecisionDurationBuckets,
                               {{"protocol", protocol}});
  };
  metrics::Histogram* const http_latency = latency_for("http");
  metrics::Histogram* const auth_latency = latency_for("auth");
  metrics::Histogram* const grpc_latency = flags.grpc.empty() ? nullptr : latency_for("grpc");
  metrics::Gauge& connections = registry.gauge(n::kHttpConnections.name, n::kHttpConnections.help);
  api::Hooks hooks;
  hooks.decided = [&](std::string_view protocol, std::string_view domain, const service::CheckResponse& r, Nanos took) {
    metrics::Histogram* h = protocol == "auth" ? auth_latency : protocol == "grpc" ? grpc_latency : http_latency;
    if (h) h->observe(std::chrono::duration<double>(took).count());
    // The counters by (domain, rule, result), cached per server thread: registration takes the registry's lock.
    thread_local std::unordered_map<std::string, metrics::Counter*> cache;
    thread_local std::string id;
    // A domain no rules file names is labelled "(unknown)": label values must not come from clients unchecked.
    const bool known = r.rules && r.rules->domain(domain) != nullptr;
    for (const service::DescriptorStatus& st : r.statuses) {
      const std::string_view d = st.rule ? std::string_view(st.rule->domain) : known ? domain : "(unknown)";
      const std::string_view rule = st.rule ? std::string_view(st.rule->path) : std::string_view();
      const std::string_view result = result_label(st);
      id.assign(d).append(1, '\n').append(rule).append(1, '\n').append(result);
      metrics::Counter*& c = cache[id];
      if (!c) {
        c = &registry.counter(n::kDecisions.name, n::kDecisions.help,
                              {{"domain", std::string(d)}, {"rule", std::string(rule)}, {"result", std::string(result)}});
      }
      c->inc();
    }
    if (logging::log_enabled(logging::Level::kDebug)) {
      logging::log(logging::Level::kDebug, "decision", {{"protocol", std::string(protocol)}, {"domain", std::string(domain)},
                                      {"code", std::string(service::code_name(r.overall))}});
    }
  };
  // Cached per thread like the decision counters: a flood of bad requests must not queue on the registry's lock.
  hooks.bad_request = [&](std::string_view protocol, std::string_view reason) {
    thread_local std::unordered_map<std::string, metrics::Counter*> cache;
    thread_local std::string id;
    id.assign(protocol).append(1, '\n').append(reason);
    metrics::Counter*& c = cache[id];
    if (!c) {
      c = &registry.counter(n::kBadRequests.name, n::kBadRequests.help,
                            {{"protocol", std::string(protocol)}, {"reason", std::string(reason)}});
    }
    c->inc();
  };
  hooks.ready = [&] { return !draining.load() && reloader.current() != nullptr; };
  hooks.metrics = [&] { return registry.expose(); };
  hooks.tracker = tracker;

  http::ServerEvents events;
  events.on_bad_request = [&](std::string_view reason) { hooks.bad_request("http", reason); };
  events.on_connection = [&](int delta) { connections.add(delta); };
  events.on_handler_error = [&](std::string_view what) {
    hooks.bad_request("http", "handler_error");
    logging::log(logging::Level::kError, "request handler failed; answered 500", {{"error", std::string(what)}});
  };

  std::unique_ptr<http::Server> public_server, admin_server;
  try {
    public_server =
        std::make_unique<http::Server>(public_options, api::public_routes(service, hooks, flags.forward), events);
    admin_server =
        std::make_unique<http::Server>(admin_options, api::admin_routes(service, hooks, {.hosts = flags.admin_hosts}),
                                       http::ServerEvents{.on_handler_error = events.on_handler_error});
    public_server->start();
    admin_server->start();
  } catch (const std::exception& e) {
    std::cerr << "ratekeeper serve: " << e.what() << "\n";
    return 1;
  }
#ifdef RK_HAVE_GRPC
  std::unique_ptr<grpcapi::GrpcServer> grpc_server;
  if (!flags.grpc.empty()) {
    grpcapi::GrpcHooks grpc_hooks;
    grpc_hooks.decided = [&](std::string_view domain, const service::CheckResponse& r, Nanos took) {
      hooks.decided("grpc", domain, r, took);
    };
    grpc_hooks.answered = [&](std::string_view code) {
      registry.counter(n::kGrpcRequests.name, n::kGrpcRequests.help, {{"method", "ShouldRateLimit"}, {"code", std::string(code)}})
          .inc();
      if (code != "OK") hooks.bad_request("grpc", "invalid_argument");
    };
    try {
      grpc_server = std::make_unique<grpcapi::GrpcServer>(
          service, grpcapi::GrpcOptions{.address = flags.grpc,
                                        .response_headers = flags.grpc_headers,
                                        .max_message_bytes = flags.grpc_max_message_bytes,
                                        .max_streams_per_connection = flags.grpc_max_streams_per_connection,
                                        .max_watch_streams = flags.grpc_max_watch_streams}, grpc_hooks);
      grpc_server->start();
    } catch (const std::exception& e) {
      std::cerr << "ratekeeper serve: " << e.what() << "\n";
      return 1;
    }
    logging::log(logging::Level::kInfo, "serving gRPC", {{"grpc", flags.grpc.substr(0, flags.grpc.rfind(':')) + ":" + std::to_string(grpc_server->port())}});
  }
#else
  if (!flags.grpc.empty()) {
    std::cerr << "ratekeeper serve: this build has no gRPC (install libgrpc++-dev and protobuf-compiler-grpc)\n";
    return 2;
  }
#endif
  logging::log(logging::Level::kInfo, "serving",
      {{"http", public_options.address + ":" + std::to_string(public_server->port())},
       {"admin", admin_options.address + ":" + std::to_string(admin_server->port())},
       {"config", flags.config}});

  // Forget keys whose state is back to fresh, so idle keys cost nothing; LRU bounds the rest.
  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  bool stop_sweeping = false;
  std::thread sweeper([&] {
    std::unique_lock lock(sweep_mu);
    while (!sweep_cv.wait_for(lock, flags.sweep_interval, [&] { return stop_sweeping; })) {
      lock.unlock();
      if (auto set = reloader.current()) {
        for (const auto& r : set->rules()) {
          if (r->limiter) r->limiter->sweep();
        }
      }
      lock.lock();
    }
  });

  int sig = 0;
  sigwait(&signals, &sig);
  logging::log(logging::Level::kInfo, "draining", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  draining = true;
#ifdef RK_HAVE_GRPC
  if (grpc_server) grpc_server->stop();
#endif
  public_server->stop();
  admin_server->stop();
  if (remote) remote->close();  // nothing waits on it any more; its callbacks end before the service goes
  reloader.stop();
  {
    std::lock_guard lock(sweep_mu);
    stop_sweeping = true;
  }
  sweep_cv.notify_all();
  sweeper.join();
  logging::log(logging::Level::kInfo, "stopped");
  return 0;
}

}  // namespace rk::serve
