// bench/fixed_work.cc: a fixed amount of work for before/after comparisons that load does not move: rk_bench's
// 1,000,000 keys (16 bytes each, filled at time 0, the same limits and time steps), then D decisions, timed alone in
// CPU and wall ns per decision, and alone instrumented under callgrind (instructions and simulated cache misses per
// decision are then the callgrind totals / D: the machines these run on have no hardware counters).
//
//   rk_fixed_work ALGORITHM MODE D [KEYS]
//     MODE: one (check_at, Fields::kAllButResetAfter, as rk_bench), oneall (Fields::kAll), manybrief (check_many_at
//           of 16, kAllButResetAfter, as rk_bench), many (check_many_at of 16, kAll)
//   For instance (one line): valgrind --tool=callgrind --instr-atstart=no --cache-sim=yes --D1=65536,8,64
//   --LL=33554432,16,64 build/release/bench/rk_fixed_work earrrl one 50000
#include <time.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ratekeeper/limiter.h"

namespace {

double ns_of(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: rk_fixed_work ALGORITHM one|oneall|many|manybrief DECISIONS [KEYS]\n");
    return 2;
  }
  const std::string mode = argv[2];
  const long decisions = std::atol(argv[3]);
  const std::size_t nkeys = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1'000'000;
  const auto algorithm = rk::parse_algorithm(argv[1]);
  const bool known_mode = mode == "one" || mode == "oneall" || mode == "many" || mode == "manybrief";
  if (!algorithm || !known_mode || decisions <= 0 || nkeys == 0 || nkeys > 2'000'000) {
    std::fprintf(stderr, "rk_fixed_work: unknown algorithm or mode, or a count out of range (keys: 1 to 2000000)\n");
    return 2;
  }
  const rk::Algorithm a = *algorithm;
  // As rk_bench's spec() and step_ns().
  rk::LimitSpec s{.algorithm = a, .limit = 1e6, .window = std::chrono::seconds(1)};
  if (a == rk::Algorithm::kEarrrl) s.half_life = std::chrono::seconds(10);
  if (a == rk::Algorithm::kGcra || a == rk::Algorithm::kLeakyQueue) s.burst = 100'000;
  if (a == rk::Algorithm::kSlidingLog) s.limit = 1000;
  const std::int64_t step = a == rk::Algorithm::kSlidingLog ? 10'000'000 : 10'000;
  std::string buffer(nkeys * 16 + 1, '\0');
  std::vector<std::string_view> keys;
  for (std::size_t i = 0; i < nkeys; ++i) {
    std::snprintf(&buffer[i * 16], 17, "user:%011u", static_cast<unsigned>(i));  // nkeys <= max_keys: 11 digits
    keys.emplace_back(buffer.data() + i * 16, 16);
  }
  rk::Limiter l(s, rk::StoreOptions{.max_keys = 2'000'000});
  for (const auto k : keys) l.check_at(k, rk::Nanos{0});
  std::int64_t now = 1'000'000'000'000;
  std::size_t i = 0;
  long allowed = 0;
  constexpr long kWarm = 200'000;  // not measured
  for (long d = 0; d < kWarm; ++d) {
    allowed += l.check_at(keys[i], rk::Nanos{now += step}, 1, rk::Fields::kAllButResetAfter).allowed;
    if (++i == nkeys) i = 0;
  }
  const bool many = mode == "many" || mode == "manybrief";
  const rk::Fields fields = mode == "many" || mode == "oneall" ? rk::Fields::kAll : rk::Fields::kAllButResetAfter;
  rk::Decision out[16];
  const double c0 = ns_of(CLOCK_THREAD_CPUTIME_ID), w0 = ns_of(CLOCK_MONOTONIC);
  CALLGRIND_START_INSTRUMENTATION;
  if (many) {
    i -= i % 16;
    for (long d = 0; d < decisions; d += 16) {
      const std::size_t m = std::min<std::size_t>(16, nkeys - i);
      l.check_many_at({keys.data() + i, m}, {}, rk::Nanos{now += 16 * step}, {out, m}, fields);
      for (std::size_t k = 0; k < m; ++k) allowed += out[k].allowed;
      if ((i += 16) >= nkeys) i = 0;
    }
  } else {
    for (long d = 0; d < decisions; ++d) {
      allowed += l.check_at(keys[i], rk::Nanos{now += step}, 1, fields).allowed;
      if (++i == nkeys) i = 0;
    }
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  const double c1 = ns_of(CLOCK_THREAD_CPUTIME_ID), w1 = ns_of(CLOCK_MONOTONIC);
  std::printf("%s %s cpu %.1f ns wall %.1f ns allowed %.4f\n", argv[1], mode.c_str(),
              (c1 - c0) / static_cast<double>(decisions), (w1 - w0) / static_cast<double>(decisions),
              static_cast<double>(allowed) / static_cast<double>(decisions + kWarm));
  return 0;
}
