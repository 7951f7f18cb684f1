// bench/core_bench.cc: ns per decision for every algorithm on one hot key and over 1,000,000 distinct keys, with 1
// and 2 threads; the baseline store (bench/baseline.h) on the same EARRRL work in the same run; bytes per tracked
// key. Ends with a summary table and the targets next to the figures. Each 1M-key row is also set against what one
// miss to memory cost right after its run (MissChain: this VM's memory latency moves between runs).
//
//   rk_bench [Google Benchmark flags] [--rk_10k] [--rk_no_memory] [--rk_no_pin]
//     --rk_10k        also run a 10,000-key case (fits in cache: store scaling without the memory wall)
//     --rk_no_memory  skip the bytes-per-key measurement
//     --rk_no_pin     leave the threads where the scheduler puts them (by default thread i is pinned to the i-th
//                     allowed CPU for the run: unpinned, Linux sometimes keeps both threads of a 2-thread run on
//                     one core, and they then take turns instead of running, and contending, at once)
//     --rk_count=ALGORITHM:N[:1M|:many16]  only N decisions of one thread on the hot key (or over the million keys;
//                     or over them by check_many of 16), as the benchmark makes them, then the best ns per decision
//                     over batches of 10,000, and the median; over the million keys, also the median of one miss
//                     measured after each batch and of the ratio of the two; nothing else runs. For counting
//                     instructions on a loaded machine: the difference between two runs' counts (valgrind
//                     --tool=cachegrind --cache-sim=no) over the difference in N is one decision's.
//   With --benchmark_repetitions=N the summary uses each run's median.
//
// Time: every decision is Limiter::check_at(key, now, 1, Fields::kAllButResetAfter) (check_many_at with the same
// Fields) with a simulated `now` that each thread advances by a fixed
// step per decision; the system clock is never read. The threads' simulated clocks resynchronise every 256
// decisions through one shared atomic (and later runs start where earlier ones ended), so time only moves forward
// and the two threads of a hot-key run stay within a few milliseconds of each other.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "baseline.h"
#include "ratekeeper/limiter.h"

namespace {

using rk::Algorithm;
using rk::Nanos;

constexpr std::size_t kKeys = 1'000'000;
constexpr std::size_t kWarmKeys = 10'000;
constexpr std::size_t kMaxKeys = 2'000'000;     // StoreOptions::max_keys: nothing is evicted while timing
constexpr std::size_t kTargetBytesPerKey = 48;  // issue 18's bound for the fixed-size states
constexpr std::string_view kHotKey = "hot:000000000001";
static_assert(kHotKey.size() == 16);

enum class Keys { kHot, kMillion, kTenThousand };
const char* keys_name(Keys k) { return k == Keys::kHot ? "hot" : k == Keys::kMillion ? "1M" : "10k"; }

// ---- keys: 16 bytes each ("user:00000000042"), in one buffer, generated once ----

const std::vector<std::string_view>& all_keys() {
  static std::string buffer;
  static const std::vector<std::string_view> views = [] {
    buffer.resize(kKeys * 16 + 1);
    for (std::size_t i = 0; i < kKeys; ++i) {
      std::snprintf(&buffer[i * 16], 17, "user:%011zu", i);
    }
    std::vector<std::string_view> v;
    v.reserve(kKeys);
    for (std::size_t i = 0; i < kKeys; ++i) v.emplace_back(buffer.data() + i * 16, 16);
    return v;
  }();
  return views;
}

// The keys a case cycles over.
std::vector<std::string_view> keys_of(Keys k) {
  static const std::vector<std::string_view> hot{kHotKey};
  if (k == Keys::kHot) return hot;
  const auto& all = all_keys();
  return {all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k == Keys::kMillion ? kKeys : kWarmKeys)};
}

// ---- parameters: limits high enough that almost every decision is allowed (the common case) ----

rk::LimitSpec spec(Algorithm a) {
  rk::LimitSpec s{.algorithm = a, .limit = 1e6, .window = std::chrono::seconds(1)};
  if (a == Algorithm::kEarrrl) s.half_life = std::chrono::seconds(10);
  // gcra, leaky_queue: a tolerance of 100 ms, well above the skew between the two threads' simulated clocks.
  if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) s.burst = 100'000;
  // sliding_log: memory per key grows with the traffic in the window; 1,000 per second keeps a hot key's log at
  // 100-200 entries with the step below.
  if (a == Algorithm::kSlidingLog) s.limit = 1000;
  return s;
}

