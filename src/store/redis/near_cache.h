// store/redis/near_cache.h: the Redis store's near cache (RedisRemoteOptions::near_cache, remote.h). Once Redis has
// refused a key until a known time, attempts of at least the same cost before then are refused here, without a
// round trip. Where refused attempts count (earrrl; fixed_window with count_refused), their hits are kept and sent
// to Redis in one batch per key: every `flush_every`, and before Redis decides on the key again.
//
//   NearCache near(keys, flush_every, send);         // starts its flusher thread; send(spec, key, at, hits)
//   if (!near.answer(op, now, result)) { ...ask Redis...; near.learn(op.key, spec, hits, now, result); }
//
// Thread safety: every member from any thread. The entries are under one lock, which answer() holds while it sends
// a key's batched hits (so that they go before the attempt that follows them); flush() sends without it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"
#include "store/remote/remote_store.h"

namespace rk::store::redis {

class NearCache {
 public:
  // Sends hits refused here to Redis, to be counted there (its answer is not learnt from).
  using Send = std::function<void(const LimitSpec& spec, const std::string& key, Nanos at, std::uint64_t hits)>;

  // At most `keys` keys (a full cache takes no new ones); batched hits sent every `flush_every`.
  NearCache(std::size_t keys, Nanos flush_every, Send send);
  ~NearCache();  // close()
  NearCache(const NearCache&) = delete;
  NearCache& operator=(const NearCache&) = delete;

  // Answers from the near cache if Redis has refused this key until later; false: ask Redis.
  bool answer(const store::remote::RemoteOp& op, Nanos now, store::remote::RemoteResult& out);
  // What Redis answered for `key`: a refusal until a known time is kept; anything else forgets the key.
  void learn(const std::string& key, const LimitSpec& spec, std::uint64_t hits, Nanos now,
             const store::remote::RemoteResult& r);
  // Sends every key's batched hits now.
  void flush();
  // Stops the flusher and joins it; idempotent.
  void close();

 private:
  struct NearEntry {
    LimitSpec spec;
    Nanos until{0};                  // refused until then (the service's clock)
    std::uint64_t min_cost = 0;      // for attempts of at least this cost
    Decision refusal;                // what Redis said
    std::uint64_t pending_hits = 0;  // refused here, not yet counted in Redis
    Nanos pending_at{0};             // the last of them
  };

  void flush_loop();

  const std::size_t keys_;
  const Nanos flush_every_;
  const Send send_;
  std::mutex near_mu_;
  std::condition_variable near_cv_;
  bool stopping_ = false;                            // under near_mu_
  std::unordered_map<std::string, NearEntry> near_;  // under near_mu_
  std::thread flusher_;                              // last: started once the rest is built
};

}  // namespace rk::store::redis
