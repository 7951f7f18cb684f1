// store/batched/batcher.h: the batched store, what `sharing: batched` domains decide with (docs/redis.md): each key
// decided here, in process, from a state that absorbs what the other servers recorded; this server's recorded hits
// sent to the shared counters (store/remote/shared_counters.h) in one batch every `interval`, each key's reply
// absorbed on return.
//
//   Batcher batcher(counters, clock, {.interval = 20ms, .max_keys = 100'000});
//   Decision d;
//   if (!batcher.try_decide(spec, "rk:...:k", 1, false, now, d))                // the usual case: at once, no
//     batcher.decide(spec, "rk:...:k", 1, false, now, [](Decision d) { ... });  // allocation; else after a fetch
//
// Three parts, a file each: the key table (key_table.h: per key its state, its unsent hits, what it has absorbed;
// sharded, bounded in keys and bytes, seeded against chosen keys), the sync loop (sync_loop.cc: the batches out,
// the replies absorbed) and the decide path (decide.cc: a key's decision here, or after its first fetch).
//
// Per key it keeps the state (the algorithm's, core/), the hits recorded here and not yet sent, and per server the
// cumulative count its state already includes. A reply's count past that is absorbed (core/algorithms.h) at the
// reply's time; a count that went backwards (the key expired in the store) is absorbed whole. A key not yet joined
// (first use, or evicted) waits for one fetch, coalesced: its state becomes the snapshot in the store plus every
// count past the snapshot's own. A key whose last sync is older than kStaleIntervals intervals is synced again before
// it decides. While the store does not answer, keys decide from what they have and keep their hits to send.
//
// Error: a server decides without the hits the others recorded since its last sync: at most what the fleet records
// in 2 × interval + one round trip (docs/redis.md gives the bound).
//
// The decision path (try_decide) costs what the in-process store's does: the key hashed, one spin lock held
// for one lookup and the algorithm's step, the hits added to the key's pending count beside its state; no
// allocation, no callback, nothing sent. Everything that talks to the store runs on the batch thread (or, for a key
// not yet joined, once per key).
//
// Thread safety: every member from any thread. Keys live in up to kMaxShards shards, each under its own spin lock
// (held for one key's step, or a batch's visit of the shard); callbacks run with no lock held. Memory: at most
// max_keys keys, and with max_memory_bytes at most that many bytes as key_bytes() counts them (a key's text, its
// entry and state, a sliding log's whole ring): 7/8 for the keys held, 1/8 for evicted keys' unsent hits (those go
// out with the next batch, or at once when max_keys of them or their share of bytes wait). A key's text is kept
// whole (it names the key in Redis, where every server must find it), so its bytes are what a budget must bound:
// a descriptor's 4 KB made a million keys 4 GB. Keys are hashed with a random seed, so that no client can choose
// keys that make a lookup long (probe_stats() counts it: tests/store/batched/key_table_redis_test.cc).
#pragma once

#include <atomic>
#include <bit>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ratekeeper/clock.h"
#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"
#include "store/batched/key_table.h"
#include "base/hash.h"
#include "store/remote/shared_counters.h"

namespace rk::store::batched {

struct BatcherOptions {
  Nanos interval = std::chrono::milliseconds(20);  // --redis-batch-interval
  std::size_t max_keys = 1'000'000;
  std::size_t max_memory_bytes = 0;  // 0: no bound in bytes (serve: the batcher's share of --max-memory)
  bool start_thread = true;          // false: batches only when flush() is called (tests)
};

// For metrics (serve_metrics.cc) and tests.
struct BatcherStats {
  std::atomic<std::uint64_t> batches{0};    // syncs sent (a batch, or one key's fetch)
  std::atomic<std::uint64_t> keys_sent{0};  // keys in them, together
  std::atomic<std::uint64_t> failed{0};     // keys the store did not answer
  std::atomic<std::uint64_t> fetches{0};    // keys whose decisions waited for a fetch
  std::atomic<std::uint64_t> evicted{0};    // keys dropped to make room
  std::atomic<std::int64_t> last_keys{0};   // keys in the last batch
  std::atomic<std::int64_t> lag_ns{0};      // how old the last answered batch was when it came back
  std::atomic<std::int64_t> keys{0};        // keys held now
  std::atomic<std::int64_t> bytes{0};       // what they cost, as key_bytes() counts it
};

class Batcher {
 public:
  static constexpr int kStaleIntervals = 4;
  static constexpr std::size_t kMaxShards = 64;
  static constexpr std::size_t kMinKeysPerShard = 64;
  static constexpr std::size_t kMinShardBytes = 64 << 10;  // a key bigger than a shard's share is still held, alone

