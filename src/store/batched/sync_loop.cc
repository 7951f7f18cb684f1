// store/batched/sync_loop.cc: the batched store's syncs with the shared counters (batcher.h): every `interval` one
// batch of every key with hits to send, not yet joined, or used since the last batch; a key's own fetch before its
// first decision; each reply absorbed into its key's state; evicted keys' hits sent with the next batch.
//
// A sync of a key sends its hits recorded since the last (`add`), and, when its state changed since the last
// snapshot written, a snapshot: the state with the counts it includes (a frame: how many counts, each (id, count),
// then the state's bytes; read back within kMaxSnapshotCounts and kMaxServerIdBytes). Its reply gives every server's
// cumulative count; what passed the count the state already includes is absorbed in one step at the reply's time.
//
// Thread safety: batches run on the batch thread (loop()) or the caller's (flush(), close()), a key's fetch on the
// deciding thread (decide.cc), replies on the store's. loop_mu_ guards stopping_, in_flight_ and last_batch_ns_; a
// key is read and written under its shard's lock only, and waiters run with no lock held. Invariants: at most one
// batch is out at a time (in_flight_), so a slow store makes the lag, not a pile of batches; an entry is in at most
// one sync at a time (Entry::busy); a reply for an entry evicted meanwhile (its generation differs) changes nothing.
#include <algorithm>
#include <future>

#include "core/state_codec.h"
#include "store/batched/batcher.h"

namespace rk::store::batched {

namespace {

// A snapshot frame's server ids read back are at most this long (and its counts at most kMaxSnapshotCounts).
constexpr std::uint32_t kMaxServerIdBytes = 64;

// What a count that moved from `before` to `now` adds. A count never goes backwards for good: a server whose own count
// came back lower than it sent (Redis lost the key) sends the difference again, so a lower count is one on its way
// back up, and adds nothing until it passes what was seen.
std::uint64_t grown(std::uint64_t before, std::uint64_t now) { return now > before ? now - before : 0; }

}  // namespace

// How long a key's counts stay in the store after a sync: the state's own lifetime, and long enough past it for
// every server's next syncs to find them.
Nanos Batcher::ttl_for(const KeyState& state, std::int64_t now) const {
  constexpr std::int64_t kLongest = std::chrono::nanoseconds(std::chrono::days(400)).count();  // far from overflow
  return Nanos{std::clamp<std::int64_t>(state.lifetime_ns(now), 0, kLongest)} +
         options_.interval * (2 * kStaleIntervals) + std::chrono::seconds(1);
}

Batcher::~Batcher() { close(); }

store::remote::CounterSync Batcher::take_op(const std::string& key, Entry& e, std::int64_t now) {
  e.busy = true;
  e.inflight = e.pending;
  e.pending = 0;
  store::remote::CounterSync op{
      .key = key, .add = e.inflight, .ttl = ttl_for(*e.state, now), .want_snapshot = !e.joined};
  if (e.joined && e.changed) {
    // The state with the counts it includes; this server's own as it will be once this sync has counted.
    std::string frame;
    Counts counts = e.seen;
    counts[counters_->server_id()] = e.own_total + e.inflight;
    core::put_u32(static_cast<std::uint32_t>(std::min<std::size_t>(counts.size(), kMaxSnapshotCounts)), frame);
    std::uint32_t n = 0;
    for (const auto& [id, c] : counts) {
      if (n++ == kMaxSnapshotCounts) break;
      core::put_u32(static_cast<std::uint32_t>(id.size()), frame);
      frame += id;
      core::put_u64(c, frame);
    }
    e.state->encode(frame);
    op.snapshot = std::move(frame);
    e.changed = false;
  }
  return op;
}

namespace {

// A snapshot's counts and state bytes; false: malformed (then the key starts from nothing and every count).
bool read_frame(std::string_view in, Counts& counts, std::string_view& state) {
  std::uint32_t n;
  if (!core::get_u32(in, n) || n > kMaxSnapshotCounts) return false;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t len;
    std::uint64_t c;
    if (!core::get_u32(in, len) || len > kMaxServerIdBytes || in.size() < len) return false;
    std::string id(in.substr(0, len));
    in.remove_prefix(len);
    if (!core::get_u64(in, c)) return false;
    counts[std::move(id)] = c;
  }
  state = in;
  return true;
}

}  // namespace

