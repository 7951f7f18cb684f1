#include "core/windows.h"

#include <algorithm>
#include <bit>
#include <chrono>

namespace rk::core {

namespace {

std::uint64_t room(std::uint64_t limit, std::uint64_t count) { return count >= limit ? 0 : limit - count; }

struct Bounds {
  std::int64_t start, end;
};

// The fixed window holding `t`: multiples of the window, or calendar weeks (from Monday), months or years (UTC).
Bounds fixed_bounds(const WindowParams& p, std::int64_t t) {
  using namespace std::chrono;
  constexpr std::int64_t kDay = 86'400'000'000'000;
  switch (p.calendar) {
    case Calendar::kNone: {
      const std::int64_t start = window_start(t, p.window_ns);
      return {start, sat_add(start, p.window_ns)};
    }
    case Calendar::kWeek: {
      // 1970-01-01 was a Thursday: Mondays fall 3 days before multiples of a week since the epoch.
      const std::int64_t start = sat_sub(window_start(sat_add(t, 3 * kDay), 7 * kDay), 3 * kDay);
      return {start, sat_add(start, 7 * kDay)};
    }
    case Calendar::kMonth:
    case Calendar::kYear: {
      const sys_days day = floor<days>(sys_time<nanoseconds>(nanoseconds(t)));
      const year_month_day ymd{day};
      const year_month_day first = p.calendar == Calendar::kMonth ? ymd.year() / ymd.month() / 1
                                                                  : ymd.year() / January / 1;
      const year_month_day next = p.calendar == Calendar::kMonth ? first + months(1) : first + years(1);
      auto ns = [](const year_month_day& d) {
        return duration_cast<nanoseconds>(sys_days(d).time_since_epoch()).count();
      };
      return {ns(first), ns(next)};
    }
  }
  return {t, t};
}

// Moves the state on to the window holding `now`; an earlier `now` stays in the latest window seen.
void roll_fixed(const WindowParams& p, FixedWindowState& s, std::int64_t now) {
  const std::int64_t w = fixed_bounds(p, now).start;
  if (w > s.start_ns) {
    s.start_ns = w;
    s.count = 0;
  }
}

// The sliding window's state unpacked: the window's index and counts, and the window's start, q * W saturated into
// [kMinI64 + 1, kMaxI64] as window_start() gives it. Windows are compared by their starts, not their indices, as
// the 24-byte state did: at the low end of time two indices can share a start (saturation), and then they are one
// window. The fresh state's index (all-zero bits, below every window's) starts at kMinI64 + 1 too, with no count:
// every answer from it is the one the 24-byte state's kMinI64 gave, rolled or not.
struct Sliding {
  std::int64_t q;
  std::uint64_t curr, prev;
  std::int64_t start_ns;  // set by roll_sliding(), which every use of the state begins with
};

// |q| <= 2^63 / 2^k with k = floor(log2 W), so q fits in q_bits = 64 - k bits, two's complement; the counts take
// the other 64 + k: curr 32 + k / 2 bits, prev the rest (as many or one more). k stops at kLongK: from 2^16 ns on,
// counts of 40 bits hold every limit (10^12 < 2^40), and one layout for every such window lets the compiler fold
// its masks and shifts into constants (sliding_window_decide's usual case).
constexpr int kLongK = 16;

struct Layout {
  int k;                    // q_bits = 64 - k
  int prev_shift;           // where prev starts in `hi`: q_bits + count_bits - 64 = 32 - ceil(k / 2)
  std::uint64_t q_mask;     // q_bits ones
  std::uint64_t half;       // 2^(q_bits - 1): the bias
  std::uint64_t count_max;  // count_bits ones
};

[[gnu::always_inline]] inline int layout_k(std::int64_t window_ns) {
  return std::min(63 - std::countl_zero(static_cast<std::uint64_t>(window_ns)), kLongK);
}

[[gnu::always_inline]] inline Layout layout_of(int k) {
  constexpr std::uint64_t kOnes = ~std::uint64_t{0};
  return {k, 32 - (k + 1) / 2, kOnes >> k, std::uint64_t{1} << (63 - k), kOnes >> (32 - k / 2)};
}

[[gnu::always_inline]] inline Layout layout(std::int64_t window_ns) { return layout_of(layout_k(window_ns)); }

[[gnu::always_inline]] inline std::int64_t start_of(std::int64_t q, std::int64_t window_ns) {
  // As window_start(), with the negation done unsigned (q can be -2^63 when W is 1 ns).
  const std::uint64_t magnitude = q < 0 ? 0 - static_cast<std::uint64_t>(q) : static_cast<std::uint64_t>(q);
  return q < 0 ? -sat_mul(magnitude, window_ns) : sat_mul(magnitude, window_ns);
}

// The 128 bits, low first: q (biased) in q_bits, curr in count_bits, prev in the rest; q_bits + count_bits is
// 64 to 96, so q is in `lo`, prev in `hi`, and curr straddles them. In 64-bit words, every shift below 64.
[[gnu::always_inline]] inline Sliding unpack(const Layout& l, const SlidingWindowState& s) {
  Sliding u;
  u.q = static_cast<std::int64_t>((s.lo & l.q_mask) - l.half);
  // (lo >> q_bits) | (hi << (64 - q_bits)), for q_bits of 64 too.
  u.curr = (((s.lo >> 1) >> (63 - l.k)) | (s.hi << l.k)) & l.count_max;
  u.prev = s.hi >> l.prev_shift;
  return u;
}

// curr saturates at the largest count it holds (absorbed hits; a decision stays within the limit); prev is
// always a former curr.
[[gnu::always_inline]] inline void pack(const Layout& l, const Sliding& u, SlidingWindowState& s) {
  const std::uint64_t curr = std::min(u.curr, l.count_max);
  s.lo = ((static_cast<std::uint64_t>(u.q) + l.half) & l.q_mask) | ((curr << (63 - l.k)) << 1);
  s.hi = (curr >> l.k) | (u.prev << l.prev_shift);
}

[[gnu::always_inline]] inline void roll_sliding(const WindowParams& p, Sliding& s, std::int64_t now) {
  const std::int64_t q = floor_div(now, p.window_ns);
  const std::int64_t w = start_of(q, p.window_ns);
  s.start_ns = w;
  if (q == s.q) return;  // the usual case: the same window
  s.start_ns = start_of(s.q, p.window_ns);
  if (w <= s.start_ns) return;
  // A fresh state has no count: whether it is "adjacent" changes nothing.
  s.prev = sat_sub(w, s.start_ns) == p.window_ns ? s.curr : 0;
  s.curr = 0;
  s.q = q;
  s.start_ns = w;
}

std::int64_t elapsed_in_window(const WindowParams& p, const Sliding& s, std::int64_t now) {
  return std::clamp<std::int64_t>(sat_sub(now, s.start_ns), 0, p.window_ns);
}

// floor(prev * (W - e) / W), exactly.
std::uint64_t weighted_prev(const WindowParams& p, const Sliding& s, std::int64_t now) {
  if (s.prev == 0) return 0;  // a key seen in no adjacent window: no division
  const std::int64_t left = p.window_ns - elapsed_in_window(p, s, now);
  return static_cast<std::uint64_t>(
      div_u128(static_cast<u128>(s.prev) * static_cast<u128>(left), static_cast<u128>(p.window_ns)));
}

// The smallest offset e into a window at whose start `weight_of` requests are the previous window's count,
// such that floor(weight_of * (W - e) / W) <= target - 1, i.e. weight_of * (W - e) < target * W.
std::int64_t first_offset_below(const WindowParams& p, std::uint64_t weight_of, std::uint64_t target) {
  if (weight_of == 0) return 0;
  const u128 w = static_cast<u128>(p.window_ns);
  const u128 most_left = div_u128(static_cast<u128>(target) * w + weight_of - 1, weight_of) - 1;  // ceil(kW/prev) - 1
  return most_left >= w ? 0 : static_cast<std::int64_t>(w - most_left);
}

}  // namespace

Decision fixed_window_decide(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t cost) {
  roll_fixed(p, s, now);
  const std::int64_t end = fixed_bounds(p, s.start_ns).end;
  Decision d;
  d.limit = static_cast<double>(p.limit);
  // envoyproxy/ratelimit's test, the count after the attempt against the limit: the same as "cost fits in the room
  // left" except past the limit (count_refused), where an attempt of cost 0 is refused too.
  d.allowed = sat_add_u(s.count, cost) <= p.limit;
  if (d.allowed || p.count_refused) s.count = sat_add_u(s.count, cost);
  if (!d.allowed) d.retry_after = cost <= p.limit ? Nanos{sat_sub(end, now)} : kNever;
  d.remaining = static_cast<double>(room(p.limit, s.count));
  if (s.count > 0) d.reset_after = Nanos{std::max<std::int64_t>(0, sat_sub(end, now))};
  return d;
}

void fixed_window_absorb(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t hits) {
  roll_fixed(p, s, now);
  s.count = sat_add_u(s.count, hits);
}

void fixed_window_refund(const WindowParams& p, FixedWindowState& s, std::int64_t now, std::uint64_t amount,
                         const Charge& charge) {
  roll_fixed(p, s, now);
  if (fixed_bounds(p, charge.at_ns).start != s.start_ns) return;
  s.count -= std::min(s.count, amount);
}

bool fixed_window_forgettable(const WindowParams& p, const FixedWindowState& s, std::int64_t now) {
  return s.count == 0 || fixed_bounds(p, now).start > s.start_ns;
}

std::uint64_t sliding_window_max_count(std::int64_t window_ns) { return layout(window_ns).count_max; }

namespace {

// kResetAfter: whether to compute reset_after, a 128-bit division that callers reading no reset_after skip
// (rk::Fields::kAllButResetAfter).
template <bool kResetAfter>
[[gnu::always_inline]] inline Decision decide_in(const Layout& l, const WindowParams& p, SlidingWindowState& packed,
                                                 std::int64_t now, std::uint64_t cost) {
  Sliding s = unpack(l, packed);
  roll_sliding(p, s, now);
  const std::uint64_t count = sat_add_u(s.curr, weighted_prev(p, s, now));
  Decision d;
  d.limit = static_cast<double>(p.limit);
  // Past the limit (a debt, or absorbed hits) even cost 0 is refused, as in the fixed window.
  d.allowed = count <= p.limit && cost <= p.limit - count;
  if (d.allowed) {
    s.curr += cost;
    d.remaining = static_cast<double>(room(p.limit, count + cost));
  } else {
    // count_refused: the charge is counted all the same, this window's count up to twice the limit (a debt of one
    // limit); the answers below are the new count's.
    const std::uint64_t before = s.curr;
    if (p.count_refused) [[unlikely]]
      s.curr = std::max(s.curr, std::min(sat_add_u(s.curr, cost), 2 * p.limit));
    d.remaining = static_cast<double>(room(p.limit, sat_add_u(count, s.curr - before)));
    if (cost > p.limit) {
      d.retry_after = kNever;
    } else if (s.curr <= p.limit - cost) {
      // Within this window, once the previous window's weight has fallen far enough.
      const std::int64_t e = first_offset_below(p, s.prev, p.limit - cost - s.curr + 1);
      d.retry_after = Nanos{std::max<std::int64_t>(0, sat_sub(sat_add(s.start_ns, e), now))};
    } else {
      // In the next window, where this window's count becomes the weighted one.
      const std::int64_t e = first_offset_below(p, s.curr, p.limit - cost + 1);
      d.retry_after = Nanos{sat_sub(sat_add(sat_add(s.start_ns, p.window_ns), e), now)};
    }
  }
  if constexpr (kResetAfter) {
    // Back to fresh once the weighted count floors to 0: curr weighs in the next window, prev in this one.
    std::int64_t fresh_at = now;
    if (s.curr > 0) {
      fresh_at = sat_add(sat_add(s.start_ns, p.window_ns), first_offset_below(p, s.curr, 1));
    } else if (s.prev > 0) {
      fresh_at = sat_add(s.start_ns, first_offset_below(p, s.prev, 1));
    }
    d.reset_after = Nanos{std::max<std::int64_t>(0, sat_sub(fresh_at, now))};
  }
  pack(l, s, packed);
  return d;
}

template <bool kResetAfter>
Decision sliding_window(const WindowParams& p, SlidingWindowState& packed, std::int64_t now, std::uint64_t cost) {
  const int k = layout_k(p.window_ns);
  if (k == kLongK) return decide_in<kResetAfter>(layout_of(kLongK), p, packed, now, cost);  // constants
  return decide_in<kResetAfter>(layout_of(k), p, packed, now, cost);
}

}  // namespace

Decision sliding_window_decide(const WindowParams& p, SlidingWindowState& packed, std::int64_t now,
                               std::uint64_t cost) {
  return sliding_window<true>(p, packed, now, cost);
}

Decision sliding_window_decide_brief(const WindowParams& p, SlidingWindowState& packed, std::int64_t now,
                                     std::uint64_t cost) {
  return sliding_window<false>(p, packed, now, cost);
}

void sliding_window_absorb(const WindowParams& p, SlidingWindowState& packed, std::int64_t now, std::uint64_t hits) {
  const Layout l = layout(p.window_ns);
  Sliding s = unpack(l, packed);
  roll_sliding(p, s, now);
  s.curr = sat_add_u(s.curr, hits);
  pack(l, s, packed);
}

void sliding_window_refund(const WindowParams& p, SlidingWindowState& packed, std::int64_t now, std::uint64_t amount,
                           const Charge& charge) {
  const Layout l = layout(p.window_ns);
  Sliding s = unpack(l, packed);
  roll_sliding(p, s, now);
  const std::int64_t q = floor_div(charge.at_ns, p.window_ns);
  if (q == s.q) {
    s.curr -= std::min(s.curr, amount);
  } else if (static_cast<i128>(q) + 1 == s.q) {
    s.prev -= std::min(s.prev, amount);
  } else {
    return;
  }
  pack(l, s, packed);
}

bool sliding_window_forgettable(const WindowParams& p, const SlidingWindowState& packed, std::int64_t now) {
  Sliding rolled = unpack(layout(p.window_ns), packed);
  roll_sliding(p, rolled, now);
  // The weighted previous count only falls until the next roll, which makes it curr (0): nothing left to count.
  return rolled.curr == 0 && weighted_prev(p, rolled, now) == 0;
}

}  // namespace rk::core
