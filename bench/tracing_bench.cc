// bench/tracing_bench.cc: what tracing costs a decision (bench/run tracing). The service's decision path as the HTTP
// adapter drives it: a CheckRequest of one descriptor over 10,000 keys, and the caller's traceparent read (as the
// adapter reads it when the service traces), decided by Service::check_async on one thread. Three configurations in
// the same run, interleaved round by round so that the machine's load falls on each alike:
//   off        no tracer (the default): what every decision costs without --otlp-endpoint
//   0%         --trace-sample-rate 0: the caller's context read, the sampler asked, no span
//   1%         --trace-sample-rate 0.01, the spans to a real OTLP/HTTP exporter (whose collector is a local port
//              that refuses: its failures cost its own thread, as a collector that is down would)
//   100%       every decision a span, for scale
// Prints each configuration's median over the rounds of decisions per CPU second of the whole process (the
// exporter's thread included), and its ratio to `off`.
//   build/release/bench/rk_tracing_bench [rounds=7] [decisions per round=300000]
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ratekeeper/clock.h"
#include "rules/reloader.h"
#include "service/service.h"
#include "tracing/otlp_exporter.h"
#include "tracing/tracer.h"

namespace {

using namespace rk;

int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// The process's CPU time, every thread's (the exporter's too): what a decision costs, whatever else the machine runs
// (on a shared machine, wall time counts the other processes' turns).
double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Decisions per CPU second over `n` decisions.
double run(service::Service& service, int n) {
  // A caller's b3 with ids and no decision, so that the sample rate decides, as for a caller that does not sample.
  const std::string b3 = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7";
  std::uint64_t answered = 0;
  const double start = cpu_seconds();
  for (int i = 0; i < n; ++i) {
    service::CheckRequest request;
    request.domain = "bench";
    request.protocol = "http";
    request.descriptors.push_back({.entries = {{"client", std::to_string(i % 10000)}}});
    if (service.wants_trace_context()) {
      request.trace = tracing::read_parent([&](std::string_view name) -> std::optional<std::string_view> {
        if (name == "b3") return std::string_view(b3);
        return std::nullopt;
      });
      // Each request its own trace id, as callers' are.
      std::uint64_t v = tracing::random64();
      std::memcpy(request.trace.trace_id.data() + 8, &v, 8);
    }
    service.check_async(std::move(request), [&answered](service::CheckResult) { ++answered; });
  }
  const double s = cpu_seconds() - start;
  return static_cast<double>(answered) / s;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const int n = argc > 2 ? std::atoi(argv[2]) : 300000;
  const auto dir = std::filesystem::temp_directory_path() / ("rk_tracing_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "rules.yaml") << "domain: bench\ndescriptors:\n  - key: client\n"
                                       "    rate_limit: {unit: second, requests_per_unit: 1000000000, "
                                       "algorithm: gcra, burst: 1000}\n";
  auto clock = std::make_shared<SystemClock>();
  rules::Reloader reloader((dir / "rules.yaml").string(), rules::BuildOptions{.clock = clock});
  if (!reloader.load_now().empty()) return 1;
  // Each configuration its own exporter: one's backlog is not another's work.
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1/traces";
  auto exporter = std::make_shared<tracing::OtlpExporter>(tracing::OtlpOptions{.endpoint = endpoint});
  auto exporter_all = std::make_shared<tracing::OtlpExporter>(tracing::OtlpOptions{.endpoint = endpoint});
  struct Config {
    const char* name;
    std::unique_ptr<service::Service> service;
    std::vector<double> rates;
  };
  std::vector<Config> configs;
  configs.push_back({"off", std::make_unique<service::Service>(reloader, clock), {}});
  configs.push_back({"0%",
                     std::make_unique<service::Service>(
                         reloader, clock,
                         service::ServiceOptions{.tracer = std::make_shared<tracing::Tracer>(
                                                     tracing::TracerOptions{.sample_rate = 0}, exporter)}),
                     {}});
  configs.push_back({"1%",
                     std::make_unique<service::Service>(
                         reloader, clock,
                         service::ServiceOptions{.tracer = std::make_shared<tracing::Tracer>(
                                                     tracing::TracerOptions{.sample_rate = 0.01}, exporter)}),
                     {}});
  configs.push_back({"100%",
                     std::make_unique<service::Service>(
                         reloader, clock,
                         service::ServiceOptions{.tracer = std::make_shared<tracing::Tracer>(
                                                     tracing::TracerOptions{.sample_rate = 1}, exporter_all)}),
                     {}});
  for (Config& c : configs) run(*c.service, n / 10);  // warm: the keys inserted
  for (int r = 0; r < rounds; ++r) {
    for (Config& c : configs) c.rates.push_back(run(*c.service, n));
  }
  double loads[3] = {};
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &loads[0], &loads[1], &loads[2]) != 3) loads[0] = -1;
    std::fclose(f);
  }
  std::printf(
      "tracing cost: %d rounds of %d decisions (one thread, in process; per CPU second of the process), "
      "load %.2f %.2f %.2f\n",
      rounds, n, loads[0], loads[1], loads[2]);
  double off = 0;
  for (Config& c : configs) {
    std::sort(c.rates.begin(), c.rates.end());
    const double median = c.rates[c.rates.size() / 2];
    if (off == 0) off = median;
    std::printf("  %-5s %10.0f decisions/s  ratio to off %.3f  (rounds %.0f..%.0f)\n", c.name, median, median / off,
                c.rates.front(), c.rates.back());
  }
  const auto s = exporter->stats();
  std::printf("  spans at 1%%: %llu dropped (the collector refuses), %llu exported\n",
              static_cast<unsigned long long>(s.dropped), static_cast<unsigned long long>(s.exported));
  std::filesystem::remove_all(dir);
  return 0;
}
