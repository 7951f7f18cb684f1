// tests/support/test_util.h: small helpers shared by the tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include "ratekeeper/params.h"
#include "ratekeeper/units.h"

namespace rk::test {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t sec(double s) { return static_cast<std::int64_t>(s * 1e9); }
constexpr std::int64_t kSec = 1'000'000'000;

// The process's resident memory (VmRSS), and its peak (VmHWM) since reset_peak_rss(), in bytes; Linux only (-1
// where /proc/self/status has no such line).
inline std::int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(field + ":")) return std::stoll(line.substr(field.size() + 1)) * 1024;  // "  1234 kB"
  }
  return -1;
}
inline std::int64_t rss_bytes() { return status_bytes("VmRSS"); }
inline std::int64_t peak_rss_bytes() { return status_bytes("VmHWM"); }
inline void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM back to VmRSS

// 10 a second under algorithm `a`: the buckets and GCRA hold 10 at once, as the windows do; earrrl's half-life 1 s.
inline LimitSpec ten_a_second(Algorithm a, bool count_refused) {
  LimitSpec s{.algorithm = a, .limit = 10, .window = Nanos{seconds(1)}, .count_refused = count_refused};
  switch (a) {
    case Algorithm::kEarrrl: s.half_life = Nanos{seconds(1)}; break;
    case Algorithm::kGcra:
    case Algorithm::kLeakyQueue: s.burst = 9; break;
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: s.capacity = 10; break;
    default: break;
  }
  return s;
}

}  // namespace rk::test
