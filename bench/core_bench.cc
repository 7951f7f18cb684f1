// bench/core_bench.cc: ns per decision for every algorithm, on one hot key and over 1,000,000 distinct keys, with
// 1 and 2 threads; the baseline store (bench/baseline.h) on the same EARRRL work; bytes per tracked key.
// Everything is measured in one run and reported as ratios, because the machines are shared and noisy.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baseline.h"
#include "ratekeeper/limiter.h"

namespace {

using rk::Algorithm;
using rk::Nanos;

constexpr int kKeys = 1'000'000;
constexpr int kWarmKeys = 10'000;  // fits in cache: store scaling without the memory wall

int key_count(int distinct) { return distinct == 2 ? kWarmKeys : kKeys; }
const char* key_label(int distinct) { return distinct == 0 ? "|hot" : distinct == 1 ? "|1M" : "|10k"; }

const std::vector<std::string>& keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> v;
    v.reserve(kKeys);
    char buf[32];
    for (int i = 0; i < kKeys; ++i) {
      std::snprintf(buf, sizeof buf, "user:%011d", i);  // 16 bytes
      v.emplace_back(buf);
    }
    return v;
  }();
  return k;
}

// Limits high enough that the work measured is the common case: an allowed decision on a tracked key.
rk::LimitSpec spec(Algorithm a) {
  rk::LimitSpec s{.algorithm = a, .limit = 1e6, .window = std::chrono::seconds(1)};
  if (a == Algorithm::kEarrrl) s.half_life = std::chrono::seconds(10);
  if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) s.burst = 1000;
  if (a == Algorithm::kSlidingLog) s.limit = 1000;
  return s;
}

std::int64_t step(Algorithm a) { return a == Algorithm::kSlidingLog ? 10'000'000 : 1'000; }

// One limiter per (algorithm, distinct) pair, shared by the benchmark's threads, built and filled once.
rk::Limiter& limiter(Algorithm a, int distinct) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::unique_ptr<rk::Limiter>> all;
  std::lock_guard lock(mu);
  auto& l = all[{static_cast<int>(a), distinct}];
  if (!l) {
    l = std::make_unique<rk::Limiter>(spec(a), rk::StoreOptions{.max_keys = 2'000'000});
    if (distinct) {
      for (int i = 0; i < key_count(distinct); ++i) l->check_at(keys()[i], Nanos{0});
    }
  }
  return *l;
}

rk::bench::BaselineStore& baseline(int distinct) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<rk::bench::BaselineStore>> all;
  std::lock_guard lock(mu);
  auto& b = all[distinct];
  if (!b) {
    b = std::make_unique<rk::bench::BaselineStore>(rk::core::earrrl_params(spec(Algorithm::kEarrrl)), 2'000'000);
    if (distinct) {
      for (int i = 0; i < key_count(distinct); ++i) b->check(keys()[i], 0);
    }
  }
  return *b;
}

void BM_Ratekeeper(benchmark::State& state) {
  const auto a = static_cast<Algorithm>(state.range(0));
  const int distinct = static_cast<int>(state.range(1));
  rk::Limiter& l = limiter(a, distinct);
  const auto& k = keys();
  // With 2 threads each cycles over its own half of the keys: distinct keys, none shared between threads.
  const std::size_t n = static_cast<std::size_t>(key_count(distinct)) / static_cast<std::size_t>(state.threads());
  const std::size_t first = static_cast<std::size_t>(state.thread_index()) * n;
  std::size_t i = 0;
  std::int64_t now = 1'000'000'000;
  const std::int64_t dt = step(a);
  for (auto _ : state) {
    now += dt;
    const rk::Decision d = l.check_at(distinct ? std::string_view(k[first + i]) : std::string_view("hot-key-16-bytes"), Nanos{now});
    benchmark::DoNotOptimize(d);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(rk::algorithm_name(a)) + key_label(distinct));
}

void BM_Baseline(benchmark::State& state) {
  const int distinct = static_cast<int>(state.range(1));
  auto& b = baseline(distinct);
  const auto& k = keys();
  // With 2 threads each cycles over its own half of the keys: distinct keys, none shared between threads.
  const std::size_t n = static_cast<std::size_t>(key_count(distinct)) / static_cast<std::size_t>(state.threads());
  const std::size_t first = static_cast<std::size_t>(state.thread_index()) * n;
  std::size_t i = 0;
  std::int64_t now = 1'000'000'000;
  for (auto _ : state) {
    now += 1'000;
    const rk::Decision d = b.check(distinct ? std::string_view(k[first + i]) : std::string_view("hot-key-16-bytes"), now);
    benchmark::DoNotOptimize(d);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string("baseline earrrl") + key_label(distinct));
}

