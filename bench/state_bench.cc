// bench/state_bench.cc: `serve --state-file` with 1,000,000 tracked keys (bench/run state): how long a save
// (encode + atomic write) and a restore (read + check + put back) take, and the longest decision a thread deciding
// meanwhile sees, against the same thread's longest decision with no save running (the baseline, same run).
// Decisions are 90% on tracked keys and 10% on new ones, so inserts waiting on a shard's lock show too.
//
//   build/release/bench/rk_state_bench [--keys 1000000] [--algorithm fixed_window] [--dir /tmp]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/content_hash.h"
#include "rules/parse.h"
#include "rules/ruleset.h"
#include "cli/serve/state_file.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// This thread's CPU time: what a step costs, apart from the time other processes of a loaded machine took.
double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::shared_ptr<const rk::rules::RuleSet> build(const std::string& algorithm, std::size_t max_keys) {
  const std::string text =
      "domain: bench\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, "
      "requests_per_unit: 1000, algorithm: " +
      algorithm + "}\n";
  rk::rules::DomainConfig d;
  if (const auto errors = rk::rules::parse_domain("bench.yaml", text, d); !errors.empty()) {
    std::fprintf(stderr, "%s\n", errors[0].to_string().c_str());
    std::exit(2);
  }
  std::vector<rk::rules::DomainConfig> domains;
  domains.push_back(std::move(d));
  rk::rules::BuildOptions options;
  options.store.max_keys = max_keys;
  options.clock = std::make_shared<rk::SystemClock>();
  return rk::rules::RuleSet::build(std::move(domains), nullptr, options, rk::base::content_hash(text));
}

std::string key(std::size_t i) {
  return std::to_string(10 + (i >> 24)) + "." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) +
         "." + std::to_string(i & 255);
}

struct Latencies {
  std::vector<std::uint32_t> ns;
  double at(double q) const {
    if (ns.empty()) return 0;
    return ns[std::min(ns.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ns.size())))] / 1e3;
  }
  void print(const char* name) {
    std::sort(ns.begin(), ns.end());
    const auto over_1ms = ns.end() - std::upper_bound(ns.begin(), ns.end(), 1'000'000u);
    std::printf("  %-20s %8zu decisions  p50 %6.2f us  p99.9 %7.2f us  max %8.2f us  over 1 ms: %td\n", name, ns.size(),
                at(0.5), at(0.999), ns.empty() ? 0.0 : ns.back() / 1e3, over_1ms);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t keys = 1'000'000;
  std::string algorithm = "fixed_window", dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--keys") keys = std::stoul(argv[i + 1]);
    else if (flag == "--algorithm") algorithm = argv[i + 1];
    else if (flag == "--dir") dir = argv[i + 1];
  }
  const std::string path = dir + "/rk_state_bench." + std::to_string(::getpid());
  std::printf("== state file: %zu keys, %s; load average before: %s\n", keys, algorithm.c_str(),
              load_average().c_str());
  const auto keep = [](const rk::rules::RuleSet&, const rk::rules::Rule&) { return true; };
  const auto set = build(algorithm, keys * 2);  // room for the new keys decided during the save: no eviction
  rk::Limiter& limiter = *set->rules()[0]->limiter;
  for (std::size_t i = 0; i < keys; ++i) limiter.check(key(i));

  // One thread decides throughout; `phase` says whose latencies it records: 0 none (warming up), 1 the baseline,
  // 2 during the save.
  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  Latencies during[2];
  for (auto& l : during) l.ns.reserve(1 << 24);
  std::thread decider([&] {
    std::mt19937_64 rng(6);
    std::size_t fresh = keys;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::string k = rng() % 10 == 0 ? key(fresh++) : key(rng() % keys);
      const int p = phase.load(std::memory_order_relaxed);
      const auto t0 = Clock::now();
      limiter.check(k);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      if (p > 0 && during[p - 1].ns.size() < during[p - 1].ns.capacity()) {
        during[p - 1].ns.push_back(static_cast<std::uint32_t>(ns));
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // warm up, then the baseline
  phase = 1;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  phase = 2;
  const auto save_start = Clock::now();
  const double save_cpu_start = cpu_ms();
  rk::cli::serve::StateCounts counts;
  const std::string bytes = rk::cli::serve::encode_state_file(*set, keep, rk::SystemClock().now(), counts);
  const double encode_ms = ms_since(save_start);
  const auto write_start = Clock::now();
  const std::string error = rk::cli::serve::write_file_atomically(path, bytes);
  const double write_ms = ms_since(write_start);
  const double save_ms = ms_since(save_start);
  const double save_cpu = cpu_ms() - save_cpu_start;
  stop = true;
  decider.join();
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }

  const auto fresh_set = build(algorithm, keys * 2);
  const auto restore_start = Clock::now();
  const double restore_cpu_start = cpu_ms();
  std::string read;
  if (const std::string e =
          rk::cli::serve::read_state_file(path, rk::cli::serve::max_state_file_bytes(*fresh_set, keep), read);
      !e.empty()) {
    std::fprintf(stderr, "%s\n", e.c_str());
    return 1;
  }
  const double read_ms = ms_since(restore_start);
  const auto apply_start = Clock::now();
  const auto result = rk::cli::serve::restore_state_file(read, *fresh_set, keep);
  const double apply_ms = ms_since(apply_start);
  const double restore_cpu = cpu_ms() - restore_cpu_start;
  const double restore_ms = read_ms + apply_ms;
  ::unlink(path.c_str());
  if (const auto* e = std::get_if<std::string>(&result)) {
    std::fprintf(stderr, "restore refused: %s\n", e->c_str());
    return 1;
  }

  std::printf("  saved %zu keys, %.1f MB: %.0f ms (encode %.0f ms, write + fsync + rename %.0f ms); CPU %.0f ms\n",
              counts.keys, static_cast<double>(bytes.size()) / 1e6, save_ms, encode_ms, write_ms, save_cpu);
  std::printf("  restored %zu keys: %.0f ms (read %.0f ms, check + put back %.0f ms); CPU %.0f ms\n",
              std::get<rk::cli::serve::StateCounts>(result).keys, restore_ms, read_ms, apply_ms, restore_cpu);
  during[0].print("baseline (no save)");
  during[1].print("during the save");
  const double base_max = during[0].ns.empty() ? 0 : during[0].ns.back() / 1e3;
  const double save_max = during[1].ns.empty() ? 0 : during[1].ns.back() / 1e3;
  std::printf("  longest decision during the save / baseline's: %.2f\n", base_max > 0 ? save_max / base_max : 0.0);
  std::printf("  targets: save < 1 s %s, restore < 1 s %s, no decision > 5 ms %s\n", save_ms < 1000 ? "met" : "MISSED",
              restore_ms < 1000 ? "met" : "MISSED", save_max < 5000 ? "met" : "MISSED");
  std::printf("  load average after: %s (a shared 2-core machine)\n", load_average().c_str());
  return 0;
}
