// store/batched/decide.cc: the batched store's decide path (batcher.h): a key joined and synced lately decides
// here at once, under its shard's lock, from its state (try_decide: the key hashed, one lookup, the algorithm's step,
// the hits added to the key's pending count; no allocation, nothing sent); any other waits for one fetch of the key,
// shared by every decision on it meanwhile, and decides when its reply is in (decide). While the store does not
// answer, every key decides from what it has.
//
// Thread safety: any thread; a key's entry is read and written under its shard's lock, which is let go before a
// callback runs or anything is sent.
#include <algorithm>

#include "core/registry.h"
#include "store/batched/batcher.h"

namespace rk::store::batched {

// Joined and synced within kStaleIntervals intervals: decides here without waiting.
bool Batcher::fresh(const Entry& e, std::int64_t now) const {
  return e.joined && e.synced_ns >= now - kStaleIntervals * options_.interval.count();
}

Decision Batcher::decide_here(Entry& e, const LimitSpec& spec, std::uint64_t cost, bool peek, std::int64_t now) {
  const Decision d = e.state->decide(now, cost, peek);
  if (!peek) {
    const std::uint64_t recorded = core::hits_recorded(spec, d, cost);
    e.pending += recorded;
    e.changed |= recorded > 0;
    e.used_ns = std::max(e.used_ns, now);
  }
  return d;
}

bool Batcher::try_decide(const LimitSpec& spec, std::string_view key, std::uint64_t cost, bool peek, Nanos now,
                         Decision& out) {
  const Hashed k = hashed(key);
  Shard& s = shard_of(k);
  const std::int64_t t = now.count();
  std::lock_guard lock(s.mu);
  const auto it = s.keys.find(k);
  if (it == s.keys.end()) return false;
  Entry& e = *it->second;
  if (!fresh(e, t) && store_up_.load(std::memory_order_acquire)) return false;
  out = decide_here(e, spec, cost, peek, t);
  return true;
}

void Batcher::decide(const LimitSpec& spec, std::string_view key, std::uint64_t cost, bool peek, Nanos now,
                     std::function<void(Decision)> done) {
  const Hashed k = hashed(key);
  Shard& s = shard_of(k);
  std::vector<store::remote::CounterSync> full;
  std::unique_lock lock(s.mu);
  Entry* e = find_or_make(s, spec, k, full);
  const std::int64_t t = now.count();
  if (fresh(*e, t) || !store_up_.load(std::memory_order_acquire)) {
    const Decision d = decide_here(*e, spec, cost, peek, t);
    lock.unlock();
    send_orphans(std::move(full));
    return done(d);
  }
  // Wait for the key's sync (one for every waiter), then decide at the time it is back, whatever it answered.
  e->waiters.push_back([this, &s, spec = &spec, key = std::string(key), cost, peek, done = std::move(done)] {
    std::vector<store::remote::CounterSync> overflow;
    std::unique_lock l(s.mu);
    Entry* again = find_or_make(s, *spec, hashed(key), overflow);
    const Decision d = decide_here(*again, *spec, cost, peek, clock_->now().count());
    l.unlock();
    send_orphans(std::move(overflow));
    done(d);
  });
  if (e->busy) {
    lock.unlock();
    return send_orphans(std::move(full));
  }
  std::vector<store::remote::CounterSync> ops{take_op(std::string(key), *e, t)};
  std::vector<std::uint64_t> generations{e->generation};
  lock.unlock();
  send_orphans(std::move(full));
  stats_.fetches.fetch_add(1, std::memory_order_relaxed);
  send(std::move(ops), std::move(generations), t, nullptr);
}

}  // namespace rk::store::batched
