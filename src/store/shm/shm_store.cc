// store/shm/shm_store.cc: the shared store's decisions in a region (shm_store.h says how an update survives a
// process that dies in it, and a region that another process corrupted).
#include "store/shm/shm_store.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/algorithms.h"
#include "core/derived_params.h"
#include "core/registry.h"
#include "base/hash.h"
#include "store/shm/layout.h"
#include "store/shm/testing.h"

namespace rk {

#if defined(RK_TEST_HOOKS)
namespace store::shm_testing {
void (*hook)(Stage) = nullptr;
}
#endif

namespace store::shm {

namespace {

template <class Algo>
class ShmStore final : public SharedLimiter::Impl {
  static_assert(sizeof(typename Algo::State) <= kStateBytes);
  static_assert(std::is_trivially_copyable_v<typename Algo::State>);

 public:
  ShmStore(std::unique_ptr<Region> r, const LimitSpec& s, const SharedOptions& o, std::shared_ptr<const Clock> c,
           typename Algo::Params p)
      : Impl(std::move(r), s, o, std::move(c)), params_(p) {}

  Decision decide(std::string_view key, std::int64_t now, std::uint64_t cost, bool record) override {
    if (key.size() > options.max_key_bytes) {
      throw InvalidArgument("key is " + std::to_string(key.size()) + " bytes, above the shared store's limit of " +
                            std::to_string(options.max_key_bytes) + " (SharedOptions::max_key_bytes)");
    }
    const std::uint64_t hash = base::hash_key(key, region->seed());
    const std::size_t s = hash % region->layout().shards;
    Locked lock(*region, s);
    ShardHeader& sh = region->shard(s);
    std::uint32_t i = find(s, hash, key);
    if (i == kNil) {
      typename Algo::State fresh{};
      if (!record) return Algo::decide(params_, fresh, now, cost);
      i = insert(s, hash, key);
    } else if (record) {
      touch(s, i);  // a peek leaves the LRU order alone
    }
    SlotHead& slot = region->slot(s, i);
    unsigned char* bytes = Region::state_of(slot);
    typename Algo::State state;
    std::memcpy(&state, bytes, sizeof state);
    const Decision d = Algo::decide(params_, state, now, cost);
    if (!record) return d;
    // Journal, write, clear: a death in between is undone by the next locker.
    std::memcpy(sh.journal_state, bytes, kStateBytes);
    sh.journal_slot.store(i, std::memory_order_release);
    store::shm_testing::reached(store::shm_testing::Stage::kJournalled);
    std::memcpy(bytes, &state, sizeof state);
    store::shm_testing::reached(store::shm_testing::Stage::kWritten);
    sh.journal_slot.store(kNil, std::memory_order_release);
    return d;
  }

  bool reset(std::string_view key) override {
    if (key.size() > options.max_key_bytes) return false;
    const std::uint64_t hash = base::hash_key(key, region->seed());
    const std::size_t s = hash % region->layout().shards;
    Locked lock(*region, s);
    const std::uint32_t i = find(s, hash, key);
    if (i == kNil) return false;
    remove(s, i);
    ShardHeader& sh = region->shard(s);
    region->slot(s, i).lru_next = sh.free_head;
    sh.free_head = i;
    return true;
  }

  SharedStats stats() override {
    SharedStats out;
    const Layout& l = region->layout();
    out.capacity = l.shards * l.slots_per_shard;
    out.region_bytes = l.bytes;
    for (std::size_t s = 0; s < l.shards; ++s) {
      Locked lock(*region, s);
      const ShardHeader& sh = region->shard(s);
      out.keys += sh.count;
      out.evictions += sh.evictions;
      out.recoveries += sh.recoveries;
    }
    return out;
  }

 private:
  // The shard's lock; taken over, with the shard repaired, from a process that died holding it.
  class Locked {
   public:
    Locked(const Region& r, std::size_t s) : mu_(&r.shard(s).mu) {
      const int rc = pthread_mutex_lock(mu_);
      if (rc == EOWNERDEAD) {
        repair(r, s);
        pthread_mutex_consistent(mu_);
        ++r.shard(s).recoveries;
      } else if (rc != 0) {
        throw std::system_error(rc, std::generic_category(), "locking a shared store shard");
      }
    }
    ~Locked() { pthread_mutex_unlock(mu_); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    pthread_mutex_t* mu_;
  };

