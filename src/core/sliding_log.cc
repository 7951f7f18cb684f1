#include "core/sliding_log.h"

#include <algorithm>

#include "core/numeric.h"

namespace rk::core {

// Out of line, as the copy is: inline, they made the store's code around every algorithm's decision (which moves a
// fresh state in on insertion) grow or shrink at the compiler's whim.
SlidingLogState::SlidingLogState(SlidingLogState&& other) noexcept { take(other); }

SlidingLogState& SlidingLogState::operator=(SlidingLogState&& other) noexcept {
  if (this != &other) {
    release();
    take(other);
  }
  return *this;
}

SlidingLogState::~SlidingLogState() { release(); }

void SlidingLogState::release() noexcept {
  if (cap_ != 0) delete[] ring_;
}

void SlidingLogState::take(SlidingLogState& other) noexcept {
  if (other.cap_ != 0) ring_ = other.ring_;
  else one_t_ = other.one_t_;
  cap_ = other.cap_;
  head_ = other.head_;
  size_ = other.size_;
  sum_ = other.sum_;
  other.cap_ = other.head_ = other.size_ = 0;
  other.sum_ = 0;
}

SlidingLogState::SlidingLogState(const SlidingLogState& other) { *this = other; }

SlidingLogState& SlidingLogState::operator=(const SlidingLogState& other) {
  if (this == &other) return *this;
  release();
  cap_ = head_ = size_ = 0;
  sum_ = 0;
  one_t_ = 0;
  if (other.cap_ != 0) resize(other.cap_);
  for (std::uint32_t i = 0; i < other.size_; ++i) push(other.at(i).t_ns, other.at(i).cost);
  return *this;
}

// From no ring to a ring, a ring to a bigger or smaller one, or (cap 0, only with at most one entry left) back to
// none.
void SlidingLogState::resize(std::uint32_t cap) {
  if (cap == 0) {
    const std::int64_t t = size_ > 0 ? at(0).t_ns : 0;  // its cost is sum_ already
    release();
    one_t_ = t;
  } else {
    auto* next = new Entry[cap];
    for (std::uint32_t i = 0; i < size_; ++i) next[i] = at(i);
    release();
    ring_ = next;
  }
  cap_ = cap;
  head_ = 0;
}

void SlidingLogState::push(std::int64_t t_ns, std::uint64_t cost) {
  if (size_ > 0) {
    if (cap_ == 0) {
      if (one_t_ == t_ns) {
        sum_ += cost;
        return;
      }
    } else if (Entry& last = ring_[(head_ + size_ - 1) & (cap_ - 1)]; last.t_ns == t_ns) {
      sum_ += cost;
      last.cost += cost;
      return;
    }
  }
  if (size_ == 0 && cap_ == 0) {
    one_t_ = t_ns;
    sum_ = cost;
    size_ = 1;
    return;
  }
  if (size_ == cap_ || cap_ == 0) resize(cap_ ? cap_ * 2 : 2);
  sum_ += cost;
  ring_[(head_ + size_) & (cap_ - 1)] = Entry{t_ns, cost};
  ++size_;
}

void SlidingLogState::pop_front() {
  --size_;
  if (cap_ == 0) {
    sum_ = 0;
    return;
  }
  sum_ -= ring_[head_].cost;
  head_ = (head_ + 1) & (cap_ - 1);
  if (size_ == 0) {
    resize(0);
  } else if (cap_ >= 16 && size_ <= cap_ / 4) {
    resize(cap_ / 2);
  }
}

void SlidingLogState::take_at(std::int64_t t_ns, std::uint64_t amount) {
  if (size_ == 0 || amount == 0) return;
  if (cap_ == 0) {
    if (one_t_ != t_ns) return;
    sum_ -= std::min(sum_, amount);
    if (sum_ == 0) size_ = 0;
    return;
  }
  for (std::uint32_t i = size_; i-- > 0;) {
    Entry& e = ring_[(head_ + i) & (cap_ - 1)];
    if (e.t_ns < t_ns) return;  // the times never fall from oldest to newest: it is not there
    if (e.t_ns != t_ns) continue;
    const std::uint64_t taken = std::min(e.cost, amount);
    e.cost -= taken;
    sum_ -= taken;
    if (e.cost > 0) return;
    for (std::uint32_t j = i; j + 1 < size_; ++j) ring_[(head_ + j) & (cap_ - 1)] = ring_[(head_ + j + 1) & (cap_ - 1)];
    --size_;
    if (size_ == 0) {
      resize(0);
    } else if (cap_ >= 16 && size_ <= cap_ / 4) {
      resize(cap_ / 2);
    }
    return;
  }
}

namespace {

// Drops entries that have left the window (t + W <= now).
void prune(const WindowParams& p, SlidingLogState& s, std::int64_t now) {
  while (s.size() > 0 && sat_add(s.at(0).t_ns, p.window_ns) <= now) s.pop_front();
}

}  // namespace

Decision sliding_log_decide(const WindowParams& p, SlidingLogState& s, std::int64_t now, std::uint64_t cost) {
  prune(p, s, now);
  Decision d;
  d.limit = static_cast<double>(p.limit);
  const std::uint64_t used = s.sum();
  d.allowed = used <= p.limit && cost <= p.limit - used;
  if (d.allowed) {
    // A clock that went backwards logs at the newest time seen, keeping the log ordered.
    if (cost > 0) s.push(s.size() > 0 ? std::max(now, s.at(s.size() - 1).t_ns) : now, cost);
  } else {
    // count_refused: the charge is logged all the same, the log's sum up to twice the limit (a debt of one limit;
    // at most 2 * limit entries), and the answer below is the new log's.
    if (p.count_refused && cost > 0 && used < 2 * p.limit) {
      s.push(s.size() > 0 ? std::max(now, s.at(s.size() - 1).t_ns) : now, std::min(cost, 2 * p.limit - used));
    }
  }
  if (!d.allowed && cost > p.limit) {
    d.retry_after = kNever;
  } else if (!d.allowed) {
    // Walk from the oldest entry until enough has expired for this cost to fit.
    std::uint64_t freed = 0;
    for (std::uint32_t i = 0; i < s.size(); ++i) {
      freed += s.at(i).cost;
      if (s.sum() - freed <= p.limit - cost) {
        d.retry_after = Nanos{std::max<std::int64_t>(0, sat_sub(sat_add(s.at(i).t_ns, p.window_ns), now))};
        break;
      }
    }
  }
  d.remaining = static_cast<double>(s.sum() >= p.limit ? 0 : p.limit - s.sum());
  if (s.size() > 0) {
    d.reset_after = Nanos{std::max<std::int64_t>(0, sat_sub(sat_add(s.at(s.size() - 1).t_ns, p.window_ns), now))};
  }
  return d;
}

// Logged at the newest time seen, as an admitted request is. A log already holding `limit` entries adds to its
// newest one instead, so that absorbing every few milliseconds cannot grow it past what deciding could (a later
// time keeps the hits a little longer: it errs towards refusing). More than limit + 1 hits refuse alike.
void sliding_log_absorb(const WindowParams& p, SlidingLogState& s, std::int64_t now, std::uint64_t hits) {
  prune(p, s, now);
  hits = std::min<std::uint64_t>(hits, sat_add_u(p.limit, 1));
  if (hits == 0) return;
  if (s.size() == 0) return s.push(now, hits);
  const std::int64_t last = s.at(s.size() - 1).t_ns;
  const std::uint64_t room = p.limit > s.sum() ? p.limit - s.sum() : 0;
  s.push(s.size() >= std::max<std::uint64_t>(1, p.limit) ? last : std::max(now, last), std::min(hits, room + 1));
}

void sliding_log_refund(const WindowParams& p, SlidingLogState& s, std::int64_t now, std::uint64_t amount,
                        const Charge& charge) {
  prune(p, s, now);
  s.take_at(charge.at_ns, amount);
}

bool sliding_log_forgettable(const WindowParams& p, const SlidingLogState& s, std::int64_t now) {
  return s.size() == 0 || sat_add(s.at(s.size() - 1).t_ns, p.window_ns) <= now;
}

}  // namespace rk::core