// Simulated time per decision, per thread: 100,000 decisions a second per thread (10% of the limit); sliding_log
// 100 a second.
std::int64_t step_ns(Algorithm a) { return a == Algorithm::kSlidingLog ? 10'000'000 : 10'000; }

// ---- simulated time ----

// The latest simulated time any thread has reached, alone on its cache line. Starts at 1000 s; keys are filled at 0.
struct alignas(64) SharedNow {
  std::atomic<std::int64_t> ns{1'000'000'000'000};
};
SharedNow g_now;

class SimClock {
 public:
  explicit SimClock(std::int64_t step) : step_(step), now_(g_now.ns.load(std::memory_order_relaxed)) {}
  ~SimClock() { sync(); }
  SimClock(const SimClock&) = delete;
  SimClock& operator=(const SimClock&) = delete;

  std::int64_t next() {
    now_ += step_;
    if ((++count_ & 255u) == 0) sync();
    return now_;
  }

 private:
  void sync() {
    std::int64_t g = g_now.ns.load(std::memory_order_relaxed);
    if (g > now_) {
      now_ = g;
      return;
    }
    while (g < now_ && !g_now.ns.compare_exchange_weak(g, now_, std::memory_order_relaxed)) {
    }
  }

  std::int64_t step_;
  std::int64_t now_;
  std::uint32_t count_ = 0;
};

// Where each thread's walk over its keys stopped, so that a run does not start on the keys the previous (shorter)
// run of the same benchmark just warmed.
std::size_t g_cursor[8];

// ---- pinning: thread i of a run on the i-th CPU this process may use, restored afterwards ----

bool g_pin = true;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Pin {
 public:
  explicit Pin(int thread_index) {
    if (!g_pin || pthread_getaffinity_np(pthread_self(), sizeof old_, &old_) != 0) return;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &old_)) cpus.push_back(c);
    }
    if (cpus.empty()) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(thread_index) % cpus.size()], &one);
    pinned_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  }
  ~Pin() {
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof old_, &old_);
  }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;

 private:
  cpu_set_t old_{};
  bool pinned_ = false;
};

// ---- what moving one cache line between the two CPUs costs on this machine ----

// Nanoseconds for one hand-over of a cache line between threads pinned to the first two CPUs (half a ping-pong
// round trip), or 0 with fewer than 2 CPUs. A decision on a shard last written by the other core pays about this
// much per line it writes: it bounds what 2 threads can gain.
double line_transfer_ns(std::int64_t rounds = 200'000) {
  cpu_set_t mask;
  if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 2) return 0;
  struct alignas(64) Line {
    std::atomic<std::int64_t> v{0};
  };
  Line line;
  const bool pin = g_pin;
  g_pin = true;
  auto player = [&](int index, std::int64_t first) {
    const Pin p(index);
    for (std::int64_t i = first; i < 2 * rounds; i += 2) {
      while (line.v.load(std::memory_order_acquire) != i) cpu_relax();
      line.v.store(i + 1, std::memory_order_release);
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::thread other(player, 1, 1);
  player(0, 0);
  other.join();
  const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  g_pin = pin;
  return ns / (2.0 * static_cast<double>(rounds));
}

// ---- how fast each CPU is right now: the hypervisor does not give every vCPU the same share of a core ----

// ns per hot-key gcra decision, on the i-th allowed CPU (a few milliseconds of work).
double decision_ns_on(int cpu_index) {
  const bool pin = g_pin;
  g_pin = true;
  double ns = 0;
  {
    const Pin p(cpu_index);
    rk::Limiter l(spec(Algorithm::kGcra), rk::StoreOptions{.max_keys = 1024});
    constexpr int kDecisions = 1'000'000;
    std::int64_t now = 0;
    std::int64_t allowed = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kDecisions; ++i)
      allowed += l.check_at(kHotKey, Nanos{now += step_ns(Algorithm::kGcra)}).allowed;
    benchmark::DoNotOptimize(allowed);
    ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / kDecisions;
  }
  g_pin = pin;
  return ns;
}

int allowed_cpus() {
  cpu_set_t mask;
  return pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;
}

std::string cpu_speeds() {
  std::string out;
  for (int i = 0; i < std::min(allowed_cpus(), 8); ++i) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%sCPU #%d %.1f ns", i ? ", " : "", i, decision_ns_on(i));
    out += buf;
  }
  return out;
}

// ---- what one miss to memory costs on this machine, now ----

// A chain of dependent loads through a random cycle over `bytes` of cache lines: each load's address is the previous
// load's value, so no two overlap, and each costs one miss (with its TLB miss) once `bytes` is well beyond the last
// level cache. Sized as a store of the million keys, it is what one decision over them costs at the physical limit
// of one miss and nothing else; this VM's memory latency swings between runs (80-185 ns), so a figure taken next to
// the decisions says what the machine gave them.
class MissChain {
 public:
  explicit MissChain(std::size_t bytes) : lines_(std::max<std::size_t>(2, bytes / sizeof(Line))) {
    // Sattolo's algorithm: a random permutation with one cycle through every line.
    std::vector<std::uint32_t> order(lines_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = order.size() - 1; i > 0; --i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
      std::swap(order[i], order[static_cast<std::size_t>(x % i)]);
    }
    for (std::size_t i = 0; i < order.size(); ++i) lines_[order[i]].next = order[(i + 1) % order.size()];
  }

  // ns per load over `steps` dependent loads, continuing where the last call stopped.
  double ns_per_miss(std::size_t steps) {
    std::uint32_t at = at_;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < steps; ++i) at = lines_[at].next;
    const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    at_ = at;
    benchmark::DoNotOptimize(at);
    return ns / static_cast<double>(steps);
  }

 private:
  struct alignas(64) Line {
    std::uint32_t next = 0;
  };
  std::vector<Line> lines_;
  std::uint32_t at_ = 0;
};

