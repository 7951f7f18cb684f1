// service/batcher.cc: `sharing: batched`: keys decided here, hits shared in batches (batcher.h).
#include "service/batcher.h"

#include <algorithm>
#include <bit>
#include <future>
#include <limits>

#include "core/algorithms.h"
#include "core/registry.h"
#include "core/state_codec.h"
#include "store/memory/hash.h"

namespace rk::service {

namespace {

constexpr std::int64_t kNeverNs = std::numeric_limits<std::int64_t>::min();
// A snapshot's frame: how many counts it includes, each (id, count), then the state. Bounds for what is read back.
constexpr std::uint32_t kMaxSnapshotCounts = 4096;
constexpr std::uint32_t kMaxServerIdBytes = 64;

using Counts = std::unordered_map<std::string, std::uint64_t>;

// What a count that moved from `before` to `now` adds. A count never goes backwards for good: a server whose own count
// came back lower than it sent (Redis lost the key) sends the difference again, so a lower count is one on its way
// back up, and adds nothing until it passes what was seen.
std::uint64_t grown(std::uint64_t before, std::uint64_t now) { return now > before ? now - before : 0; }

}  // namespace


// One key's state under its algorithm, behind one interface so that a table holds every algorithm's keys.
struct Batcher::KeyState {
  virtual ~KeyState() = default;
  virtual Decision decide(std::int64_t now, std::uint64_t cost, bool peek) = 0;
  virtual void absorb(std::int64_t now, std::uint64_t hits) = 0;
  virtual void encode(std::string& out) const = 0;
  virtual bool decode(std::string_view in) = 0;  // false: malformed, and the state is fresh
  virtual void clear() = 0;
  virtual bool forgettable(std::int64_t now) const = 0;
  virtual std::int64_t lifetime_ns(std::int64_t now) const = 0;  // until the state is back to fresh
};

namespace {

template <class Algo>
struct Typed final : Batcher::KeyState {
  explicit Typed(const typename Algo::Params& p) : params(p) {}
  Decision decide(std::int64_t now, std::uint64_t cost, bool peek) override {
    if (!peek) return Algo::decide(params, state, now, cost);
    typename Algo::State copy = state;
    return Algo::decide(params, copy, now, cost);
  }
  void absorb(std::int64_t now, std::uint64_t hits) override { Algo::absorb(params, state, now, hits); }
  void encode(std::string& out) const override { core::encode_state<Algo>(state, out); }
  bool decode(std::string_view in) override {
    if (core::decode_state<Algo>(in, state) && in.empty()) return true;
    clear();
    return false;
  }
  void clear() override { state = typename Algo::State{}; }
  bool forgettable(std::int64_t now) const override { return Algo::forgettable(params, state, now); }
  std::int64_t lifetime_ns(std::int64_t now) const override {
    typename Algo::State copy = state;
    return Algo::decide(params, copy, now, 0).reset_after.count();
  }
  typename Algo::Params params;
  typename Algo::State state;
};

std::unique_ptr<Batcher::KeyState> make_state(const LimitSpec& spec) {
  return core::with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) -> std::unique_ptr<Batcher::KeyState> {
    return std::make_unique<Typed<Algo>>(p);
  });
}

}  // namespace

// How long a key's counts stay in the store after a sync: the state's own lifetime, and long enough past it for
// every server's next syncs to find them.
Nanos Batcher::ttl_for(const KeyState& state, std::int64_t now) const {
  constexpr std::int64_t kLongest = std::chrono::nanoseconds(std::chrono::days(400)).count();  // far from overflow
  return Nanos{std::clamp<std::int64_t>(state.lifetime_ns(now), 0, kLongest)} +
         options_.interval * (2 * kStaleIntervals) + std::chrono::seconds(1);
}

struct Batcher::Entry {
  std::unique_ptr<KeyState> state;
  Counts seen;                     // per other server: the cumulative count `state` includes (at most
                                   // kMaxSnapshotCounts; kept while absent, for a Redis that lost the key)
  std::uint64_t own_total = 0;     // this server's cumulative count, as the store holds it
  std::uint64_t pending = 0;       // recorded here, not yet sent
  std::uint64_t inflight = 0;      // sent in the sync in flight
  bool joined = false;             // `state` was built from the store's snapshot and counts
  bool busy = false;               // a sync of this key is in flight
  bool changed = false;            // since the last snapshot written
  Waiters waiters;                 // decisions waiting for the sync in flight
  std::int64_t synced_ns = kNeverNs;  // when the last answered sync was sent
  std::int64_t used_ns = kNeverNs;
  std::uint64_t generation = 0;    // tells this entry from an evicted one's under the same key, for late replies
  std::size_t bytes = 0;           // key_bytes() when it was made
};

