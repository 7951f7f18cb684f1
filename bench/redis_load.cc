// bench/redis_load.cc: decisions per second through ratekeeper's Redis store (the same code path as
// `ratekeeper serve --redis`: the Lua script, the pipelining client), with `--inflight` decisions always
// outstanding, over `--keys` distinct keys, for `--seconds`. Prints one line: "decisions_per_s=... p99_us=...".
// `--print-args ALGORITHM` prints the script's ARGV for one decision (Redis time, cost 1), `--print-script
// ALGORITHM` the script itself (the EVAL form), and `--print-library ALGORITHM` its function library (FUNCTION LOAD;
// its first line names the function), for redis-benchmark. `--window-s S` sets the window (default 1 s), `--limit L`
// the limit per window (default: one that never refuses), `--populate N` makes one decision on each of N distinct
// keys and exits (bench/compare: Redis's used_memory per key).
// `--spin-us N` polls for answers N µs before the client's thread sleeps (--redis-spin; docs/redis.md, "The client").
// `--packed-hashes N` packs the states into N hashes (--redis-packed-hashes; docs/redis.md, "Packed states").
//
// `--tls-ca FILE` checks a rediss:// URL's server against that CA (bench/redis_tls_bench.py).
//
//   rk_redis_load --url redis://127.0.0.1:6379 --algorithm earrrl --inflight 256 --keys 10000 --seconds 5
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/remote.h"
#include "store/redis/algorithm_scripts.h"

namespace {

using Clock = std::chrono::steady_clock;

// `limit` 0: generous limits, so that the common case (allowed) is what is timed, as in the core benchmark.
rk::LimitSpec spec_for(rk::Algorithm a, double window_s = 1, double limit = 0) {
  rk::LimitSpec s{.algorithm = a, .limit = 1e9};
  s.window = std::chrono::duration_cast<rk::Nanos>(std::chrono::duration<double>(window_s));
  if (a == rk::Algorithm::kEarrrl) s.half_life = std::chrono::seconds(10);
  if (a == rk::Algorithm::kSlidingLog) s.limit = 1000;
  if (limit > 0) s.limit = limit;
  return s;
}

struct Load {
  std::shared_ptr<rk::store::remote::RemoteStore> store;
  rk::LimitSpec spec;
  int keys = 10000;
  Clock::time_point until;
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;           // under mu
  std::vector<double> us;    // latencies, under mu
  std::uint64_t done = 0;    // under mu
  std::uint64_t failed = 0;  // under mu

  void next(std::uint64_t n) {
    if (Clock::now() >= until) {
      std::lock_guard lock(mu);
      if (--running == 0) cv.notify_all();
      return;
    }
    const auto start = Clock::now();
    std::vector<rk::store::remote::RemoteOp> ops{
        {&spec, "rk:bench:" + std::to_string(n % static_cast<std::uint64_t>(keys)), 1, false}};
    store->decide(std::move(ops), rk::Nanos{0}, [this, n, start](std::vector<rk::store::remote::RemoteResult> r) {
      const double took = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      {
        std::lock_guard lock(mu);
        ++done;
        failed += r.empty() || r[0].status != rk::store::remote::RemoteResult::Status::kOk;
        if (us.size() < 5'000'000) us.push_back(took);
      }
      next(n * 6364136223846793005ULL + 1442695040888963407ULL);
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string url = "redis://127.0.0.1:6379", algorithm = "earrrl", print_args, tls_ca;
  int inflight = 256, keys = 10000, connections = 2, populate = 0, spin_us = 0;
  std::uint32_t packed_hashes = 0;
  double seconds = 5, window_s = 1, limit = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--url") url = v;
    else if (a == "--algorithm") algorithm = v;
    else if (a == "--inflight") inflight = std::stoi(v);
    else if (a == "--keys") keys = std::stoi(v);
    else if (a == "--seconds") seconds = std::stod(v);
    else if (a == "--connections") connections = std::stoi(v);
    else if (a == "--spin-us") spin_us = std::stoi(v);
    else if (a == "--tls-ca") tls_ca = v;
    else if (a == "--window-s") window_s = std::stod(v);
    else if (a == "--limit") limit = std::stod(v);
    else if (a == "--populate") populate = std::stoi(v);
    else if (a == "--packed-hashes") packed_hashes = static_cast<std::uint32_t>(std::stoul(v));
    else if (a == "--print-args") print_args = v;
    else if (a == "--print-script") {
      const auto alg = rk::parse_algorithm(v);
      if (!alg) return 2;
      std::cout << rk::store::redis::script_for(*alg).source;
      return 0;
    } else if (a == "--print-library") {
      const auto alg = rk::parse_algorithm(v);
      if (!alg) return 2;
      std::cout << rk::store::redis::script_for(*alg).library;
      return 0;
    } else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  if (!print_args.empty()) {
    const auto alg = rk::parse_algorithm(print_args);
    if (!alg) return 2;
    for (const auto& s : rk::store::redis::script_args(spec_for(*alg, window_s, limit), std::nullopt, 1, false)) {
      std::cout << s << "\n";
    }
    return 0;
  }
  const auto alg = rk::parse_algorithm(algorithm);
  if (!alg) {
    std::cerr << "unknown algorithm " << algorithm << "\n";
    return 2;
  }
  Load load;
  load.store = rk::store::redis::make_redis_remote({.url = url,
                                                    .tls = {.ca_file = tls_ca},
                                                    .timeout = std::chrono::seconds(2),
                                                    .connections = connections,
                                                    .spin = std::chrono::microseconds(spin_us),
                                                    .packed_hashes = packed_hashes});
  load.spec = spec_for(*alg, window_s, limit);
  load.keys = keys;
  if (populate > 0) {
    std::mutex mu;
    std::condition_variable cv;
    int outstanding = 0;
    for (int i = 0; i < populate; ++i) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return outstanding < inflight; });
      ++outstanding;
      lock.unlock();
      std::vector<rk::store::remote::RemoteOp> ops{{&load.spec, "rk:pop:" + std::to_string(i), 1, false}};
      load.store->decide(std::move(ops), rk::Nanos{0}, [&](std::vector<rk::store::remote::RemoteResult>) {
        std::lock_guard l(mu);
        --outstanding;
        cv.notify_all();
      });
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return outstanding == 0; });
    lock.unlock();
    load.store->close();
    return 0;
  }
  // Warm up (connections, script load), then measure.
  load.until = Clock::now() + std::chrono::milliseconds(500);
  load.running = inflight;
  for (int i = 0; i < inflight; ++i) load.next(static_cast<std::uint64_t>(i) * 7919);
  {
    std::unique_lock lock(load.mu);
    load.cv.wait(lock, [&] { return load.running == 0; });
    load.us.clear();
    load.done = load.failed = 0;
  }
  const auto start = Clock::now();
  load.until = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  load.running = inflight;
  for (int i = 0; i < inflight; ++i) load.next(static_cast<std::uint64_t>(i) * 104729 + 1);
  std::unique_lock lock(load.mu);
  load.cv.wait(lock, [&] { return load.running == 0; });
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(load.us.begin(), load.us.end());
  const double p99 = load.us.empty() ? 0 : load.us[load.us.size() * 99 / 100];
  std::printf("decisions_per_s=%.0f p99_us=%.1f failed=%llu\n", static_cast<double>(load.done) / elapsed, p99,
              static_cast<unsigned long long>(load.failed));
  lock.unlock();
  load.store->close();
  return load.failed == 0 ? 0 : 1;
}
