// The state codec (core/state_codec.h): every algorithm's states, from random runs of the algorithm itself and from
// the corners of each field, come back from their bytes equal; every truncation and every impossible state is
// refused.
#include "core/state_codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "support/test_util.h"

namespace rk::core {
namespace {

using namespace rk::test;

bool same(const EarrrlState& a, const EarrrlState& b) {
  return std::bit_cast<std::uint64_t>(a.n) == std::bit_cast<std::uint64_t>(b.n) && a.t_ns == b.t_ns;
}
bool same(const GcraState& a, const GcraState& b) { return a.tat_ns == b.tat_ns; }
bool same(const FluidState& a, const FluidState& b) {
  return a.empty_ns == b.empty_ns && std::bit_cast<std::uint64_t>(a.frac) == std::bit_cast<std::uint64_t>(b.frac);
}
bool same(const FixedWindowState& a, const FixedWindowState& b) {
  return a.start_ns == b.start_ns && a.count == b.count;
}
bool same(const SlidingWindowState& a, const SlidingWindowState& b) { return a.lo == b.lo && a.hi == b.hi; }
bool same(const SlidingLogState& a, const SlidingLogState& b) {
  if (a.size() != b.size() || a.sum() != b.sum()) return false;
  for (std::uint32_t i = 0; i < a.size(); ++i) {
    if (a.at(i).t_ns != b.at(i).t_ns || a.at(i).cost != b.at(i).cost) return false;
  }
  return true;
}

// Encodes s after a prefix, decodes it back, checks equality, that exactly its bytes were consumed, and that every
// strict prefix of its bytes is refused.
template <class Algo>
void round_trip(const typename Algo::State& s) {
  std::string bytes = "prefix";
  encode_state<Algo>(s, bytes);
  bytes += "tail";
  std::string_view in = std::string_view(bytes).substr(6);
  typename Algo::State back;
  ASSERT_TRUE(decode_state<Algo>(in, back));
  EXPECT_TRUE(same(s, back));
  EXPECT_EQ(in, "tail");
  const std::size_t len = bytes.size() - 10;
  for (std::size_t cut = 0; cut < len; ++cut) {
    std::string_view part = std::string_view(bytes).substr(6, cut);
    typename Algo::State ignored;
    EXPECT_FALSE(decode_state<Algo>(part, ignored)) << "cut at " << cut;
  }
}

// States as the algorithm makes them: random costs at random times on a random limit, each state round-tripped.
template <class Algo>
void random_runs(Algorithm a) {
  std::mt19937_64 rng(20);
  for (int run = 0; run < 20; ++run) {
    LimitSpec spec{.algorithm = a,
                   .limit = static_cast<double>(1 + rng() % 50),
                   .window = Nanos{sec(0.001 + static_cast<double>(rng() % 5000) / 1000)}};
    if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) spec.burst = static_cast<double>(rng() % 10);
    if (a == Algorithm::kEarrrl) spec.half_life = Nanos{sec(0.001 + static_cast<double>(rng() % 5000) / 1000)};
    const auto errors = validate(spec);
    ASSERT_TRUE(errors.empty()) << errors[0].message;
    with_algorithm(spec, [&]<class A>(const typename A::Params& p) {
      if constexpr (std::is_same_v<A, Algo>) {
        typename A::State s;
        std::int64_t now = static_cast<std::int64_t>(rng() >> 2) - (std::int64_t{1} << 61);
        for (int i = 0; i < 200; ++i) {
          now += static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(sec(0.2)));
          A::decide(p, s, now, rng() % 4);
          round_trip<A>(s);
          std::string bytes;
          encode_state<A>(s, bytes);
          ASSERT_LE(bytes.size(), max_encoded_bytes(a, spec.limit));
        }
      } else {
        ADD_FAILURE() << "the spec did not pick the algorithm";
      }
    });
  }
}

