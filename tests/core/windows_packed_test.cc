// The sliding window counter's 16-byte state (core/windows.h) against the 24-byte state it replaced, kept here as
// the reference: every Decision field and every forgettable() answer the same, over windows of 1 ns to 100 years,
// limits up to the largest the state holds, costs of 0 to 2^64 - 1, clocks that jump back and forth and sit at the
// ends of int64, and absorbed hits (while the count stays within what the state holds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/numeric.h"
#include "core/windows.h"
#include "ratekeeper/params.h"

namespace rk::core {
namespace {

// The 24-byte sliding window counter as it was (session 8), the reference. Its window_start() negated the index
// as a signed number, which overflows at -2^63 (1 ns windows, now = INT64_MIN); here it is done unsigned.
namespace reference {

struct State {
  std::int64_t start_ns = kMinI64;
  std::uint64_t curr = 0;
  std::uint64_t prev = 0;
};

std::int64_t window_start(std::int64_t t, std::int64_t w) {
  const std::int64_t q = floor_div(t, w);
  return q < 0 ? -sat_mul(0 - static_cast<std::uint64_t>(q), w) : sat_mul(static_cast<std::uint64_t>(q), w);
}

std::uint64_t room(std::uint64_t limit, std::uint64_t count) { return count >= limit ? 0 : limit - count; }

void roll(const WindowParams& p, State& s, std::int64_t now) {
  const std::int64_t w = window_start(now, p.window_ns);
  if (w <= s.start_ns) return;
  const bool adjacent = s.start_ns != kMinI64 && sat_sub(w, s.start_ns) == p.window_ns;
  s.prev = adjacent ? s.curr : 0;
  s.curr = 0;
  s.start_ns = w;
}

std::uint64_t weighted_prev(const WindowParams& p, const State& s, std::int64_t now) {
  const std::int64_t left = p.window_ns - std::clamp<std::int64_t>(sat_sub(now, s.start_ns), 0, p.window_ns);
  return static_cast<std::uint64_t>(static_cast<u128>(s.prev) * static_cast<u128>(left) /
                                    static_cast<u128>(p.window_ns));
}

std::int64_t first_offset_below(const WindowParams& p, std::uint64_t weight_of, std::uint64_t target) {
  if (weight_of == 0) return 0;
  const u128 w = static_cast<u128>(p.window_ns);
  const u128 most_left = (static_cast<u128>(target) * w + weight_of - 1) / weight_of - 1;
  return most_left >= w ? 0 : static_cast<std::int64_t>(w - most_left);
}

Decision decide(const WindowParams& p, State& s, std::int64_t now, std::uint64_t cost) {
  roll(p, s, now);
  const std::uint64_t count = sat_add_u(s.curr, weighted_prev(p, s, now));
  Decision d;
  d.limit = static_cast<double>(p.limit);
  d.allowed = count <= p.limit && cost <= p.limit - count;  // past the limit even cost 0 is refused
  if (d.allowed) {
    s.curr += cost;
    d.remaining = static_cast<double>(room(p.limit, count + cost));
  } else {
    d.remaining = static_cast<double>(room(p.limit, count));
    if (cost > p.limit) {
      d.retry_after = kNever;
    } else if (s.curr <= p.limit - cost) {
      const std::int64_t e = first_offset_below(p, s.prev, p.limit - cost - s.curr + 1);
      d.retry_after = Nanos{std::max<std::int64_t>(0, sat_sub(sat_add(s.start_ns, e), now))};
    } else {
      const std::int64_t e = first_offset_below(p, s.curr, p.limit - cost + 1);
      d.retry_after = Nanos{sat_sub(sat_add(sat_add(s.start_ns, p.window_ns), e), now)};
    }
  }
  std::int64_t fresh_at = now;
  if (s.curr > 0) {
    fresh_at = sat_add(sat_add(s.start_ns, p.window_ns), first_offset_below(p, s.curr, 1));
  } else if (s.prev > 0) {
    fresh_at = sat_add(s.start_ns, first_offset_below(p, s.prev, 1));
  }
  d.reset_after = Nanos{std::max<std::int64_t>(0, sat_sub(fresh_at, now))};
  return d;
}

void absorb(const WindowParams& p, State& s, std::int64_t now, std::uint64_t hits) {
  roll(p, s, now);
  s.curr = sat_add_u(s.curr, hits);
}

bool forgettable(const WindowParams& p, const State& s, std::int64_t now) {
  State rolled = s;
  roll(p, rolled, now);
  return rolled.curr == 0 && weighted_prev(p, rolled, now) == 0;
}

}  // namespace reference

constexpr std::uint64_t kMaxU = std::numeric_limits<std::uint64_t>::max();

void expect_same(const Decision& want, const Decision& got) {
  EXPECT_EQ(want.allowed, got.allowed);
  EXPECT_EQ(want.limit, got.limit);
  EXPECT_EQ(want.remaining, got.remaining);
  EXPECT_EQ(want.retry_after, got.retry_after);
  EXPECT_EQ(want.reset_after, got.reset_after);
}

// Runs random histories of one window and limit through both states; returns false at the first difference.
bool same_histories(std::int64_t window, std::uint64_t limit, std::mt19937_64& rng, int histories, int steps) {
  const WindowParams p{.window_ns = window, .limit = limit};
  const std::uint64_t cap = sliding_window_max_count(window);
  auto below = [&](std::uint64_t n) { return n == 0 ? 0 : rng() % n; };
  auto a_cost = [&]() -> std::uint64_t {
    switch (rng() % 8) {
      case 0: return 0;
      case 1: return 1;
      case 2: return limit;
      case 3: return limit + 1;
      case 4: return rng() % 16 == 0 ? kMaxU : limit / 2;
      default: return 1 + below(std::max<std::uint64_t>(1, rng() % 2 ? limit / 8 : limit));
    }
  };
  auto jump = [&](std::int64_t t) -> std::int64_t {
    const std::int64_t small = static_cast<std::int64_t>(below(static_cast<std::uint64_t>(window)));
    switch (rng() % 12) {
      case 0: return t;
      case 1: return sat_add(t, 1);
      case 2: return sat_add(t, window);
      case 3: return sat_add(t, sat_add(window, 1));
      case 4: return sat_add(t, sat_sub(window, 1));
      case 5: return sat_add(t, sat_mul(2, window));
      case 6: return sat_sub(t, small);
      case 7: return sat_sub(t, window);
      case 8: return static_cast<std::int64_t>(rng());  // anywhere, back or forth
      case 9: return rng() % 2 ? kMinI64 : kMaxI64;
      default: return sat_add(t, small);
    }
  };
  const std::int64_t starts[] = {kMinI64, kMinI64 + 1, -window, -1, 0, kMaxI64 - window, kMaxI64};
  for (int h = 0; h < histories; ++h) {
    reference::State want;
    SlidingWindowState got;
    std::int64_t now = h < 7 ? starts[h] : static_cast<std::int64_t>(rng());
    for (int i = 0; i < steps; ++i) {
      if (rng() % 16 == 0) {
        // Hits from elsewhere, as long as the reference's count stays within what the packed state holds.
        const std::uint64_t hits = below(limit + 2);
        reference::State probe = want;
        reference::absorb(p, probe, now, hits);
        if (probe.curr <= cap) {
          want = probe;
          sliding_window_absorb(p, got, now, hits);
        }
      } else {
        const std::uint64_t cost = a_cost();
        expect_same(reference::decide(p, want, now, cost), sliding_window_decide(p, got, now, cost));
      }
      // A probe of the whole state: what a request of each kind would get a window either side of now.
      for (std::int64_t at : {now, sat_sub(now, window), sat_add(now, window / 2 + 1), sat_add(now, window)}) {
        EXPECT_EQ(reference::forgettable(p, want, at), sliding_window_forgettable(p, got, at));
        for (std::uint64_t cost : {std::uint64_t{0}, std::uint64_t{1}, limit}) {
          reference::State w = want;
          SlidingWindowState g = got;
          expect_same(reference::decide(p, w, at, cost), sliding_window_decide(p, g, at, cost));
        }
      }
      if (testing::Test::HasFailure()) {
        ADD_FAILURE() << "window " << window << " limit " << limit << " history " << h << " step " << i << " now "
                      << now;
        return false;
      }
      now = jump(now);
    }
  }
  return true;
}

std::vector<std::int64_t> windows_to_try(std::mt19937_64& rng) {
  constexpr std::int64_t kDay = 86'400'000'000'000;
  std::vector<std::int64_t> w = {1,
                                 2,
                                 3,
                                 7,
                                 8,
                                 1000,
                                 65'535,
                                 65'536,
                                 65'537,
                                 1'000'000,
                                 999'999'937,
                                 1'000'000'000,
                                 3'600'000'000'000,
                                 kDay,
                                 7 * kDay,
                                 30 * kDay,
                                 365 * kDay,
                                 kMaxDuration.count()};
  for (int i = 0; i < 12; ++i) {
    const int bits = 1 + static_cast<int>(rng() % 61);  // log-uniform up to 2^61, below 100 years
    w.push_back(std::min<std::int64_t>(kMaxDuration.count(), 1 + static_cast<std::int64_t>(rng() >> (64 - bits))));
  }
  return w;
}

TEST(SlidingWindowPacked, SameDecisionsAsTheTwentyFourByteState) {
  std::mt19937_64 rng(20261125);
  for (std::int64_t window : windows_to_try(rng)) {
    const std::uint64_t most =
        std::min<std::uint64_t>(static_cast<std::uint64_t>(kMaxLimit), sliding_window_max_count(window));
    const int bits = 1 + static_cast<int>(rng() % 40);
    const std::uint64_t limits[] = {1, 2, 3, 10, std::min(most, 1 + (rng() >> (64 - bits))), most};
    for (std::uint64_t limit : limits) ASSERT_TRUE(same_histories(window, limit, rng, 8, 50));
  }
}

// The largest count the state holds, as windows.h gives it: the layout's arithmetic, and above kMaxLimit from
// 65.536 µs on (only windows shorter than that need validation to cap the limit below 10^12).
TEST(SlidingWindowPacked, LargestCount) {
  EXPECT_EQ(sliding_window_max_count(1), (std::uint64_t{1} << 32) - 1);
  EXPECT_EQ(sliding_window_max_count(3), (std::uint64_t{1} << 32) - 1);
  EXPECT_EQ(sliding_window_max_count(4), (std::uint64_t{1} << 33) - 1);
  EXPECT_EQ(sliding_window_max_count(65'535), (std::uint64_t{1} << 39) - 1);
  EXPECT_EQ(sliding_window_max_count(65'536), (std::uint64_t{1} << 40) - 1);
  EXPECT_GT(sliding_window_max_count(65'536), static_cast<std::uint64_t>(kMaxLimit));
  EXPECT_EQ(sliding_window_max_count(1'000'000'000), (std::uint64_t{1} << 40) - 1);
  EXPECT_EQ(sliding_window_max_count(kMaxDuration.count()), (std::uint64_t{1} << 40) - 1);
}

// Absorbed hits past the largest count saturate there (the 24-byte state saturated at 2^64 - 1): the key is
// refused, and stays so, as the reference saturated at the same count is.
TEST(SlidingWindowPacked, AbsorbSaturatesAtTheLargestCount) {
  const WindowParams p{.window_ns = 1'000'000'000, .limit = 10};
  const std::uint64_t cap = sliding_window_max_count(p.window_ns);
  SlidingWindowState got;
  reference::State want{.start_ns = 0, .curr = cap};
  sliding_window_absorb(p, got, 5, kMaxU);
  sliding_window_absorb(p, got, 6, kMaxU);
  for (std::int64_t at : {std::int64_t{7}, p.window_ns + 1, 2 * p.window_ns - 1, 2 * p.window_ns}) {
    EXPECT_EQ(reference::forgettable(p, want, at), sliding_window_forgettable(p, got, at));
    reference::State w = want;
    SlidingWindowState g = got;
    expect_same(reference::decide(p, w, at, 1), sliding_window_decide(p, g, at, 1));
  }
  EXPECT_FALSE(sliding_window_decide(p, got, 8, 1).allowed);
}

TEST(SlidingWindowPacked, FreshIsAllZero) {
  const SlidingWindowState s;
  EXPECT_EQ(s.lo, 0u);
  EXPECT_EQ(s.hi, 0u);
  for (std::int64_t window : {std::int64_t{1}, std::int64_t{7}, kMaxDuration.count()}) {
    const WindowParams p{.window_ns = window, .limit = 5};
    for (std::int64_t at : {kMinI64, std::int64_t{0}, kMaxI64}) EXPECT_TRUE(sliding_window_forgettable(p, s, at));
  }
}

}  // namespace
}  // namespace rk::core
