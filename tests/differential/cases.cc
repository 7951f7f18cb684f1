#include "differential/cases.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>

namespace rk::diff {

namespace {

using namespace std::chrono;

constexpr std::int64_t kUs = 1'000;
constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kS = 1'000'000'000;
constexpr std::int64_t kDay = 86'400 * kS;
constexpr std::int64_t kYear = 365 * kDay;
// Traces stay below 2^62 ns (year 2116), so that several windows of a year past any time still fit in 64 bits.
constexpr std::int64_t kMaxTime = std::int64_t{1} << 62;

std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

struct Rng {
  std::uint64_t state;
  std::uint64_t operator()() { return splitmix(state); }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : (*this)() % n; }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
  double unit() { return static_cast<double>((*this)() >> 11) * 0x1p-53; }
  // Log-uniform in [lo, hi]: as likely a millisecond as a month.
  std::int64_t log_between(std::int64_t lo, std::int64_t hi) {
    const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
    return std::clamp(static_cast<std::int64_t>(std::exp(l + (h - l) * unit())), lo, hi);
  }
};

std::int64_t draw_window(Rng& r) {
  // Divisors of a day (epoch-aligned windows that are also calendar ones), a week, a month, a year, and windows
  // that are not a whole number of microseconds.
  static constexpr std::int64_t kFixed[] = {kMs,
                                            kS,
                                            60 * kS,
                                            3'600 * kS,
                                            kDay,
                                            7 * kDay,
                                            30 * kDay,
                                            kYear,
                                            15 * 60 * kS,
                                            20 * 60 * kS,
                                            90 * 60 * kS,
                                            8 * 3'600 * kS,
                                            12 * 3'600 * kS,
                                            kS / 2,
                                            kDay / 1'000'000 /* 86.4 ms */,
                                            1'000'001,
                                            999'999'999,
                                            1'000'000'007};
  switch (r.below(3)) {
    case 0: return kFixed[r.below(std::size(kFixed))];
    case 1: return r.log_between(kMs, kYear);                     // almost never a whole microsecond
    default: return r.log_between(kMs / kUs, kYear / kUs) * kUs;  // a whole microsecond
  }
}

bool calendar_window(std::int64_t w) {
  return w == 7 * kDay || w == 30 * kDay || w == kYear || (w > 0 && kDay % w == 0);
}

double draw_rate_limit(Rng& r, bool whole) {
  double v;
  switch (r.below(4)) {
    case 0: v = 1 + static_cast<double>(r.below(3)); break;
    case 1: v = 1 + static_cast<double>(r.below(20)); break;
    case 2: v = static_cast<double>(r.log_between(20, 1'000'000)); break;
    default: v = whole ? static_cast<double>(1 + r.below(10)) : 0.25 + static_cast<double>(r.below(80)) / 4; break;
  }
  return v;
}

LimitSpec draw_spec(Rng& r) {
  LimitSpec s;
  s.algorithm = kAllAlgorithms[r.below(std::size(kAllAlgorithms))];
  const bool windowed = s.algorithm == Algorithm::kFixedWindow || s.algorithm == Algorithm::kSlidingLog ||
                        s.algorithm == Algorithm::kSlidingWindow;
  s.window = Nanos{draw_window(r)};
  s.limit = draw_rate_limit(r, windowed);
  switch (s.algorithm) {
    case Algorithm::kEarrrl: s.half_life = Nanos{r.chance(20) ? s.window.count() : r.log_between(kMs, kYear)}; break;
    case Algorithm::kGcra:
    case Algorithm::kLeakyQueue:
      if (r.chance(70)) s.burst = static_cast<double>(r.chance(80) ? r.below(6) : r.below(200));
      break;
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      if (r.chance(50)) s.capacity = r.chance(50) ? static_cast<double>(1 + r.below(30)) : 1 + r.unit() * 3 * s.limit;
      break;
    default: break;
  }
  {  // every algorithm: unset (its default), false, or true (refused charges owed as debt)
    const auto c = r.below(3);
    if (c < 2) s.count_refused = c == 1;
  }
  if (s.algorithm == Algorithm::kFixedWindow && r.chance(50)) {
    static constexpr std::int64_t kCalendar[] = {7 * kDay, 30 * kDay, kYear, kDay, 3'600 * kS, 15 * 60 * kS};
    if (!calendar_window(s.window.count()) || r.chance(50)) s.window = Nanos{kCalendar[r.below(std::size(kCalendar))]};
    s.align = Align::kCalendar;
  }
  return s;
}

// Starting times: anywhere in 1970..2100, near 0, or in the last moments of a month (Feb 28/29, Dec 31, ...).
std::int64_t draw_start(Rng& r) {
  switch (r.below(4)) {
    case 0: return static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(130 * kYear)));
    case 1: return static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(10 * kS)));
    default: {
      static constexpr int kYears[] = {1972, 2000, 2023, 2024, 2025, 2028, 2038, 2099, 2100};
      const year y{kYears[r.below(std::size(kYears))]};
      const month m{static_cast<unsigned>(r.chance(40) ? 2 : 1 + r.below(12))};
      const sys_days next_month{(y / m / 1) + months(1)};
      const std::int64_t end = duration_cast<nanoseconds>(next_month.time_since_epoch()).count();
      static constexpr std::int64_t kBefore[] = {1, 1'000, kMs, kS, 3'600 * kS, kDay};
      return end -
             static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(kBefore[r.below(std::size(kBefore))]) + 1));
    }
  }
}