// The chain the figures are set against: a million keys at the bytes a key of issue 18's target. Built on first use
// (~50 ms).
MissChain& miss_chain() {
  static MissChain chain(kKeys * kTargetBytesPerKey);
  return chain;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- the stores under test, built and filled once, shared by a benchmark's threads ----

rk::Limiter& limiter(Algorithm a, Keys k) {
  static std::mutex mu;
  static std::map<std::pair<Algorithm, Keys>, std::unique_ptr<rk::Limiter>> all;
  std::lock_guard lock(mu);
  auto& l = all[{a, k}];
  if (!l) {
    l = std::make_unique<rk::Limiter>(spec(a), rk::StoreOptions{.max_keys = kMaxKeys});
    for (std::string_view key : keys_of(k)) l->check_at(key, Nanos{0});
  }
  return *l;
}

rk::bench::BaselineStore& baseline(Keys k) {
  static std::mutex mu;
  static std::map<Keys, std::unique_ptr<rk::bench::BaselineStore>> all;
  std::lock_guard lock(mu);
  auto& b = all[k];
  if (!b) {
    b = std::make_unique<rk::bench::BaselineStore>(rk::core::earrrl_params(spec(Algorithm::kEarrrl)), kMaxKeys);
    for (std::string_view key : keys_of(k)) b->check(key, 0);
  }
  return *b;
}

// Each thread cycles over its own slice of the keys (with 2 threads, its own half: no key is shared); on the hot
// key both threads use the same key, which is the contention case.
template <class Check>
void run(benchmark::State& state, Keys k, std::int64_t step, Check&& check) {
  static const std::vector<std::string_view> hot = keys_of(Keys::kHot);
  static const std::vector<std::string_view> million = keys_of(Keys::kMillion);
  static const std::vector<std::string_view> warm = keys_of(Keys::kTenThousand);
  const auto& keys = k == Keys::kHot ? hot : k == Keys::kMillion ? million : warm;
  const std::size_t n = std::max<std::size_t>(1, keys.size() / static_cast<std::size_t>(state.threads()));
  const std::string_view* const slice = keys.data() + static_cast<std::size_t>(state.thread_index()) * n % keys.size();
  std::size_t& cursor = g_cursor[static_cast<std::size_t>(state.thread_index()) % std::size(g_cursor)];
  std::size_t i = cursor % n;
  std::int64_t allowed = 0;
  const Pin pin(state.thread_index());
  SimClock clock(step);
  for (auto _ : state) {
    const rk::Decision d = check(slice[i], clock.next());
    allowed += d.allowed ? 1 : 0;
    benchmark::DoNotOptimize(d);
    if (++i == n) i = 0;
  }
  cursor = i;
  state.SetItemsProcessed(state.iterations());
  state.counters["allowed"] = benchmark::Counter(
      static_cast<double>(allowed) / static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations())),
      benchmark::Counter::kAvgThreads);
}

// The decisions read `allowed` alone, and say so (rk::Fields); `fields` kAll: as a caller that reads reset_after.
void bm_ratekeeper(benchmark::State& state, Algorithm a, Keys k, rk::Fields fields) {
  rk::Limiter& l = limiter(a, k);
  run(state, k, step_ns(a),
      [&](std::string_view key, std::int64_t now) { return l.check_at(key, Nanos{now}, 1, fields); });
}

// Limiter::check_many over the million keys, kBatch consecutive keys of the thread's slice a call, one simulated
// time a call (advanced as far as kBatch single decisions would advance it). Reported per decision. Like the single
// checks, it reads `allowed` alone and says so (`fields`); kAll: as a caller that reads reset_after.
constexpr std::size_t kBatch = 16;

void bm_batch(benchmark::State& state, Algorithm a, rk::Fields fields) {
  static const std::vector<std::string_view> million = keys_of(Keys::kMillion);
  rk::Limiter& l = limiter(a, Keys::kMillion);
  const std::size_t n = million.size() / static_cast<std::size_t>(state.threads()) / kBatch * kBatch;
  const std::string_view* const slice = million.data() + static_cast<std::size_t>(state.thread_index()) * n;
  std::size_t& cursor = g_cursor[static_cast<std::size_t>(state.thread_index()) % std::size(g_cursor)];
  std::size_t i = cursor / kBatch * kBatch % n;
  std::int64_t allowed = 0;
  rk::Decision out[kBatch];
  const Pin pin(state.thread_index());
  SimClock clock(step_ns(a) * static_cast<std::int64_t>(kBatch));
  for (auto _ : state) {
    l.check_many_at({slice + i, kBatch}, {}, Nanos{clock.next()}, out, fields);
    for (const rk::Decision& d : out) allowed += d.allowed ? 1 : 0;
    benchmark::DoNotOptimize(out);
    if ((i += kBatch) == n) i = 0;
  }
  cursor = i;
  const auto decisions = state.iterations() * static_cast<benchmark::IterationCount>(kBatch);
  state.SetItemsProcessed(decisions);
  state.counters["allowed"] = benchmark::Counter(
      static_cast<double>(allowed) / static_cast<double>(std::max<benchmark::IterationCount>(1, decisions)),
      benchmark::Counter::kAvgThreads);
}