void Batcher::apply(const std::string& key, std::uint64_t generation, const store::remote::CounterReply& reply,
                    std::int64_t now, std::int64_t started) {
  Shard& s = shard_of(hashed(key));
  Waiters waiters;
  {
    std::lock_guard lock(s.mu);
    const auto it = s.keys.find(key);
    // Evicted meanwhile (and perhaps back, with a sync of its own): what it sent is counted, what it learnt is moot.
    if (it == s.keys.end() || it->second->generation != generation) return;
    Entry& e = *it->second;
    e.busy = false;
    waiters.swap(e.waiters);
    if (!reply.ok) {
      e.pending += e.inflight;  // sent again next time: counted twice if Redis did count it (errs towards refusing)
      e.inflight = 0;
    } else {
      const std::string& own = counters_->server_id();
      std::uint64_t absorbed = 0, own_count = 0;
      for (const auto& [id, c] : reply.counts) {
        if (id == own) own_count = c;
      }
      if (!e.joined) {
        // The snapshot's state, then every count past what it includes (this server's own too: its state here is
        // replaced), then what was recorded here while the fetch was out.
        Counts base;
        std::string_view state;
        e.state->clear();
        if (!reply.snapshot.empty() && !(read_frame(reply.snapshot, base, state) && e.state->decode(state))) {
          base.clear();
        }
        for (const auto& [id, c] : reply.counts) {
          const auto b = base.find(id);
          absorbed += grown(b == base.end() ? 0 : b->second, c);
        }
        absorbed += e.pending;
        e.joined = true;
        e.seen.clear();
        e.own_total = own_count;
      } else {
        for (const auto& [id, c] : reply.counts) {
          if (id == own) continue;
          const auto b = e.seen.find(id);
          absorbed += grown(b == e.seen.end() ? 0 : b->second, c);
        }
        // Redis holds less of this server's count than it sent: it lost the key (a restart, an eviction). Sent again,
        // so that the others, who remember the count, see it pass what they saw rather than stall below it.
        const std::uint64_t sent = e.own_total + e.inflight;
        if (own_count < sent && !e.state->forgettable(now)) e.pending += sent - own_count;
        e.own_total = own_count;
      }
      // One absorb of the sum: the hits' order among servers is unknown anyway, and they land at `now`.
      if (absorbed > 0) e.state->absorb(now, absorbed);
      e.changed |= absorbed > 0;
      for (const auto& [id, c] : reply.counts) {
        if (id == own) continue;
        auto b = e.seen.find(id);
        if (b != e.seen.end()) b->second = std::max(b->second, c);
        else if (e.seen.size() < kMaxSnapshotCounts) e.seen.emplace(id, c);
      }
      e.inflight = 0;
      e.synced_ns = started;
    }
  }
  for (auto& w : waiters) w();
}

void Batcher::send(std::vector<store::remote::CounterSync> ops, std::vector<std::uint64_t> generations,
                   std::int64_t started, std::function<void()> after) {
  if (ops.empty()) {
    if (after) after();
    return;
  }
  std::vector<std::string> keys;
  keys.reserve(ops.size());
  for (const auto& op : ops) keys.push_back(op.key);
  stats_.batches.fetch_add(1, std::memory_order_relaxed);
  stats_.keys_sent.fetch_add(ops.size(), std::memory_order_relaxed);
  stats_.last_keys.store(static_cast<std::int64_t>(ops.size()), std::memory_order_relaxed);
  counters_->sync(std::move(ops), [this, keys = std::move(keys), generations = std::move(generations), started,
                                   after = std::move(after)](std::vector<store::remote::CounterReply> replies) {
    const std::int64_t now = clock_->now().count();
    replies.resize(keys.size());
    bool any = false;
    std::uint64_t failed = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      any |= replies[i].ok;
      failed += !replies[i].ok;
      apply(keys[i], generations[i], replies[i], now, started);
    }
    stats_.failed.fetch_add(failed, std::memory_order_relaxed);
    store_up_.store(any, std::memory_order_release);
    if (any) stats_.lag_ns.store(now - started, std::memory_order_relaxed);
    if (after) after();
  });
}