  // Undoes a journalled update, then rebuilds the shard's index from its slots.
  static void repair(const Region& r, std::size_t s) {
    const Layout& l = r.layout();
    ShardHeader& sh = r.shard(s);
    const std::uint32_t journalled = sh.journal_slot.load(std::memory_order_acquire);
    if (journalled != kNil && journalled < l.slots_per_shard) {
      std::memcpy(Region::state_of(r.slot(s, journalled)), sh.journal_state, kStateBytes);
    }
    sh.journal_slot.store(kNil, std::memory_order_release);
    std::uint32_t* buckets = r.buckets(s);
    std::fill(buckets, buckets + l.buckets_per_shard, kNil);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> live;  // (tick, slot): LRU order
    sh.free_head = kNil;
    for (auto i = static_cast<std::uint32_t>(l.slots_per_shard); i-- > 0;) {
      SlotHead& slot = r.slot(s, i);
      if (slot.in_use.load(std::memory_order_acquire) == 1 && slot.key_len <= l.key_cap) {
        live.emplace_back(slot.tick, i);
        const std::size_t b = bucket_of(l, slot.hash);
        slot.bucket_next = buckets[b];
        buckets[b] = i;
      } else {
        slot.in_use.store(0, std::memory_order_release);
        slot.lru_next = sh.free_head;
        sh.free_head = i;
      }
    }
    std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    sh.lru_head = sh.lru_tail = kNil;
    for (const auto& [tick, i] : live) {  // most recent first: each goes at the tail
      SlotHead& slot = r.slot(s, i);
      slot.lru_prev = sh.lru_tail;
      slot.lru_next = kNil;
      if (sh.lru_tail == kNil) sh.lru_head = i;
      else r.slot(s, sh.lru_tail).lru_next = i;
      sh.lru_tail = i;
    }
    sh.count = static_cast<std::uint32_t>(live.size());
    if (!live.empty()) sh.tick = std::max(sh.tick, live.front().first);
  }

  static std::size_t bucket_of(const Layout& l, std::uint64_t hash) { return (hash >> 32) % l.buckets_per_shard; }

  [[noreturn]] void corrupt(std::size_t s, const std::string& what) const {
    throw SharedRegionCorrupt("the shared store's shard " + std::to_string(s) + " is corrupt: " + what +
                              " (its lock is released and other shards still work; make the region anew)");
  }

  // An index read from the region, once: a slot of the shard, or kNil.
  std::uint32_t index(std::size_t s, const std::uint32_t& in_region, const char* what) const {
    const std::uint32_t i = in_region;
    if (i != kNil && i >= region->layout().slots_per_shard) {
      corrupt(s, std::string(what) + " is " + std::to_string(i) + ", past the shard's " +
                     std::to_string(region->layout().slots_per_shard) + " slots");
    }
    return i;
  }

  // The link in bucket b's chain that holds the first slot `stop` accepts, or the chain's kNil end. A chain of
  // more links than the shard has slots loops: reported, never followed round again.
  template <class Stop>
  std::uint32_t* chain_link(std::size_t s, std::size_t b, Stop stop) const {
    std::uint32_t* link = &region->buckets(s)[b];
    for (std::size_t links = 0;; ++links) {
      const std::uint32_t i = index(s, *link, "a bucket chain link");
      if (i == kNil) return link;
      if (links == region->layout().slots_per_shard) {
        corrupt(s, "bucket " + std::to_string(b) + "'s chain loops (more links than the shard's " +
                       std::to_string(links) + " slots)");
      }
      if (stop(i)) return link;
      link = &region->slot(s, i).bucket_next;
    }
  }

  std::uint32_t find(std::size_t s, std::uint64_t hash, std::string_view key) const {
    return *chain_link(s, bucket_of(region->layout(), hash), [&](std::uint32_t i) {
      SlotHead& slot = region->slot(s, i);
      return slot.hash == hash && slot.key_len == key.size() &&
             (key.empty() || std::memcmp(Region::key_of(slot), key.data(), key.size()) == 0);
    });
  }