TEST(StateCodec, RoundTripsRandomRuns) {
  random_runs<Earrrl>(Algorithm::kEarrrl);
  random_runs<Gcra>(Algorithm::kGcra);
  random_runs<LeakyQueue>(Algorithm::kLeakyQueue);
  random_runs<Fluid>(Algorithm::kTokenBucket);
  random_runs<Fluid>(Algorithm::kLeakyBucket);
  random_runs<FixedWindow>(Algorithm::kFixedWindow);
  random_runs<SlidingLog>(Algorithm::kSlidingLog);
  random_runs<SlidingWindow>(Algorithm::kSlidingWindow);
}

TEST(StateCodec, RoundTripsCorners) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMaxU = std::numeric_limits<std::uint64_t>::max();
  for (std::int64_t t : {kMinI64, std::int64_t{-1}, std::int64_t{0}, kMax}) {
    round_trip<Earrrl>(EarrrlState{});
    round_trip<Earrrl>(EarrrlState{.n = 1e300, .t_ns = t});
    round_trip<Earrrl>(EarrrlState{.n = 5e-324, .t_ns = t});
    round_trip<Gcra>(GcraState{.tat_ns = t});
    round_trip<LeakyQueue>(GcraState{.tat_ns = t});
    round_trip<Fluid>(FluidState{.empty_ns = t, .frac = std::nextafter(1.0, 0.0)});
    round_trip<FixedWindow>(FixedWindowState{.start_ns = t, .count = kMaxU});
    round_trip<SlidingWindow>(SlidingWindowState{.lo = static_cast<std::uint64_t>(t), .hi = kMaxU});
  }
  SlidingLogState log;
  round_trip<SlidingLog>(log);
  log.push(kMinI64, kMaxU - 1);
  log.push(kMax, 1);
  round_trip<SlidingLog>(log);
}

template <class Algo>
bool decodes(const std::string& bytes) {
  std::string_view in = bytes;
  typename Algo::State s;
  return decode_state<Algo>(in, s);
}

std::string f64(double v) {
  std::string out;
  put_u64(std::bit_cast<std::uint64_t>(v), out);
  return out;
}
std::string u64(std::uint64_t v) {
  std::string out;
  put_u64(v, out);
  return out;
}
std::string u32(std::uint32_t v) {
  std::string out;
  put_u32(v, out);
  return out;
}

TEST(StateCodec, RefusesImpossibleStates) {
  EXPECT_TRUE(decodes<Earrrl>(f64(2.5) + u64(7)));
  EXPECT_FALSE(decodes<Earrrl>(f64(std::nan("")) + u64(7)));
  EXPECT_FALSE(decodes<Earrrl>(f64(std::numeric_limits<double>::infinity()) + u64(7)));
  EXPECT_FALSE(decodes<Earrrl>(f64(-1) + u64(7)));
  EXPECT_TRUE(decodes<Fluid>(u64(7) + f64(0.5)));
  EXPECT_FALSE(decodes<Fluid>(u64(7) + f64(1.0)));
  EXPECT_FALSE(decodes<Fluid>(u64(7) + f64(-0.25)));
  EXPECT_FALSE(decodes<Fluid>(u64(7) + f64(std::nan(""))));
  // Logs: in order, positive costs, a sum that fits, a count within the bound and the bytes present.
  EXPECT_TRUE(decodes<SlidingLog>(u32(2) + u64(1) + u64(3) + u64(2) + u64(4)));
  EXPECT_FALSE(decodes<SlidingLog>(u32(2) + u64(2) + u64(3) + u64(2) + u64(4)));      // equal times
  EXPECT_FALSE(decodes<SlidingLog>(u32(2) + u64(2) + u64(3) + u64(1) + u64(4)));      // backwards
  EXPECT_FALSE(decodes<SlidingLog>(u32(1) + u64(1) + u64(0)));                        // zero cost
  EXPECT_FALSE(decodes<SlidingLog>(u32(2) + u64(1) + u64(~0ULL) + u64(2) + u64(1)));  // sum overflows
  EXPECT_FALSE(decodes<SlidingLog>(u32(kMaxLogEntries + 1)));
  EXPECT_FALSE(decodes<SlidingLog>(u32(0xffffffff) + u64(1) + u64(1)));  // a huge count, few bytes: no allocation
}

}  // namespace
}  // namespace rk::core
