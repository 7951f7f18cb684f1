// store/batched/key_table.cc: the batched store's keys (key_table.h): each algorithm's state behind one interface,
// what a key costs, the shards sized and a key found, made or evicted within them.
//
// Thread safety: every Batcher member here but the constructor and key_bytes() runs under the shard's
// lock, taken by its caller (probe_stats() takes each shard's in turn); evict_one() takes orphans_mu_ inside it.
#include <algorithm>
#include <bit>
#include <limits>

#include "core/algorithms.h"
#include "core/registry.h"
#include "core/state_codec.h"
#include "store/batched/batcher.h"
#include "base/hash.h"

namespace rk::store::batched {

namespace {

template <class Algo>
struct Typed final : KeyState {
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

}  // namespace

std::unique_ptr<KeyState> make_state(const LimitSpec& spec) {
  return core::with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) -> std::unique_ptr<KeyState> {
    return std::make_unique<Typed<Algo>>(p);
  });
}

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
    bytes += kHeader +
             core::SlidingLogState::max_heap_bytes(static_cast<std::uint64_t>(spec.limit), core::counts_refused(spec));
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

Batcher::Batcher(std::shared_ptr<store::remote::SharedCounters> counters, std::shared_ptr<const Clock> clock,
                 BatcherOptions options)
    : counters_(std::move(counters)),
      clock_(std::move(clock)),
      options_(options),
      seed_(base::random_seed()),
      shard_count_(shards_for(options_)),
      shards_(std::make_unique<Shard[]>(shard_count_)) {
  for (std::size_t i = 0; i < shard_count_; ++i) {
    Shard& s = shards_[i];
    s.keys = decltype(s.keys)(0, KeyHash{seed_});
    s.capacity = std::max<std::size_t>(1, options_.max_keys / shard_count_ + (i < options_.max_keys % shard_count_));
    if (options_.max_memory_bytes > 0) s.byte_capacity = held_bytes(options_) / shard_count_;
  }
  if (options_.start_thread) thread_ = std::thread([this] { loop(); });  // sync_loop.cc
}

std::size_t KeyHash::operator()(std::string_view key) const {
  return static_cast<std::size_t>(base::hash_key(key, seed));
}

// Under s.mu, to make room for a key whose bucket will be `home`. The key evicted: the one used longest ago in `home`
// (so that on a full shard no chain ever grows: a lookup stays as short as when the shard filled, whatever keys a
// flood brings), or, when `home` is empty, in the next bucket holding a key no decision waits on from one picked at
// random (taking the map's first key instead would evict the newest key of an empty bucket, and a flood would leave
// only keys sharing buckets: long chains, which tests/store/batched/key_table_redis_test.cc counts). An evicted key's
// unsent hits are kept for the next batch; a full backlog is handed back in `full`, to go out at once once the lock
// is let go (its replies unread: nothing here to learn them).
bool Batcher::evict_one(Shard& s, std::size_t home, std::vector<store::remote::CounterSync>& full) {
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
        s.rng = base::hash_key(std::string_view(reinterpret_cast<const char*>(&s.rng), sizeof s.rng), seed_);
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

Entry* Batcher::find_or_make(Shard& s, const LimitSpec& spec, const Hashed& key,
                             std::vector<store::remote::CounterSync>& full) {
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

}  // namespace rk::store::batched