std::string num(double v) {
  char buf[40];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace

Case make_case(std::uint64_t seed) {
  Rng r{seed};
  Case c;
  c.seed = seed;
  do {
    c.spec = draw_spec(r);
  } while (!validate(c.spec).empty());  // gcra above one request a nanosecond, say: draw again
  c.keys = 1 + static_cast<int>(r.below(3));
  c.steps = 10 + static_cast<int>(r.below(51));
  c.reservations = r.chance(50);
  return c;
}

std::int64_t next_boundary(const LimitSpec& spec, std::int64_t t) {
  const std::int64_t w = spec.window.count();
  if (spec.align == Align::kCalendar && (w == 30 * kDay || w == kYear)) {
    const year_month_day ymd{floor<days>(sys_time<nanoseconds>(nanoseconds(t)))};
    const sys_days next = w == kYear ? sys_days{ymd.year() / January / 1 + years(1)}
                                     : sys_days{ymd.year() / ymd.month() / 1 + months(1)};
    return duration_cast<nanoseconds>(next.time_since_epoch()).count();
  }
  const std::int64_t shift = spec.align == Align::kCalendar && w == 7 * kDay ? 3 * kDay : 0;  // Mondays
  const std::int64_t s = t + shift;
  const std::int64_t start = s / w * w - (s % w < 0 ? w : 0);
  return start + w - shift;
}

TraceMaker::TraceMaker(const Case& c)
    : case_(c), rng_state_(c.seed ^ 0x5eed5eed5eed5eedULL), latest_(static_cast<std::size_t>(c.keys)) {}

std::uint64_t TraceMaker::rand() { return splitmix(rng_state_); }

std::int64_t TraceMaker::next_time(const Decision* previous, std::string& aim) {
  const std::int64_t w = case_.spec.window.count();
  const std::int64_t interval =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(w) / case_.spec.limit));
  const auto pick = below(100);
  std::int64_t t = now_;
  auto rnd = [&](std::int64_t n) {
    return static_cast<std::int64_t>(below(static_cast<std::uint64_t>(std::max<std::int64_t>(n, 1))));
  };
  if (pick < 15) {
    aim = "same instant";
  } else if (pick < 45) {
    aim = "gap ~interval";
    t += rnd(2 * interval + 1);
  } else if (pick < 52) {
    aim = "gap <1us";
    t += rnd(1'000);
  } else if (pick < 67) {
    static constexpr std::int64_t kOffsets[] = {-1, 0, 1, -1'000, 1'000, -2, 2};
    const std::int64_t off = kOffsets[below(std::size(kOffsets))];
    aim = "boundary" + std::string(off >= 0 ? "+" : "") + std::to_string(off);
    t = next_boundary(case_.spec, now_) + off;
  } else if (pick < 79 && previous && !previous->allowed && previous->retry_after != kNever) {
    const std::int64_t off = static_cast<std::int64_t>(below(3)) - 1;
    aim = "retry_after" + std::string(off >= 0 ? "+" : "") + std::to_string(off);
    t = last_.t_ns + std::min<std::int64_t>(previous->retry_after.count(), kMaxTime) + off;
  } else if (pick < 84 && previous) {
    const std::int64_t off = static_cast<std::int64_t>(below(3)) - 1;
    aim = "reset_after" + std::string(off >= 0 ? "+" : "") + std::to_string(off);
    t = last_.t_ns + std::min<std::int64_t>(previous->reset_after.count(), kMaxTime) + off;
  } else if (pick < 90) {
    aim = "several windows";
    t += rnd(std::min<std::int64_t>(w, kMaxTime / 8) * 5);
  } else if (pick < 95) {
    aim = "back";
    t -= below(2) == 0 ? 1 + rnd(3) : rnd(std::min<std::int64_t>(2 * w, kMaxTime / 8));
  } else {
    aim = "gap <window";
    t += rnd(w);
  }
  return std::clamp<std::int64_t>(t, 0, kMaxTime);
}

std::uint64_t TraceMaker::next_cost() {
  const LimitSpec& s = case_.spec;
  double most = s.limit;  // what one attempt may cost and still pass on a fresh key
  if (s.algorithm == Algorithm::kGcra || s.algorithm == Algorithm::kLeakyQueue) most = s.burst.value_or(0) + 1;
  if (s.algorithm == Algorithm::kTokenBucket || s.algorithm == Algorithm::kLeakyBucket)
    most = s.capacity.value_or(s.limit);
  const auto top = static_cast<std::uint64_t>(std::min(most, 1e15));
  const auto pick = below(100);
  if (pick < 55) return 1;
  if (pick < 65) return 0;
  if (pick < 85) return below(top + 3);
  if (pick < 95) return top + below(2);         // exactly at, and just above, what can ever pass
  return std::uint64_t{1} << (20 + below(30));  // far above
}

