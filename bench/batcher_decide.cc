// bench/batcher_decide.cc: the decision path of a `sharing: batched` domain (store/batched/batcher.h, try_decide)
// against the embedded store's (Limiter::check_at), with nothing around them: --threads threads deciding one hot key,
// then --keys keys, for --seconds each way, in one run; decisions/s and the ratio to the embedded store. The
// batcher's store is a Redis port nothing listens on: once its first fetch fails, keys decide locally through the
// same try_decide as a synced key (only the freshness test differs), and nothing is sent (no batch thread).
//
//   rk_batcher_decide [--seconds 1] [--threads 2] [--keys 10000]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ratekeeper/limiter.h"
#include "store/batched/batcher.h"
#include "store/redis/shared_counters.h"

namespace {

using Clock = std::chrono::steady_clock;

// Decisions/s of `threads` threads each calling one(thread, i) until `seconds` have passed.
template <class F>
double rate(int threads, double seconds, F one) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 1024; ++i) one(t, n++);
      }
      total.fetch_add(n);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  return static_cast<double>(total.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1;
  int threads = 2;
  std::size_t keys = 10'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--keys")) keys = static_cast<std::size_t>(std::atol(argv[i + 1]));
  }
  const rk::LimitSpec spec{
      .algorithm = rk::Algorithm::kGcra, .limit = 1e9, .window = std::chrono::seconds(1), .burst = 1000};
  std::vector<std::string> names;
  for (std::size_t k = 0; k < keys; ++k) names.push_back("rk:0123456789abcdef:client" + std::to_string(k));
  const std::string hot = names[0];
  const rk::Nanos t0{1'000'000'000'000'000'000};

  rk::Limiter limiter(spec);
  rk::store::batched::Batcher batcher(rk::store::redis::make_redis_shared_counters({.url = "redis://127.0.0.1:1"}),
                                      std::make_shared<rk::SystemClock>(),
                                      rk::store::batched::BatcherOptions{.max_keys = 2 * keys, .start_thread = false});
  for (const std::string& k : names) {  // every key held; the first fetch fails, and the store is away
    std::promise<void> p;
    batcher.decide(spec, k, 1, false, t0, [&p](rk::Decision) { p.set_value(); });
    p.get_future().wait();
  }
  std::printf("%d threads, %.1f s each; decisions/s (ratio to the embedded store)\n", threads, seconds);
  for (const bool many : {false, true}) {
    const auto key = [&](std::uint64_t i) -> const std::string& { return many ? names[i % keys] : hot; };
    const double embedded = rate(threads, seconds, [&](int, std::uint64_t i) {
      limiter.check_at(key(i), t0 + rk::Nanos{static_cast<std::int64_t>(i)});
    });
    std::atomic<std::uint64_t> missed{0};
    const double batched = rate(threads, seconds, [&](int, std::uint64_t i) {
      rk::Decision d;
      if (!batcher.try_decide(spec, key(i), 1, false, t0 + rk::Nanos{static_cast<std::int64_t>(i)}, d))
        missed.fetch_add(1, std::memory_order_relaxed);
    });
    std::printf("%-12s embedded %12.0f   batched %12.0f (%.2fx)%s\n", many ? "many keys" : "one hot key", embedded,
                batched, batched / embedded, missed.load() ? "   SOME NOT DECIDED AT ONCE" : "");
  }
  batcher.close();
}