void register_all(double min_time) {
  for (int distinct = 0; distinct <= 2; ++distinct) {
    for (Algorithm a : rk::kAllAlgorithms) {
      benchmark::RegisterBenchmark("ratekeeper", BM_Ratekeeper)
          ->Args({static_cast<int>(a), distinct})
          ->Threads(1)
          ->Threads(2)
          ->MinTime(min_time)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark("baseline", BM_Baseline)
        ->Args({0, distinct})
        ->Threads(1)
        ->Threads(2)
        ->MinTime(min_time)
        ->UseRealTime();
  }
}

// Decisions per second of every run, by (label, distinct, threads).
struct Collector : benchmark::ConsoleReporter {
  std::map<std::tuple<std::string, int, int>, double> rate;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      const auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      const std::string& label = r.report_label;  // "<name>|hot" or "<name>|1M"
      const auto bar = label.rfind('|');
      if (bar == std::string::npos) continue;
      const std::string kind = label.substr(bar + 1);
      rate[{label.substr(0, bar), kind == "1M" ? 1 : kind == "10k" ? 2 : 0, static_cast<int>(r.threads)}] = it->second.value;
    }
  }
};

std::size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void memory_per_key() {
  std::printf("\nMemory per tracked key, 1,000,000 keys of 16 bytes (heap growth measured by mallinfo2):\n");
  std::printf("  %-16s %14s %18s\n", "store", "bytes/key", "store's own count");
  for (Algorithm a : rk::kAllAlgorithms) {
    const std::size_t before = heap_in_use();
    double own = 0;
    {
      rk::Limiter l(spec(a), rk::StoreOptions{.max_keys = 2'000'000});
      for (const auto& k : keys()) l.check_at(k, Nanos{0});
      own = static_cast<double>(l.stats().memory_bytes) / kKeys;
      const double measured = static_cast<double>(heap_in_use() - before) / kKeys;
      std::printf("  %-16s %14.1f %18.1f%s\n", std::string(rk::algorithm_name(a)).c_str(), measured, own,
                  a == Algorithm::kSlidingLog ? "   (one request logged per key)" : "");
    }
  }
  const std::size_t before = heap_in_use();
  {
    rk::bench::BaselineStore b(rk::core::earrrl_params(spec(Algorithm::kEarrrl)), 2'000'000);
    for (const auto& k : keys()) b.check(k, 0);
    std::printf("  %-16s %14.1f\n", "baseline earrrl", static_cast<double>(heap_in_use() - before) / kKeys);
  }
  std::printf("  target: <= 80 bytes a key for the fixed-size states\n");
}

void summary(const Collector& c) {
  auto rate = [&](const std::string& label, int distinct, int threads) {
    const auto it = c.rate.find({label, distinct, threads});
    return it == c.rate.end() ? 0.0 : it->second;
  };
  std::printf("\nns per decision (1 thread) and decisions/s scaling; ratekeeper vs the baseline store in this run:\n");
  std::printf("  %-16s %8s %8s %8s %10s %10s %10s %12s\n", "algorithm", "hot ns", "10k ns", "1M ns", "hot 2T/1T",
              "10k 2T/1T", "1M 2T/1T", "1M 2T Mdec/s");
  auto row = [&](const std::string& n) {
    std::printf("  %-16s %8.1f %8.1f %8.1f %10.2f %10.2f %10.2f %12.2f\n", n.c_str(), 1e9 / rate(n, 0, 1),
                1e9 / rate(n, 2, 1), 1e9 / rate(n, 1, 1), rate(n, 0, 2) / rate(n, 0, 1), rate(n, 2, 2) / rate(n, 2, 1),
                rate(n, 1, 2) / rate(n, 1, 1), rate(n, 1, 2) / 1e6);
  };
  for (Algorithm a : rk::kAllAlgorithms) row(std::string(rk::algorithm_name(a)));
  const std::string b = "baseline earrrl";
  row(b);
  std::printf("\nearrrl throughput / baseline throughput (higher is better; target >= 2 with 2 threads):\n");
  for (int distinct = 0; distinct <= 2; ++distinct) {
    for (int threads = 1; threads <= 2; ++threads) {
      std::printf("  %-8s %d thread%s  %6.2fx\n", distinct == 0 ? "hot key" : distinct == 1 ? "1M keys" : "10k keys",
                  threads, threads > 1 ? "s" : " ",
                  rate("earrrl", distinct, threads) / rate(b, distinct, threads));
    }
  }
  std::printf("\ntargets: gcra and token_bucket <= 40 ns, earrrl <= 60 ns on a hot key, 1 thread;\n"
              "         2-thread throughput on distinct keys above 1-thread\n");
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.3;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string_view(argv[i]).rfind("--min-time=", 0) == 0) {
      min_time = std::stod(argv[i] + 11);
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  keys();
  register_all(min_time);
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  summary(collector);
  memory_per_key();
  benchmark::Shutdown();
  return 0;
}