std::size_t Batcher::key_bytes(const LimitSpec& spec, std::string_view key) {
  // Each allocation with glibc's 16-byte header: the map's node (its key's std::string, the entry's pointer, the
  // next pointer and the cached hash), the key's text past std::string's inline 15 bytes, the entry, the typed
  // state (its vtable pointer, the parameters, the state).
  constexpr std::size_t kHeader = 16, kNode = 64, kState = 160;
  static_assert(sizeof(Typed<core::Earrrl>) <= kState && sizeof(Typed<core::SlidingWindow>) <= kState &&
                sizeof(Typed<core::Fluid>) <= kState && sizeof(Typed<core::SlidingLog>) <= kState);
  std::size_t bytes = kHeader + kNode + kHeader + sizeof(Entry) + kHeader + kState;
  if (key.size() > 15) bytes += kHeader + key.size() + 1;
  if (spec.algorithm == Algorithm::kSlidingLog) {
    bytes += kHeader + core::SlidingLogState::max_heap_bytes(static_cast<std::uint64_t>(spec.limit));
  }
  return bytes;
}

namespace {

// max_memory_bytes's split (batcher.h): 7/8 for the keys held, 1/8 for evicted keys' unsent hits. 0: no bound.
std::size_t held_bytes(const BatcherOptions& o) { return o.max_memory_bytes / 8 * 7; }
std::size_t orphan_bytes(const BatcherOptions& o) { return o.max_memory_bytes / 8; }

// As many shards as keep at least kMinKeysPerShard keys and kMinShardBytes of the budget each (a small max_keys or
// budget is then kept exactly, and a shard's share holds a long key many times over), up to kMaxShards.
std::size_t shards_for(const BatcherOptions& o) {
  const std::size_t key_bytes = held_bytes(o);
  std::size_t n = 1;
  while (n < Batcher::kMaxShards && o.max_keys / (n * 2) >= Batcher::kMinKeysPerShard &&
         (key_bytes == 0 || key_bytes / (n * 2) >= Batcher::kMinShardBytes)) {
    n *= 2;
  }
  return n;
}

}  // namespace

Batcher::Batcher(std::shared_ptr<store::SharedCounters> counters, std::shared_ptr<const Clock> clock,
                 BatcherOptions options)
    : counters_(std::move(counters)),
      clock_(std::move(clock)),
      options_(options),
      seed_(store::random_seed()),
      shard_count_(shards_for(options_)),
      shards_(std::make_unique<Shard[]>(shard_count_)) {
  for (std::size_t i = 0; i < shard_count_; ++i) {
    Shard& s = shards_[i];
    s.keys = decltype(s.keys)(0, KeyHash{seed_});
    s.capacity = std::max<std::size_t>(1, options_.max_keys / shard_count_ + (i < options_.max_keys % shard_count_));
    if (options_.max_memory_bytes > 0) s.byte_capacity = held_bytes(options_) / shard_count_;
  }
  if (options_.start_thread) thread_ = std::thread([this] { loop(); });
}

Batcher::~Batcher() { close(); }

std::size_t Batcher::KeyHash::operator()(std::string_view key) const {
  return static_cast<std::size_t>(store::hash_key(key, seed));
}

Batcher::Shard& Batcher::shard_of(const Hashed& k) const {
  // The top bits pick the shard; the map's buckets take the rest (modulo a prime).
  const int bits = std::countr_zero(shard_count_);
  return shards_[bits == 0 ? 0 : k.hash >> (64 - bits)];
}