void bm_baseline(benchmark::State& state, Keys k) {
  rk::bench::BaselineStore& b = baseline(k);
  run(state, k, step_ns(Algorithm::kEarrrl), [&](std::string_view key, std::int64_t now) { return b.check(key, now); });
}

// ---- registration and the collecting reporter ----

constexpr const char* kBaselineName = "baseline_earrrl";

std::string bench_name(const std::string& store, Keys k) { return store + "/" + keys_name(k); }
std::string batch_name(Algorithm a) { return std::string(rk::algorithm_name(a)) + "/1M/check_many16"; }

void register_all(bool with_10k) {
  std::vector<Keys> cases{Keys::kHot, Keys::kMillion};
  if (with_10k) cases.push_back(Keys::kTenThousand);
  for (Keys k : cases) {
    for (Algorithm a : rk::kAllAlgorithms) {
      benchmark::RegisterBenchmark(bench_name(std::string(rk::algorithm_name(a)), k).c_str(), bm_ratekeeper, a, k,
                                   rk::Fields::kAllButResetAfter)
          ->Threads(1)
          ->Threads(2)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark(bench_name(kBaselineName, k).c_str(), bm_baseline, k)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
  }
  // What asking for earrrl's reset_after (a logarithm) costs a hot-key decision: not in the summary.
  benchmark::RegisterBenchmark("earrrl/hot/with_reset_after", bm_ratekeeper, Algorithm::kEarrrl, Keys::kHot,
                               rk::Fields::kAll)
      ->Threads(1)
      ->UseRealTime();
  for (Algorithm a : rk::kAllAlgorithms) {
    benchmark::RegisterBenchmark(batch_name(a).c_str(), bm_batch, a, rk::Fields::kAllButResetAfter)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
  }
  // The same for earrrl and sliding_window, whose reset_after costs (a logarithm; a 128-bit division): not in the
  // summary.
  for (Algorithm a : {Algorithm::kEarrrl, Algorithm::kSlidingWindow}) {
    benchmark::RegisterBenchmark((batch_name(a) + "/with_reset_after").c_str(), bm_batch, a, rk::Fields::kAll)
        ->Threads(1)
        ->UseRealTime();
  }
}

// ---- how much of the machine other processes used: the runs share the machine with whatever else runs ----

struct CpuSample {
  double busy_s = 0;   // all CPUs: user, nice, system, irq, softirq, steal (from /proc/stat)
  double total_s = 0;  // the same plus idle and iowait
  double self_s = 0;   // this process's user + system time
  int cpus = 0;
};

CpuSample cpu_sample() {
  CpuSample c;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (std::FILE* f = std::fopen("/proc/stat", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long v[8] = {};
      if (std::strncmp(line, "cpu ", 4) == 0 && std::sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                                                            &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4) {
        const double busy = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
        c.busy_s = busy / tick;
        c.total_s = (busy + static_cast<double>(v[3] + v[4])) / tick;
      } else if (std::strncmp(line, "cpu", 3) == 0 && line[3] >= '0' && line[3] <= '9') {
        ++c.cpus;
      }
    }
    std::fclose(f);
  }
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  c.self_s = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
             static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  return c;
}

// Cores' worth of CPU that other processes (and the hypervisor's steal) used between two samples.
double others_cores(const CpuSample& a, const CpuSample& b) {
  const double wall = (b.total_s - a.total_s) / std::max(1, b.cpus);
  if (wall <= 0) return 0;
  return std::max(0.0, ((b.busy_s - a.busy_s) - (b.self_s - a.self_s)) / wall);
}

struct Measured {
  double real_ns = 0;     // wall time per decision, all threads together (Google Benchmark's real time)
  double cpu_ns = 0;      // CPU time per decision, summed over threads
  double per_second = 0;  // items_per_second: decisions a second, all threads together
  double allowed = 0;     // fraction of the decisions allowed
  double others = 0;      // cores used by other processes meanwhile (the run and its set-up)
  double line_ns = 0;     // cache-line hand-over between the CPUs, measured right after the run
  double miss_ns = 0;     // one dependent miss over 48 MB (MissChain), measured right after the run
};

// Prints as ConsoleReporter does and keeps each run's figures, by (registered name, threads).
class Collector : public benchmark::ConsoleReporter {
 public:
  explicit Collector(OutputOptions options) : ConsoleReporter(options), last_(cpu_sample()) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    const CpuSample now = cpu_sample();
    const double others = others_cores(last_, now);
    max_others_ = std::max(max_others_, others);
    const double line_ns = line_transfer_ns(50'000);  // about 20 ms
    double miss_ns = 0;
    {
      const Pin pin(0);                             // where 1-thread runs ran
      miss_ns = miss_chain().ns_per_miss(100'000);  // about 15 ms
    }
    last_ = cpu_sample();
    for (const Run& r : runs) {
      // Each repetition's own row; or, when only aggregates are reported (--benchmark_report_aggregates_only or
      // --benchmark_display_aggregates_only), the median's, used where no repetition's row came.
      const bool is_median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if ((r.run_type != Run::RT_Iteration && !is_median) || r.error_occurred) continue;
      Measured m;
      m.real_ns = r.GetAdjustedRealTime();  // in r.time_unit, nanoseconds by default
      m.cpu_ns = r.GetAdjustedCPUTime();
      const double to_ns = 1e9 / benchmark::GetTimeUnitMultiplier(r.time_unit);
      m.real_ns *= to_ns;
      m.cpu_ns *= to_ns;
      if (const auto it = r.counters.find("items_per_second"); it != r.counters.end()) m.per_second = it->second.value;
      if (const auto it = r.counters.find("allowed"); it != r.counters.end()) m.allowed = it->second.value;
      m.others = others;
      m.line_ns = line_ns;
      m.miss_ns = miss_ns;
      (is_median ? medians_ : runs_)[{r.run_name.function_name, static_cast<int>(r.threads)}].push_back(m);
    }
  }

  // The run's figures (the median by throughput over repetitions), or nothing if it did not run.
  std::optional<Measured> get(const std::string& name, int threads) const {
    const std::vector<Measured>* found = nullptr;
    for (const auto* runs : {&runs_, &medians_}) {
      const auto it = runs->find({name, threads});
      if (it != runs->end() && !it->second.empty()) {
        found = &it->second;
        break;
      }
    }
    if (found == nullptr) return std::nullopt;
    std::vector<Measured> v = *found;
    std::sort(v.begin(), v.end(), [](const Measured& a, const Measured& b) { return a.per_second < b.per_second; });
    return v[v.size() / 2];
  }
  double max_others() const { return max_others_; }

 private:
  std::map<std::pair<std::string, int>, std::vector<Measured>> runs_, medians_;
  CpuSample last_;
  double max_others_ = 0;
};

// ---- bytes per key ----

std::size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

struct MemoryRow {
  std::string name;
  double heap_per_key = 0;  // mallinfo2 growth / keys
  double own_per_key = -1;  // stats().memory_bytes / keys; -1 for the baseline (it keeps no count)
  bool fixed_size = true;
};

std::vector<MemoryRow> measure_memory() {
  std::vector<MemoryRow> rows;
  const auto& keys = all_keys();
  const double n = static_cast<double>(keys.size());
  for (Algorithm a : rk::kAllAlgorithms) {
    MemoryRow row{.name = std::string(rk::algorithm_name(a)), .fixed_size = a != Algorithm::kSlidingLog};
    const std::size_t before = heap_in_use();
    {
      rk::Limiter l(spec(a), rk::StoreOptions{.max_keys = kMaxKeys});
      for (std::string_view k : keys) l.check_at(k, Nanos{0});  // sliding_log: one request logged per key
      row.heap_per_key = static_cast<double>(heap_in_use() - before) / n;
      row.own_per_key = static_cast<double>(l.stats().memory_bytes) / n;
    }
    rows.push_back(row);
  }
  MemoryRow row{.name = kBaselineName};
  const std::size_t before = heap_in_use();
  {
    rk::bench::BaselineStore b(rk::core::earrrl_params(spec(Algorithm::kEarrrl)), kMaxKeys);
    for (std::string_view k : keys) b.check(k, 0);
    row.heap_per_key = static_cast<double>(heap_in_use() - before) / n;
  }
  rows.push_back(row);
  return rows;
}

// ---- the summary ----

std::string fmt(const char* format, double v) {
  if (std::isnan(v) || v <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

const char* verdict(bool known, bool met) { return !known ? "not run" : met ? "met" : "NOT MET"; }

void summary(const Collector& c, bool with_10k, const std::vector<MemoryRow>& memory, double line_before,
             double line_after, const std::string& speed_before, const std::string& speed_after) {
  std::vector<Keys> cases{Keys::kHot, Keys::kMillion};
  if (with_10k) cases.push_back(Keys::kTenThousand);
  std::vector<std::string> stores;
  for (Algorithm a : rk::kAllAlgorithms) stores.emplace_back(rk::algorithm_name(a));
  stores.emplace_back(kBaselineName);

  auto ns = [&](const std::string& store, Keys k, int threads) {
    const auto m = c.get(bench_name(store, k), threads);
    return m && m->per_second > 0 ? 1e9 / m->per_second : 0.0;
  };
  auto rate = [&](const std::string& store, Keys k, int threads) {
    const auto m = c.get(bench_name(store, k), threads);
    return m ? m->per_second : 0.0;
  };

  std::printf(
      "\n=== Summary\n\nns per decision = 1e9 / items_per_second: wall time per decision with all threads "
      "together\n(with 2 threads each thread takes twice that per decision). 2T/1T = 2-thread throughput "
      "over 1-thread.\ncpu = CPU time / wall time of the 2-thread run (2.00: both threads ran all along). "
      "allowed = min fraction allowed.\nother = the most cores other processes (or the hypervisor) took "
      "during the row's runs: above ~0.1 the row's figures are suspect.\nline = ns to hand one cache line "
      "from one CPU to the other, measured right after the 2-thread run: a 2-thread decision on a shard\n"
      "the other thread wrote last pays this per line it writes; it changes when the hypervisor moves the "
      "vCPUs.\n\n");
  std::printf("%-16s", "algorithm");
  for (Keys k : cases)
    std::printf(" | %-4s %7s %7s %6s %5s %5s", keys_name(k), "1T ns", "2T ns", "2T/1T", "cpu", "line");
  std::printf(" | %7s %5s\n", "allowed", "other");
  for (const std::string& s : stores) {
    std::printf("%-16s", s.c_str());
    double min_allowed = 1, others = 0;
    bool any = false;
    for (Keys k : cases) {
      const auto m2 = c.get(bench_name(s, k), 2);
      const double r1 = rate(s, k, 1), r2 = rate(s, k, 2);
      std::printf(" | %-4s %7s %7s %6s %5s %5s", "", fmt("%.1f", ns(s, k, 1)).c_str(), fmt("%.1f", ns(s, k, 2)).c_str(),
                  fmt("%.2f", r1 > 0 && r2 > 0 ? r2 / r1 : 0).c_str(),
                  fmt("%.2f", m2 && m2->real_ns > 0 ? m2->cpu_ns / m2->real_ns : 0).c_str(),
                  fmt("%.0f", m2 ? m2->line_ns : 0).c_str());
      for (int t = 1; t <= 2; ++t) {
        if (const auto m = c.get(bench_name(s, k), t)) {
          any = true;
          min_allowed = std::min(min_allowed, m->allowed);
          others = std::max(others, m->others);
        }
      }
    }
    if (any) {
      std::printf(" | %6.1f%% %5.2f\n", 100 * min_allowed, others);
    } else {
      std::printf(" | %7s %5s\n", "-", "-");
    }
  }
  if (line_before > 0) {
    std::printf("One cache line handed from one CPU to the other: %.0f ns before the runs, %.0f ns after.\n",
                line_before, line_after);
  }
  std::printf(
      "Each CPU's speed (ns per hot-key gcra decision, outside the timed runs): before %s; after %s.\n"
      "1-thread runs are pinned to CPU #0, 2-thread runs to #0 and #1: when the CPUs differ, so do 1T "
      "figures and 2T/1T.\n",
      speed_before.c_str(), speed_after.c_str());
  if (c.max_others() > 0.1) {
    std::printf(
        "WARNING: other processes took up to %.2f cores during the runs: figures are disturbed, run again on "
        "an idle machine.\n",
        c.max_others());
  }

  std::printf(
      "\nEARRRL: ratekeeper throughput / baseline throughput (= baseline ns / ratekeeper ns; target >= 2x "
      "with 2 threads)\n");
  std::printf("%-10s %10s %10s\n", "keys", "1 thread", "2 threads");
  for (Keys k : cases) {
    std::printf("%-10s", keys_name(k));
    for (int t = 1; t <= 2; ++t) {
      const double b = rate(kBaselineName, k, t), r = rate("earrrl", k, t);
      std::printf(" %9sx", fmt("%.2f", b > 0 && r > 0 ? r / b : 0).c_str());
    }
    std::printf("\n");
  }

  if (!memory.empty()) {
    std::printf(
        "\nBytes per key, 1,000,000 keys of 16 bytes: heap growth (mallinfo2 uordblks + hblkhd) / keys, and "
        "the store's own count\n(stats().memory_bytes / keys). Target <= %zu for the fixed-size states (issue "
        "18), by the larger of the two.\n",
        kTargetBytesPerKey);
    std::printf("%-16s %10s %10s  %s\n", "store", "heap B/key", "own B/key", "");
    for (const MemoryRow& m : memory) {
      const bool met = std::max(m.heap_per_key, m.own_per_key) <= static_cast<double>(kTargetBytesPerKey);
      std::printf("%-16s %10.1f %10s  %s\n", m.name.c_str(), m.heap_per_key, fmt("%.1f", m.own_per_key).c_str(),
                  m.name == kBaselineName ? "(std::unordered_map + std::list)"
                  : m.fixed_size          ? (met ? "met" : "NOT MET")
                                          : "(not fixed-size: one request logged per key)");
    }
  }

  // CPU time per decision of a 1-thread run: on a machine other processes load, wall time counts the time the
  // thread waited for a CPU, and CPU time does not (it still counts caches the others evicted).
  auto cpu_ns = [&](const std::string& name) {
    const auto m = c.get(name, 1);
    return m && m->per_second > 0 && m->real_ns > 0 ? m->cpu_ns * (1e9 / m->per_second) / m->real_ns : 0.0;
  };
  std::printf(
      "\nTargets (wall ns per decision, as above; in brackets CPU ns per decision, the steadier figure when "
      "other processes load the machine)\n");
  auto hot_target = [&](const char* store, double limit) {
    const double v = ns(store, Keys::kHot, 1);
    std::printf("  %-52s %8s ns  <= %3.0f ns   %s [cpu %s]\n", (std::string(store) + ", hot key, 1 thread").c_str(),
                fmt("%.1f", v).c_str(), limit, verdict(v > 0, v <= limit),
                fmt("%.1f", cpu_ns(bench_name(store, Keys::kHot))).c_str());
  };
  // Issue 18's targets (those of issue 15, met since: 40, 40 and 60 ns).
  hot_target("gcra", 15);
  hot_target("token_bucket", 15);
  hot_target("earrrl", 20);
  for (Algorithm a : rk::kAllAlgorithms) {
    if (a == Algorithm::kSlidingLog) continue;  // not fixed-size: its log is a second allocation
    const std::string name = bench_name(std::string(rk::algorithm_name(a)), Keys::kMillion);
    const double v = ns(std::string(rk::algorithm_name(a)), Keys::kMillion, 1);
    const auto m = c.get(name, 1);
    const double miss = m ? m->miss_ns : 0;
    std::printf("  %-52s %8s ns  <= 120 ns  %s [cpu %s] (one miss %s ns: %s misses)\n",
                (std::string(rk::algorithm_name(a)) + ", 1M keys, 1 thread").c_str(), fmt("%.1f", v).c_str(),
                verdict(v > 0, v <= 120), fmt("%.1f", cpu_ns(name)).c_str(), fmt("%.1f", miss).c_str(),
                fmt("%.2f", v > 0 && miss > 0 ? v / miss : 0).c_str());
  }
  std::printf(
      "  (one miss: ns per load of a chain of dependent loads over 48 MB, a million keys at 48 bytes, measured "
      "right after the row's run;\n   this VM's memory latency moves between runs, and a decision cannot "
      "take less than the one miss it needs unless the\n   processor overlaps it with the next decision's)\n");
  for (Keys k : cases) {
    const double b = rate(kBaselineName, k, 2), r = rate("earrrl", k, 2);
    const double x = b > 0 && r > 0 ? r / b : 0;
    std::printf("  %-52s %8s x   >= 2x      %s\n",
                (std::string("earrrl / baseline throughput, ") + keys_name(k) + ", 2 threads").c_str(),
                fmt("%.2f", x).c_str(), verdict(x > 0, x >= 2));
  }
  for (Algorithm a : rk::kAllAlgorithms) {
    const auto m = c.get(batch_name(a), 1);
    const double v = m && m->per_second > 0 ? 1e9 / m->per_second : 0;
    const double single = ns(std::string(rk::algorithm_name(a)), Keys::kMillion, 1);
    std::printf("  %-52s %8s ns  <= 50 ns   %s (%s x one check a key) [cpu %s]\n",
                (std::string(rk::algorithm_name(a)) + ", 1M keys, check_many of 16, 1 thread").c_str(),
                fmt("%.1f", v).c_str(), verdict(v > 0, v <= 50),
                fmt("%.2f", v > 0 && single > 0 ? single / v : 0).c_str(), fmt("%.1f", cpu_ns(batch_name(a))).c_str());
  }
  for (Keys k : cases) {
    if (k == Keys::kHot) continue;
    int met = 0, known = 0;
    double lo = 1e9, hi = 0;
    for (Algorithm a : rk::kAllAlgorithms) {
      const std::string s(rk::algorithm_name(a));
      const double r1 = rate(s, k, 1), r2 = rate(s, k, 2);
      if (r1 <= 0 || r2 <= 0) continue;
      ++known;
      met += r2 > r1 ? 1 : 0;
      lo = std::min(lo, r2 / r1);
      hi = std::max(hi, r2 / r1);
    }
    char range[64] = "-";
    if (known) std::snprintf(range, sizeof range, "%.2f-%.2f", lo, hi);
    std::printf("  %-52s %11s  > 1        %s (%d of %d algorithms)\n",
                (std::string("2T / 1T throughput, ") + keys_name(k) + " distinct keys").c_str(), range,
                verdict(known > 0, known > 0 && met == known), met, known);
  }
}

// --rk_count: `n` decisions on the hot key (or cycling over the million keys), one thread; prints the best ns a
// decision over batches (preemption by other processes only ever adds time, so the least is the steadiest figure on a
// loaded machine).
int count_decisions(std::string_view what) {
  const std::size_t colon = what.find(':');
  const std::string name(what.substr(0, colon));
  const std::string rest(colon == std::string_view::npos ? "" : what.substr(colon + 1));
  const long long n = std::atoll(rest.c_str());
  const bool many = rest.ends_with(":many16");  // check_many of kBatch over the million keys, as bm_batch makes them
  const Keys k = rest.ends_with(":1M") || many ? Keys::kMillion : Keys::kHot;
  const Algorithm* a = std::find_if(std::begin(rk::kAllAlgorithms), std::end(rk::kAllAlgorithms),
                                    [&](Algorithm x) { return rk::algorithm_name(x) == name; });
  if (a == std::end(rk::kAllAlgorithms) || n <= 0) {
    std::fprintf(stderr,
                 "--rk_count=%s: expected ALGORITHM:N, ALGORITHM:N:1M or ALGORITHM:N:many16 (an algorithm's name, "
                 "N > 0)\n",
                 std::string(what).c_str());
    return 2;
  }
  rk::Limiter& l = limiter(*a, k);
  const std::vector<std::string_view> keys = keys_of(k);
  std::size_t next = 0;
  const Pin pin(0);
  const std::size_t per_call = many ? kBatch : 1;  // decisions a call
  SimClock clock(step_ns(*a) * static_cast<std::int64_t>(per_call));
  constexpr long long kEach = 10'000;
  // Over the million keys, each batch is followed by a stretch of MissChain (~2,000 loads) on the same CPU, so that
  // every batch has a measure of the memory it ran on beside it.
  constexpr std::size_t kMissSteps = 2'000;
  if (k == Keys::kMillion) miss_chain().ns_per_miss(kMissSteps);  // built before the first batch
  double best = 1e300;
  std::vector<double> batch_ns, miss_ns, ratio;
  std::int64_t allowed = 0;
  rk::Decision out[kBatch];
  for (long long done = 0; done < n;) {
    const long long m = std::min(kEach, n - done) / static_cast<long long>(per_call) * static_cast<long long>(per_call);
    if (m == 0) break;
    const auto start = std::chrono::steady_clock::now();
    for (long long i = 0; i < m; i += static_cast<long long>(per_call)) {
      if (many) {
        l.check_many_at({keys.data() + next, kBatch}, {}, Nanos{clock.next()}, out, rk::Fields::kAllButResetAfter);
        if ((next += kBatch) + kBatch > keys.size()) next = 0;
        for (const rk::Decision& d : out) allowed += d.allowed ? 1 : 0;
        benchmark::DoNotOptimize(out);
        continue;
      }
      const rk::Decision d = l.check_at(keys[next], Nanos{clock.next()}, 1, rk::Fields::kAllButResetAfter);
      if (++next == keys.size()) next = 0;
      allowed += d.allowed ? 1 : 0;
      benchmark::DoNotOptimize(d);
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (m == kEach / static_cast<long long>(per_call) * static_cast<long long>(per_call)) {
      const double each = ns / static_cast<double>(m);
      best = std::min(best, each);
      batch_ns.push_back(each);
      if (k == Keys::kMillion) {
        miss_ns.push_back(miss_chain().ns_per_miss(kMissSteps));
        ratio.push_back(each / miss_ns.back());
      }
    }
    done += m;
  }
  std::printf("%s/%s%s: %lld decisions, %.1f%% allowed, best %.2f ns a decision (batches of %lld), median %.2f",
              name.c_str(), keys_name(k), many ? "/check_many16" : "", n,
              100.0 * static_cast<double>(allowed) / static_cast<double>(n), best, kEach, median(batch_ns));
  if (!miss_ns.empty()) {
    std::printf(
        "; one miss (a dependent load over 48 MB, after each batch) median %.2f ns; decision / miss, median of "
        "the batches %.3f",
        median(miss_ns), median(ratio));
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool with_10k = false, with_memory = true;
  // A reporter passed in is not told Google Benchmark's --benchmark_color and --benchmark_counters_tabular:
  // read them here too (and pass them on), with the library's defaults (colour when stdout is a terminal).
  bool color = isatty(STDOUT_FILENO) != 0, tabular = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--rk_10k") {
      with_10k = true;
    } else if (a == "--rk_no_pin") {
      g_pin = false;
    } else if (a == "--rk_no_memory") {
      with_memory = false;
    } else if (a.starts_with("--rk_count=")) {
      return count_decisions(a.substr(std::string_view("--rk_count=").size()));
    } else {
      args.push_back(argv[i]);
      auto value = [&](std::string_view flag) -> std::optional<std::string_view> {
        if (a == flag) return std::string_view("true");
        if (a.size() > flag.size() && a.substr(0, flag.size()) == flag && a[flag.size()] == '=') {
          return a.substr(flag.size() + 1);
        }
        return std::nullopt;
      };
      auto truth = [](std::string_view v) { return v == "true" || v == "yes" || v == "1" || v == "always"; };
      if (const auto v = value("--benchmark_color"); v && *v != "auto") color = truth(*v);
      if (const auto v = value("--benchmark_counters_tabular")) tabular = truth(*v);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;

  all_keys();
  std::vector<MemoryRow> memory;
  if (with_memory) {
    std::printf("Measuring bytes per key (1,000,000 keys in each store)...\n");
    std::fflush(stdout);
    memory = measure_memory();
  }

  const auto output_options = static_cast<benchmark::ConsoleReporter::OutputOptions>(
      (color ? benchmark::ConsoleReporter::OO_Color : 0) | (tabular ? benchmark::ConsoleReporter::OO_Tabular : 0));
  const std::string speed_before = cpu_speeds();
  const double line_before = line_transfer_ns();
  register_all(with_10k);
  Collector collector(output_options);
  benchmark::RunSpecifiedBenchmarks(&collector);
  const double line_after = line_transfer_ns();
  const std::string speed_after = cpu_speeds();
  summary(collector, with_10k, memory, line_before, line_after, speed_before, speed_after);
  benchmark::Shutdown();
  return 0;
}