  Batcher(std::shared_ptr<store::remote::SharedCounters> counters, std::shared_ptr<const Clock> clock,
          BatcherOptions options);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Decides an attempt of `cost` on `key` under `spec` (valid: the rule's), recording it unless `peek`, into
  // `out` when it can at once: the key is joined and synced lately, or the store is away. false: nothing done; the
  // caller asks decide(), which waits for the key's fetch.
  bool try_decide(const LimitSpec& spec, std::string_view key, std::uint64_t cost, bool peek, Nanos now, Decision& out);
  // As try_decide, whatever the key's state: `done` runs once, at once or on the store's thread after the key's
  // fetch.
  void decide(const LimitSpec& spec, std::string_view key, std::uint64_t cost, bool peek, Nanos now,
              std::function<void(Decision)> done);
  // Forgets the key here and in the store; `done` once the store has answered (or failed).
  void reset(std::vector<std::string> keys, std::function<void()> done);
  // Sends a batch now and waits for its replies (tests; serve's drain).
  void flush();
  // Stops the batch thread (after one last batch) and the store. Idempotent.
  void close();

  const BatcherStats& stats() const { return stats_; }
  // What one key costs held here at most, as the budget counts it: its text, the map's node, its entry, its state
  // (a sliding log's whole ring at `spec`'s limit), with the allocator's headers. Its per-server counts are not
  // counted: they grow with the fleet, not with what clients send.
  static std::size_t key_bytes(const LimitSpec& spec, std::string_view key);
  Nanos interval() const { return options_.interval; }

  // What a lookup costs, counted (tests/store/batched/key_table_redis_test.cc): over every key held, the entries a
  // lookup compares it with to find it (its position in its bucket's chain).
  struct ProbeStats {
    std::size_t keys = 0;
    std::uint64_t total = 0;  // comparisons to find every key once
    std::size_t longest = 0;  // the most for any one key
  };
  ProbeStats probe_stats() const;
  std::size_t shard_count() const { return shard_count_; }

 private:
  Hashed hashed(std::string_view key) const { return {key, base::hash_key(key, seed_)}; }
  Shard& shard_of(const Hashed& k) const;
  Nanos ttl_for(const KeyState& state, std::int64_t now) const;
  bool fresh(const Entry& e, std::int64_t now) const;
  Entry* find_or_make(Shard& s, const LimitSpec& spec, const Hashed& key,
                      std::vector<store::remote::CounterSync>& full);
  bool evict_one(Shard& s, std::size_t home, std::vector<store::remote::CounterSync>& full);
  void erase(Shard& s, KeyMap::const_iterator it);  // under s.mu: the key forgotten, its bytes given back
  Decision decide_here(Entry& e, const LimitSpec& spec, std::uint64_t cost, bool peek, std::int64_t now);
  store::remote::CounterSync take_op(const std::string& key, Entry& e, std::int64_t now);
  void send(std::vector<store::remote::CounterSync> ops, std::vector<std::uint64_t> generations, std::int64_t started,
            std::function<void()> after);
  void apply(const std::string& key, std::uint64_t generation, const store::remote::CounterReply& reply,
             std::int64_t now, std::int64_t started);
  void batch_once(std::function<void()> after);
  void send_orphans(std::vector<store::remote::CounterSync> ops);
  void loop();

  std::shared_ptr<store::remote::SharedCounters> counters_;
  std::shared_ptr<const Clock> clock_;
  const BatcherOptions options_;
  const std::uint64_t seed_;
  const std::size_t shard_count_;  // a power of two
  const std::unique_ptr<Shard[]> shards_;
  std::atomic<bool> store_up_{true};  // the last sync was answered: unjoined and stale keys wait for a fetch
  std::atomic<std::uint64_t> next_generation_{0};  // the next entry made's (Entry::generation)

  std::mutex orphans_mu_;
  std::vector<store::remote::CounterSync> orphans_;  // evicted keys' unsent hits, for the next batch; under orphans_mu_
  std::size_t orphan_bytes_ = 0;                     // their keys' bytes; under orphans_mu_

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;           // under loop_mu_
  bool in_flight_ = false;          // a batch is out; under loop_mu_
  std::int64_t last_batch_ns_ = 0;  // start of the last batch sent; under loop_mu_
  BatcherStats stats_;
  std::thread thread_;  // last: started once the rest is built
};

inline Shard& Batcher::shard_of(const Hashed& k) const {
  // The top bits pick the shard; the map's buckets take the rest (modulo a prime).
  const int bits = std::countr_zero(shard_count_);
  return shards_[bits == 0 ? 0 : k.hash >> (64 - bits)];
}

}  // namespace rk::store::batched
