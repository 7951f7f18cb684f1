// store/redis/near_cache.cc: the Redis store's near cache (near_cache.h): refusals kept until their time, the hits
// refused meanwhile batched per key, and the thread that sends the batches.
#include "store/redis/near_cache.h"

#include <algorithm>
#include <utility>

#include "core/registry.h"

namespace rk::store::redis {

NearCache::NearCache(std::size_t keys, Nanos flush_every, Send send)
    : keys_(keys), flush_every_(flush_every), send_(std::move(send)), flusher_([this] { flush_loop(); }) {}

NearCache::~NearCache() { close(); }

// Answers from the near cache if Redis has refused this key until later; false: ask Redis.
bool NearCache::answer(const store::remote::RemoteOp& op, Nanos now, store::remote::RemoteResult& out) {
  std::lock_guard lock(near_mu_);
  const auto it = near_.find(op.key);
  if (it == near_.end()) return false;
  NearEntry& e = it->second;
  if (now >= e.until || op.hits < e.min_cost) {
    if (now >= e.until) {
      // Redis decides again: first it counts the refusals batched here (on the key's own connection, so in
      // order), or it would judge on a state that misses them.
      if (e.pending_hits > 0) {
        send_(e.spec, op.key, e.pending_at, e.pending_hits);
      }
      near_.erase(it);
    }
    return false;
  }
  out.status = store::remote::RemoteResult::Status::kOk;
  out.decision = e.refusal;
  out.decision.retry_after = e.until - now;
  out.decision.reset_after = std::max(out.decision.reset_after - (now - e.pending_at), out.decision.retry_after);
  if (core::counts_refused(e.spec)) {
    e.pending_hits += op.hits;
    e.pending_at = now;
  }
  return true;
}

void NearCache::learn(const std::string& key, const LimitSpec& spec, std::uint64_t hits, Nanos now,
                      const store::remote::RemoteResult& r) {
  std::lock_guard lock(near_mu_);
  const bool refused = r.status == store::remote::RemoteResult::Status::kOk && !r.decision.allowed &&
                       r.decision.retry_after > Nanos{0} && r.decision.retry_after != kNever;
  auto it = near_.find(key);
  if (!refused) {
    if (it != near_.end() && it->second.pending_hits == 0) near_.erase(it);
    return;
  }
  if (it == near_.end()) {
    if (near_.size() >= keys_) return;
    it = near_.emplace(key, NearEntry{.spec = spec}).first;
  }
  NearEntry& e = it->second;
  e.until = std::max(e.until, now + r.decision.retry_after);
  e.min_cost = e.min_cost == 0 ? hits : std::min(e.min_cost, hits);
  e.refusal = r.decision;
  if (e.pending_hits == 0) e.pending_at = now;
}

void NearCache::flush() {
  std::unordered_map<std::string, NearEntry> batched;
  {
    std::lock_guard lock(near_mu_);
    for (auto& [key, e] : near_) {
      if (e.pending_hits == 0) continue;
      batched.emplace(key, e);
      e.pending_hits = 0;
    }
  }
  for (auto& [key, e] : batched) {
    // Their answer is not learnt from: a refusal of the batch's whole cost says nothing of one attempt's wait.
    // Hits of a batch Redis does not answer are lost (docs/redis.md).
    send_(e.spec, key, e.pending_at, e.pending_hits);
  }
}

void NearCache::close() {
  {
    std::lock_guard lock(near_mu_);
    stopping_ = true;
  }
  near_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

void NearCache::flush_loop() {
  std::unique_lock lock(near_mu_);
  while (!stopping_) {
    near_cv_.wait_for(lock, flush_every_, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    flush();
    lock.lock();
  }
}

}  // namespace rk::store::redis
