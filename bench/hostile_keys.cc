// bench/hostile_keys.cc: the in-process store under hostile keys, for docs/reliability.md. Counts, not timings
// (apart from the wall time it reports for the record):
//   1. a flood of N distinct keys (default 10,000,000) through an EARRRL Limiter bounded at 1,000,000 keys (the
//      service's default --max-keys), with an abuser hammering throughout: keys held, memory_bytes and the
//      process's RSS every N/10 keys, and whether the abuser was ever let through;
//   2. the probe lengths of the same flood's last 1,000,000 keys in a ShardedStore with a random seed;
//   3. 2,000 keys made to collide under a known seed: probe lengths under that seed and under a random one.
//
//   build/release/bench/rk_hostile_keys [N]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ratekeeper/clock.h"
#include "ratekeeper/limiter.h"
#include "store/memory/sharded_store.h"

namespace {

struct Counter {
  std::uint64_t value = 0;
};

std::size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

std::string flood_key(std::size_t i) { return "198.51." + std::to_string(i); }

void flood(std::size_t n) {
  constexpr std::size_t kBound = 1'000'000;
  auto clock = std::make_shared<rk::ManualClock>();
  rk::Limiter limiter(
      rk::LimitSpec{.algorithm = rk::Algorithm::kEarrrl, .limit = 5, .half_life = std::chrono::seconds(2)},
      rk::StoreOptions{.max_keys = kBound}, clock);
  std::printf("1. flood: %zu distinct keys, EARRRL, max_keys %zu, an abuser every 100 keys\n", n, kBound);
  std::printf("%12s %10s %14s %12s %10s\n", "keys sent", "held", "memory_bytes", "rss_bytes", "evictions");
  const auto start = std::chrono::steady_clock::now();
  std::size_t abuser_allowed = 0, abuser_attempts = 0;
  rk::Nanos now{0};
  for (int i = 0; i < 100; ++i) limiter.check_at("abuser", now);
  for (std::size_t i = 0; i < n; ++i) {
    now += rk::Nanos{10'000};  // 100,000 keys a second
    limiter.check_at(flood_key(i), now);
    if (i % 100 == 0) {
      ++abuser_attempts;
      abuser_allowed += limiter.check_at("abuser", now).allowed;  // 1,000 a second against a limit of 5
    }
    if ((i + 1) % (n / 10) == 0 || i + 1 == kBound) {
      const rk::StoreStats st = limiter.stats();
      std::printf("%12zu %10zu %14zu %12zu %10llu\n", i + 1, st.keys, st.memory_bytes, rss_bytes(),
                  static_cast<unsigned long long>(st.evictions));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("abuser: %zu of %zu attempts allowed during the flood; %.1f s, %.0f ns a decision\n\n", abuser_allowed,
              abuser_attempts, seconds, seconds * 1e9 / static_cast<double>(n + abuser_attempts));
}

void print_probes(const char* what, const rk::store::memory::ShardedStore<Counter>::ProbeStats& st) {
  std::printf("%-44s keys %8zu  mean probes %7.3f  longest %6zu\n", what, st.keys,
              static_cast<double>(st.total) / static_cast<double>(st.keys), st.longest);
}

void probes(std::size_t n) {
  rk::store::memory::ShardedStore<Counter> m(rk::StoreOptions{.max_keys = 1'000'000});
  for (std::size_t i = 0; i < n; ++i) m.update(flood_key(i), [](Counter& c) { return ++c.value; });
  std::printf("2. probe lengths (index slots a lookup examines)\n");
  print_probes("flood, random seed, after all keys:", m.probe_stats());
}

void collisions() {
  constexpr std::uint64_t kKnown = 0x0123456789abcdefULL;
  std::vector<std::string> keys;
  std::size_t tried = 0;
  for (std::uint64_t i = 0; keys.size() < 2000; ++i, ++tried) {
    std::string k = "attacker-" + std::to_string(i);
    if ((rk::base::hash_key(k, kKnown) & 0xFFF) == 0) keys.push_back(std::move(k));
  }
  auto run = [&](std::uint64_t seed) {
    rk::store::memory::ShardedStore<Counter> m(rk::StoreOptions{.max_keys = 8192, .shards = 1, .hash_seed = seed});
    for (const auto& k : keys) m.update(k, [](Counter& c) { return ++c.value; });
    return m.probe_stats();
  };
  std::printf("3. 2,000 keys colliding under a known seed (%zu candidates hashed to find them), one shard\n", tried);
  print_probes("under the known seed:", run(kKnown));
  print_probes("under a random seed (the store's default):", run(0));
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
  if (n < 10) {
    std::fprintf(stderr, "usage: rk_hostile_keys [keys >= 10]\n");
    return 2;
  }
  flood(n);
  probes(n);
  collisions();
  return 0;
}