// Under s.mu, to make room for a key whose bucket will be `home`. The key evicted: the one used longest ago in `home`
// (so that on a full shard no chain ever grows: a lookup stays as short as when the shard filled, whatever keys a
// flood brings), or, when `home` is empty, in the next bucket holding a key no decision waits on from one picked at
// random (taking the map's first key, as before, evicted the newest key of an empty bucket, and a flood left only
// keys sharing buckets: long chains, which tests/service/batcher_hostile_keys_test.cc counts). An evicted key's unsent
// hits are kept for the next batch; a full backlog is handed back in `full`, to go out at once once the lock is let go
// (its replies unread: nothing here to learn them).
bool Batcher::evict_one(Shard& s, std::size_t home, std::vector<store::CounterSync>& full) {
  if (s.keys.empty()) return false;
  const std::size_t buckets = s.keys.bucket_count();
  std::size_t b = home;
  for (std::size_t n = 0; n <= buckets; ++n) {
    auto victim = s.keys.end(b);
    for (auto it = s.keys.begin(b); it != s.keys.end(b); ++it) {
      const Entry& e = *it->second;
      if (e.waiters.empty() && (victim == s.keys.end(b) || e.used_ns < victim->second->used_ns)) victim = it;
    }
    if (victim == s.keys.end(b)) {
      if (n == 0) {
        s.rng = store::hash_key(std::string_view(reinterpret_cast<const char*>(&s.rng), sizeof s.rng), seed_);
        b = s.rng % buckets;
      } else {
        b = b + 1 == buckets ? 0 : b + 1;
      }
      continue;
    }
    const Entry& e = *victim->second;
    if (e.pending > 0) {
      std::lock_guard lock(orphans_mu_);
      orphans_.push_back({.key = victim->first, .add = e.pending, .ttl = ttl_for(*e.state, clock_->now().count())});
      orphan_bytes_ += e.bytes;
      if (orphans_.size() >= options_.max_keys ||
          (options_.max_memory_bytes > 0 && orphan_bytes_ >= orphan_bytes(options_))) {
        full.swap(orphans_);
        orphan_bytes_ = 0;
      }
    }
    erase(s, s.keys.find(victim->first));
    stats_.evicted.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;  // every key has decisions waiting on it
}

void Batcher::erase(Shard& s, KeyMap::const_iterator it) {
  s.bytes -= it->second->bytes;
  stats_.bytes.fetch_sub(static_cast<std::int64_t>(it->second->bytes), std::memory_order_relaxed);
  stats_.keys.fetch_sub(1, std::memory_order_relaxed);
  s.keys.erase(it);
}

Batcher::Entry* Batcher::find_or_make(Shard& s, const LimitSpec& spec, const Hashed& key,
                                      std::vector<store::CounterSync>& full) {
  if (const auto it = s.keys.find(key); it != s.keys.end()) return it->second.get();
  std::string owned(key.key);
  const std::size_t bytes = key_bytes(spec, owned);
  // Room by count and by bytes; one key is always held, whatever it costs (a budget too small for it still works).
  while (s.keys.size() >= s.capacity || s.bytes + bytes > s.byte_capacity) {
    if (!evict_one(s, s.keys.bucket(owned), full)) break;
  }
  auto e = std::make_unique<Entry>();
  e->state = make_state(spec);
  e->generation = next_generation_.fetch_add(1, std::memory_order_relaxed);
  e->bytes = bytes;
  s.bytes += bytes;
  stats_.keys.fetch_add(1, std::memory_order_relaxed);
  stats_.bytes.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  return s.keys.emplace(std::move(owned), std::move(e)).first->second.get();
}

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
  std::vector<store::CounterSync> full;
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
    std::vector<store::CounterSync> overflow;
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
  std::vector<store::CounterSync> ops{take_op(std::string(key), *e, t)};
  std::vector<std::uint64_t> generations{e->generation};
  lock.unlock();
  send_orphans(std::move(full));
  stats_.fetches.fetch_add(1, std::memory_order_relaxed);
  send(std::move(ops), std::move(generations), t, nullptr);
}

store::CounterSync Batcher::take_op(const std::string& key, Entry& e, std::int64_t now) {
  e.busy = true;
  e.inflight = e.pending;
  e.pending = 0;
  store::CounterSync op{.key = key, .add = e.inflight, .ttl = ttl_for(*e.state, now), .want_snapshot = !e.joined};
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

void Batcher::apply(const std::string& key, std::uint64_t generation, const store::CounterReply& reply,
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

void Batcher::send(std::vector<store::CounterSync> ops, std::vector<std::uint64_t> generations, std::int64_t started,
                   std::function<void()> after) {
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
                                   after = std::move(after)](std::vector<store::CounterReply> replies) {
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
void Batcher::send_orphans(std::vector<store::CounterSync> ops) {
  if (ops.empty()) return;
  stats_.keys_sent.fetch_add(ops.size(), std::memory_order_relaxed);
  counters_->sync(std::move(ops), [](const std::vector<store::CounterReply>&) {});
}

void Batcher::batch_once(std::function<void()> after) {
  const std::int64_t now = clock_->now().count();
  std::int64_t previous;
  {
    std::lock_guard lock(loop_mu_);
    previous = last_batch_ns_;
    last_batch_ns_ = now;
  }
  std::vector<store::CounterSync> ops;
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
  std::vector<store::CounterSync> orphans;
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

Batcher::ProbeStats Batcher::probe_stats() const {
  ProbeStats st;
  for (std::size_t i = 0; i < shard_count_; ++i) {
    const Shard& s = shards_[i];
    std::lock_guard lock(s.mu);
    for (std::size_t b = 0; b < s.keys.bucket_count(); ++b) {
      const std::size_t n = s.keys.bucket_size(b);  // the keys at 1, 2, ... n comparisons along the chain
      st.keys += n;
      st.total += n * (n + 1) / 2;
      st.longest = std::max(st.longest, n);
    }
  }
  return st;
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

}  // namespace rk::service
