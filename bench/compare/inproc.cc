// bench/compare/inproc.cc: ratekeeper's in-process limiter on the work bench/compare/go/xtimebench gives Go's
// golang.org/x/time/rate, so that bench/compare can put the two side by side:
//
//   rk_compare_inproc bench ALGORITHM    "hot|1M THREADS NS_PER_DECISION ALLOWED_FRACTION" lines
//   rk_compare_inproc memory ALGORITHM   "heap_bytes_per_key X store_bytes_per_key Y"
//
// The same work as the Go side: one key (hot) or 1,000,000 keys of 16 bytes ("user:%011d") inserted before timing,
// 1 and 2 threads (each thread over its own half of the keys), 4,000,000 decisions per thread, check_at(key, now)
// with a simulated now advancing 10 µs a decision per thread (no clock read timed; the threads' clocks catch up with
// the latest every 256 decisions), limit 1,000,000 a second (token_bucket capacity 1,000,000; gcra burst 999,999 =
// the same bucket; earrrl half-life 10 s). Thread i pinned to CPU i, as the Go side pins its goroutines' threads.
// ns per decision = wall time / all threads' decisions.
#include <malloc.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ratekeeper/limiter.h"

namespace {

constexpr std::size_t kKeys = 1'000'000;
constexpr int kPerThread = 4'000'000;
constexpr std::int64_t kStepNs = 10'000;

rk::LimitSpec spec_for(const std::string& name) {
  const auto a = rk::parse_algorithm(name);
  if (!a) throw rk::InvalidArgument("unknown algorithm " + name);
  rk::LimitSpec s{.algorithm = *a, .limit = 1e6};
  if (*a == rk::Algorithm::kEarrrl) s.half_life = std::chrono::seconds(10);
  if (*a == rk::Algorithm::kGcra) s.burst = 1e6 - 1;  // gcra with burst b = a token bucket of capacity b + 1
  if (*a == rk::Algorithm::kTokenBucket) s.capacity = 1e6;
  return s;
}

std::vector<std::string> make_keys() {
  std::vector<std::string> k(kKeys);
  char buf[32];
  for (std::size_t i = 0; i < kKeys; ++i) {
    std::snprintf(buf, sizeof buf, "user:%011zu", i);
    k[i] = buf;
  }
  return k;
}

std::int64_t g_cursor = 1'000'000'000'000;  // simulated ns; every run starts where the last one ended
std::atomic<std::int64_t> g_latest{0};      // the latest simulated time any thread of the run has reached

std::int64_t resync(std::int64_t now) {
  std::int64_t l = g_latest.load(std::memory_order_relaxed);
  while (true) {
    if (l > now) return l;
    if (g_latest.compare_exchange_weak(l, now, std::memory_order_relaxed)) return now;
  }
}

void pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu % static_cast<int>(std::thread::hardware_concurrency()), &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

// Times kPerThread decisions on each of `threads` threads; pick(t, i) names the key of decision i of thread t.
template <class Pick>
void run(rk::Limiter& l, int threads, const char* name, int n, Pick pick, bool print) {
  std::vector<std::thread> ts;
  std::vector<long> allowed(static_cast<std::size_t>(threads));
  g_latest = g_cursor;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      pin(t);
      std::int64_t now = g_cursor + t * 1000;
      long ok = 0;
      for (int i = 0; i < n; ++i) {
        now += kStepNs;
        if ((i & 255) == 255) now = resync(now);
        // Go's Allow() answers yes or no: this reads `allowed` alone, and says so.
        ok += l.check_at(pick(t, i), rk::Nanos{now}, 1, rk::Fields::kAllButResetAfter).allowed;
      }
      allowed[static_cast<std::size_t>(t)] = ok;
    });
  }
  for (auto& t : ts) t.join();
  const double el = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  g_cursor = g_latest + 10'000'000;
  long total = 0;
  for (long a : allowed) total += a;
  const double all = static_cast<double>(threads) * n;
  if (print) std::printf("%s %d %.1f %.4f\n", name, threads, el / all, static_cast<double>(total) / all);
}

void bench(const rk::LimitSpec& spec) {
  const auto keys = make_keys();
  for (int threads : {1, 2}) {
    rk::Limiter l(spec, {.max_keys = 2 * kKeys});
    const std::string hot = "hot:000000000001";
    run(
        l, threads, "hot", kPerThread / 4, [&](int, int) -> const std::string& { return hot; }, false);
    run(
        l, threads, "hot", kPerThread, [&](int, int) -> const std::string& { return hot; }, true);
  }
  for (int threads : {1, 2}) {
    rk::Limiter l(spec, {.max_keys = 2 * kKeys});
    for (const auto& k : keys) l.check_at(k, rk::Nanos{g_cursor});
    const std::size_t half = kKeys / static_cast<std::size_t>(threads);
    run(
        l, threads, "1M", kPerThread,
        [&](int t, int i) -> const std::string& {
          return keys[static_cast<std::size_t>(t) * half + static_cast<std::size_t>(i) % half];
        },
        true);
  }
}

std::size_t heap() {
  const auto m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void memory(const rk::LimitSpec& spec) {
  const auto keys = make_keys();
  const std::size_t before = heap();
  rk::Limiter l(spec, {.max_keys = 2 * kKeys});
  for (const auto& k : keys) l.check_at(k, rk::Nanos{g_cursor});
  const std::size_t after = heap();
  const auto st = l.stats();
  std::printf("heap_bytes_per_key %.1f store_bytes_per_key %.1f\n",
              static_cast<double>(after - before) / static_cast<double>(kKeys),
              static_cast<double>(st.memory_bytes) / static_cast<double>(st.keys));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "bench") != 0 && std::strcmp(argv[1], "memory") != 0)) {
    std::fprintf(stderr, "usage: rk_compare_inproc bench|memory ALGORITHM\n");
    return 2;
  }
  const auto spec = spec_for(argv[2]);
  if (std::strcmp(argv[1], "bench") == 0) bench(spec);
  else memory(spec);
  return 0;
}