// Evicted keys' hits: counted in Redis, their replies for no one (the key may be back here, with a sync of its own).
void Batcher::send_orphans(std::vector<store::remote::CounterSync> ops) {
  if (ops.empty()) return;
  stats_.keys_sent.fetch_add(ops.size(), std::memory_order_relaxed);
  counters_->sync(std::move(ops), [](const std::vector<store::remote::CounterReply>&) {});
}

void Batcher::batch_once(std::function<void()> after) {
  const std::int64_t now = clock_->now().count();
  std::int64_t previous;
  {
    std::lock_guard lock(loop_mu_);
    previous = last_batch_ns_;
    last_batch_ns_ = now;
  }
  std::vector<store::remote::CounterSync> ops;
  std::vector<std::uint64_t> generations;
  for (std::size_t i = 0; i < shard_count_; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.mu);
    for (auto it = s.keys.begin(); it != s.keys.end();) {
      Entry& e = *it->second;
      if (!e.busy && (e.pending > 0 || !e.joined || e.used_ns >= previous)) {
        ops.push_back(take_op(it->first, e, now));
        generations.push_back(e.generation);
      } else if (!e.busy && e.waiters.empty() && e.state->forgettable(now)) {
        // Nothing to send, nothing to remember: gone, as a sweep forgets a fresh key.
        erase(s, it++);
        continue;
      }
      ++it;
    }
  }
  std::vector<store::remote::CounterSync> orphans;
  {
    std::lock_guard lock(orphans_mu_);
    orphans.swap(orphans_);
    orphan_bytes_ = 0;
  }
  send_orphans(std::move(orphans));
  send(std::move(ops), std::move(generations), now, std::move(after));
}

void Batcher::loop() {
  std::unique_lock lock(loop_mu_);
  while (!stopping_) {
    loop_cv_.wait_for(lock, options_.interval, [&] { return stopping_; });
    if (stopping_ || in_flight_) continue;  // one batch out at a time: a slow store makes the lag, not a pile
    in_flight_ = true;
    lock.unlock();
    batch_once([this] {
      std::lock_guard l(loop_mu_);
      in_flight_ = false;
      loop_cv_.notify_all();
    });
    lock.lock();
  }
}

void Batcher::flush() {
  {
    std::unique_lock lock(loop_mu_);
    loop_cv_.wait(lock, [&] { return !in_flight_; });
    in_flight_ = true;
  }
  std::promise<void> sent;
  batch_once([this, &sent] {
    {
      std::lock_guard l(loop_mu_);
      in_flight_ = false;
      loop_cv_.notify_all();
    }
    sent.set_value();
  });
  sent.get_future().wait();
}

void Batcher::reset(std::vector<std::string> keys, std::function<void()> done) {
  for (const std::string& k : keys) {
    Shard& s = shard_of(hashed(k));
    std::lock_guard lock(s.mu);
    const auto it = s.keys.find(std::string_view(k));
    if (it == s.keys.end() || !it->second->waiters.empty()) continue;
    erase(s, it);
  }
  counters_->reset(std::move(keys), std::move(done));
}

void Batcher::close() {
  {
    std::lock_guard lock(loop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  flush();  // what was recorded here since the last batch
  counters_->close();
}

}  // namespace rk::store::batched