Step TraceMaker::next(const Decision* previous) {
  Step s;
  if (!started_) {
    std::uint64_t seed = case_.seed ^ 0xa5a5a5a5a5a5a5a5ULL;
    Rng r{seed};
    now_ = draw_start(r);
    s.aim = "start";
    started_ = true;
  } else {
    now_ = next_time(previous, s.aim);
  }
  s.t_ns = now_;
  s.key = static_cast<int>(below(static_cast<std::uint64_t>(case_.keys)));
  s.cost = next_cost();
  s.peek = below(10) == 0;
  if (case_.reservations) reserve_or_settle(s);
  last_ = s;
  return s;
}

// Some steps of a case with reservations reserve, or settle one of the reserves so far (its key's mostly, another
// key's, one settled already, or an unknown id) for less than, as much as or more than its estimate, some at the
// nanoseconds around its ttl's end.
void TraceMaker::reserve_or_settle(Step& s) {
  const auto pick = below(100);
  if (pick < 12) {
    static constexpr std::int64_t kTtls[] = {kS, 10 * kS, 60 * kS, 3'600 * kS, kDay};
    s.op = Step::Op::kReserve;
    s.peek = false;
    s.ttl_ns = kTtls[below(std::size(kTtls))];
    reserved_.push_back({s.key, s.t_ns, s.ttl_ns});
    return;
  }
  if (pick >= 26) return;
  s.op = Step::Op::kSettle;
  s.peek = false;
  s.reservation = below(2) == 0 ? 0 : static_cast<int>(below(std::min<std::uint64_t>(reserved_.size(), 3) + 1)) - 1;
  const int n = static_cast<int>(reserved_.size());
  if (s.reservation >= 0 && s.reservation < n) {
    const Reserved& r = reserved_[static_cast<std::size_t>(n - 1 - s.reservation)];
    if (below(8) != 0) s.key = r.key;
    if (below(4) == 0) {  // at its ttl's end, give or take a nanosecond
      const std::int64_t off = static_cast<std::int64_t>(below(3)) - 1;
      s.aim = "ttl" + std::string(off >= 0 ? "+" : "") + std::to_string(off);
      now_ = std::clamp<std::int64_t>(r.t_ns + r.ttl_ns + off, 0, kMaxTime);
      s.t_ns = now_;
    }
  }
  const auto top = static_cast<std::int64_t>(next_cost() % 1'000'000);
  switch (below(5)) {
    case 0: s.delta = 0; break;
    case 1: s.delta = -(1 + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(top) + 1))); break;
    case 2: s.delta = std::numeric_limits<std::int32_t>::min(); break;  // for nothing: all given back
    default: s.delta = 1 + top; break;
  }
}

std::string describe(const LimitSpec& s) {
  std::string out = "{algorithm: " + std::string(algorithm_name(s.algorithm)) + ", limit: " + num(s.limit) +
                    ", window_ns: " + std::to_string(s.window.count());
  if (s.half_life) out += ", half_life_ns: " + std::to_string(s.half_life->count());
  if (s.burst) out += ", burst: " + num(*s.burst);
  if (s.capacity) out += ", capacity: " + num(*s.capacity);
  if (s.count_refused) out += std::string(", count_refused: ") + (*s.count_refused ? "true" : "false");
  if (s.align == Align::kCalendar) out += ", align: calendar";
  return out + "}";
}

std::string describe(const Step& s) {
  const std::string at = "key=k" + std::to_string(s.key) + " t=" + std::to_string(s.t_ns);
  switch (s.op) {
    case Step::Op::kReserve:
      return at + " reserve=" + std::to_string(s.cost) + " ttl=" + std::to_string(s.ttl_ns) + " (" + s.aim + ")";
    case Step::Op::kSettle:
      return at + " settle reservation=" + std::to_string(s.reservation) + " delta=" + std::to_string(s.delta) + " (" +
             s.aim + ")";
    case Step::Op::kCheck: break;
  }
  return at + " cost=" + std::to_string(s.cost) + (s.peek ? " peek" : " check") + " (" + s.aim + ")";
}

std::string describe(const Decision& d) {
  auto dur = [](Nanos n) { return n == kNever ? std::string("never") : std::to_string(n.count()); };
  return std::string("{allowed: ") + (d.allowed ? "true" : "false") + ", limit: " + num(d.limit) +
         ", remaining: " + num(d.remaining) + ", retry_after: " + dur(d.retry_after) +
         ", reset_after: " + dur(d.reset_after) + ", delay: " + dur(d.delay) +
         ", estimate: " + (d.estimate ? num(*d.estimate) : std::string("none")) + "}";
}

}  // namespace rk::diff