  void lru_unlink(ShardHeader& sh, std::size_t s, SlotHead& slot) {
    const std::uint32_t prev = index(s, slot.lru_prev, "an LRU link");
    const std::uint32_t next = index(s, slot.lru_next, "an LRU link");
    if (prev == kNil) sh.lru_head = next;
    else region->slot(s, prev).lru_next = next;
    if (next == kNil) sh.lru_tail = prev;
    else region->slot(s, next).lru_prev = prev;
  }

  void lru_push_front(ShardHeader& sh, std::size_t s, std::uint32_t i) {
    const std::uint32_t head = index(s, sh.lru_head, "the LRU list's head");
    SlotHead& slot = region->slot(s, i);
    slot.lru_prev = kNil;
    slot.lru_next = head;
    if (head != kNil) region->slot(s, head).lru_prev = i;
    sh.lru_head = i;
    if (sh.lru_tail == kNil) sh.lru_tail = i;
    slot.tick = ++sh.tick;
  }

  void touch(std::size_t s, std::uint32_t i) {
    ShardHeader& sh = region->shard(s);
    if (sh.lru_head == i) {
      region->slot(s, i).tick = ++sh.tick;
      return;
    }
    lru_unlink(sh, s, region->slot(s, i));
    lru_push_front(sh, s, i);
  }

  // Takes slot i out of the index; it is not in use afterwards, and not yet on the free list.
  void remove(std::size_t s, std::uint32_t i) {
    ShardHeader& sh = region->shard(s);
    SlotHead& slot = region->slot(s, i);
    const std::size_t b = bucket_of(region->layout(), slot.hash);
    std::uint32_t* link = chain_link(s, b, [i](std::uint32_t j) { return j == i; });
    if (*link == kNil) corrupt(s, "slot " + std::to_string(i) + " is indexed but missing from its bucket's chain");
    const std::uint32_t next = index(s, slot.bucket_next, "a bucket chain link");
    slot.in_use.store(0, std::memory_order_release);
    *link = next;
    lru_unlink(sh, s, slot);
    --sh.count;
  }

  std::uint32_t insert(std::size_t s, std::uint64_t hash, std::string_view key) {
    ShardHeader& sh = region->shard(s);
    std::uint32_t i = index(s, sh.free_head, "the free list's head");
    if (i != kNil) {
      sh.free_head = index(s, region->slot(s, i).lru_next, "a free list link");
    } else {
      i = index(s, sh.lru_tail, "the LRU list's tail");  // full: the least recently used key goes
      if (i == kNil) corrupt(s, "it has neither a free slot nor a key to evict");
      remove(s, i);
      ++sh.evictions;
    }
    SlotHead& slot = region->slot(s, i);
    slot.hash = hash;
    slot.key_len = static_cast<std::uint16_t>(key.size());
    if (!key.empty()) std::memcpy(Region::key_of(slot), key.data(), key.size());
    const typename Algo::State fresh{};
    std::memset(Region::state_of(slot), 0, kStateBytes);
    std::memcpy(Region::state_of(slot), &fresh, sizeof fresh);
    std::uint32_t& head = region->buckets(s)[bucket_of(region->layout(), hash)];
    slot.bucket_next = index(s, head, "a bucket head");
    head = i;
    lru_push_front(sh, s, i);
    ++sh.count;
    slot.in_use.store(1, std::memory_order_release);
    return i;
  }

  typename Algo::Params params_;
};

}  // namespace

std::unique_ptr<SharedLimiter::Impl> make_store(std::unique_ptr<Region> r, const LimitSpec& spec,
                                                const SharedOptions& o, std::shared_ptr<const Clock> c) {
  // check_options() has refused what shared memory cannot hold (core/registry.h): sliding_log's growing log.
  return core::with_algorithm(spec,
                              [&]<class Algo>(const typename Algo::Params& p) -> std::unique_ptr<SharedLimiter::Impl> {
                                if constexpr (std::is_same_v<Algo, core::SlidingLog>) {
                                  throw InvalidArgument("algorithm: sliding_log is not available in shared memory");
                                } else {
                                  return std::make_unique<ShmStore<Algo>>(std::move(r), spec, o, std::move(c), p);
                                }
                              });
}

}  // namespace store::shm

}  // namespace rk
