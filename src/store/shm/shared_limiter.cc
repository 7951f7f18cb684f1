// The shared-memory store (include/ratekeeper/shared.h).
//
// Region layout, all offsets from the region's start, everything 8-byte aligned:
//   RegionHeader | shards x (ShardHeader, buckets_per_shard x uint32) | capacity x slot
// A slot: SlotHead, then the state (kStateBytes), then the key (key_cap bytes). Shard s owns slots
// [s * slots_per_shard, (s + 1) * slots_per_shard); its indices are shard-local.
//
// Crash safety. A shard's index (bucket chains, LRU list, free list) is derived data: after a process dies holding
// the shard's lock, the next locker rebuilds it from the slots alone (in_use, hash, key, tick). A slot's in_use
// flag is cleared before its key is overwritten and set only once key and state are in place. A state is changed
// only after it has been saved in the shard's journal; the next locker puts a journalled state back, so a
// half-made update is undone (the process that made it died before it could answer).
#include "ratekeeper/shared.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "core/algorithms.h"
#include "core/params.h"
#include "store/memory/hash.h"
#include "store/shm/testing.h"

namespace rk {

namespace shm_testing {
void (*hook)(Stage) = nullptr;
}

namespace {

constexpr char kMagic[8] = {'r', 'k', 's', 'h', 'm', '0', '1', '\0'};
constexpr std::uint32_t kNil = 0xffffffffu;
constexpr std::size_t kStateBytes = 32;
constexpr std::size_t kMaxKeys = std::size_t{1} << 31;
constexpr std::size_t kMaxKeyBytes = 4096;
constexpr std::size_t kMaxShards = 1024;

constexpr std::size_t round8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// What a limit is, as stored in the region, so that every process attaching checks it decides the same way.
struct StoredSpec {
  std::uint8_t algorithm, align, has_half_life, has_burst, has_capacity, has_count_refused, count_refused, pad;
  double limit, burst, capacity;
  std::int64_t window_ns, half_life_ns;

  static StoredSpec of(const LimitSpec& s) {
    StoredSpec o{};
    o.algorithm = static_cast<std::uint8_t>(s.algorithm);
    o.align = static_cast<std::uint8_t>(s.align);
    o.limit = s.limit;
    o.window_ns = s.window.count();
    o.has_half_life = s.half_life.has_value();
    o.half_life_ns = s.half_life.value_or(Nanos{0}).count();
    o.has_burst = s.burst.has_value();
    o.burst = s.burst.value_or(0);
    o.has_capacity = s.capacity.has_value();
    o.capacity = s.capacity.value_or(0);
    o.has_count_refused = s.count_refused.has_value();
    o.count_refused = s.count_refused.value_or(false);
    return o;
  }
  bool operator==(const StoredSpec& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};

struct RegionHeader {
  char magic[8];
  std::atomic<std::uint32_t> ready;  // 1 once formatted
  std::uint32_t shards, slots_per_shard, buckets_per_shard, key_cap, pad;
  std::uint64_t region_bytes, slot_stride, shard_stride, shards_offset, slots_offset, seed;
  StoredSpec spec;
};

struct ShardHeader {
  pthread_mutex_t mu;
  std::uint32_t lru_head, lru_tail, free_head, count;
  std::uint64_t tick, evictions, recoveries;
  std::atomic<std::uint32_t> journal_slot;  // kNil: no update in progress
  std::uint32_t pad;
  alignas(8) unsigned char journal_state[kStateBytes];
};

struct SlotHead {
  std::uint64_t hash, tick;
  std::uint32_t bucket_next, lru_prev, lru_next;
  std::uint16_t key_len;
  std::atomic<std::uint8_t> in_use;
  std::uint8_t pad;
};

struct Layout {
  std::size_t shards, slots_per_shard, buckets_per_shard, key_cap, slot_stride, shard_stride, shards_offset,
      slots_offset, bytes;
};

Layout layout_for(std::size_t max_keys, std::size_t key_bytes, std::size_t shards) {
  Layout l{};
  l.shards = shards;
  l.slots_per_shard = (max_keys + shards - 1) / shards;
  l.buckets_per_shard = std::max<std::size_t>(1, l.slots_per_shard);
  l.key_cap = round8(key_bytes);
  l.slot_stride = round8(sizeof(SlotHead)) + kStateBytes + l.key_cap;
  l.shard_stride = round8(sizeof(ShardHeader) + l.buckets_per_shard * sizeof(std::uint32_t));
  l.shards_offset = round8(sizeof(RegionHeader));
  l.slots_offset = l.shards_offset + l.shards * l.shard_stride;
  l.bytes = l.slots_offset + l.shards * l.slots_per_shard * l.slot_stride;
  return l;
}

void check_options(const LimitSpec& spec, const SharedOptions& o) {
  std::string message;
  for (const auto& e : validate(spec)) message += (message.empty() ? "" : "; ") + e.message;
  if (!message.empty()) throw InvalidArgument(message);
  if (spec.algorithm == Algorithm::kSlidingLog) {
    throw InvalidArgument("algorithm: sliding_log keeps a log per key that grows with its limit, so it cannot live "
                          "in fixed-size shared memory; use sliding_window");
  }
  if (o.max_keys < 1 || o.max_keys > kMaxKeys) {
    throw InvalidArgument("max_keys " + std::to_string(o.max_keys) + " is out of range: 1 to 2^31");
  }
  if (o.max_key_bytes < 1 || o.max_key_bytes > kMaxKeyBytes) {
    throw InvalidArgument("max_key_bytes " + std::to_string(o.max_key_bytes) + " is out of range: 1 to 4096");
  }
  if (o.shards < 1 || o.shards > kMaxShards || o.shards > o.max_keys) {
    throw InvalidArgument("shards " + std::to_string(o.shards) + " is out of range: 1 to 1024, and at most max_keys");
  }
}

std::system_error os_error(const std::string& what) { return {errno, std::generic_category(), what}; }

// The region, and the per-process view of it: where it is mapped, and whether this object unmaps it.
class Region {
 public:
  Region(unsigned char* base, std::size_t bytes, bool owned) : base_(base), bytes_(bytes), owned_(owned) {}
  ~Region() {
    if (owned_) ::munmap(base_, bytes_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  RegionHeader& header() const { return *reinterpret_cast<RegionHeader*>(base_); }
  ShardHeader& shard(std::size_t s) const {
    return *reinterpret_cast<ShardHeader*>(base_ + header().shards_offset + s * header().shard_stride);
  }
  std::uint32_t* buckets(std::size_t s) const {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(&shard(s)) + sizeof(ShardHeader));
  }
  // Shard s's slot i (shard-local).
  SlotHead& slot(std::size_t s, std::uint32_t i) const {
    const RegionHeader& h = header();
    return *reinterpret_cast<SlotHead*>(base_ + h.slots_offset + (s * h.slots_per_shard + i) * h.slot_stride);
  }
  static unsigned char* state_of(SlotHead& slot) { return reinterpret_cast<unsigned char*>(&slot) + round8(sizeof(SlotHead)); }
  static char* key_of(SlotHead& slot) { return reinterpret_cast<char*>(state_of(slot) + kStateBytes); }
  std::size_t bytes() const { return bytes_; }

 private:
  unsigned char* base_;
  std::size_t bytes_;
  bool owned_;
};

void format_region(unsigned char* base, const Layout& l, const LimitSpec& spec, std::uint64_t seed) {
  std::memset(base, 0, l.bytes);
  auto* h = new (base) RegionHeader{};
  std::memcpy(h->magic, kMagic, sizeof kMagic);
  h->shards = static_cast<std::uint32_t>(l.shards);
  h->slots_per_shard = static_cast<std::uint32_t>(l.slots_per_shard);
  h->buckets_per_shard = static_cast<std::uint32_t>(l.buckets_per_shard);
  h->key_cap = static_cast<std::uint32_t>(l.key_cap);
  h->region_bytes = l.bytes;
  h->slot_stride = l.slot_stride;
  h->shard_stride = l.shard_stride;
  h->shards_offset = l.shards_offset;
  h->slots_offset = l.slots_offset;
  h->seed = seed;
  h->spec = StoredSpec::of(spec);
  Region r(base, l.bytes, false);
  for (std::size_t s = 0; s < l.shards; ++s) {
    auto* sh = new (&r.shard(s)) ShardHeader{};
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    const int rc = pthread_mutex_init(&sh->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_mutex_init (robust, process-shared)");
    sh->journal_slot.store(kNil);
    sh->lru_head = sh->lru_tail = kNil;
    std::fill(r.buckets(s), r.buckets(s) + l.buckets_per_shard, kNil);
    // Every slot free, chained through lru_next.
    for (std::uint32_t i = 0; i < l.slots_per_shard; ++i) {
      SlotHead& slot = *new (&r.slot(s, i)) SlotHead{};
      slot.lru_next = i + 1 < l.slots_per_shard ? i + 1 : kNil;
    }
    sh->free_head = l.slots_per_shard > 0 ? 0 : kNil;
  }
  h->ready.store(1, std::memory_order_release);
}

// Checks a region made elsewhere against what this process expects of it.
void check_region(const Region& r, std::size_t bytes, const LimitSpec& spec, const SharedOptions& o) {
  const RegionHeader& h = r.header();
  if (bytes < sizeof(RegionHeader) || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    throw InvalidArgument("the region is not a ratekeeper shared store (no header); was it formatted?");
  }
  if (h.ready.load(std::memory_order_acquire) != 1) throw InvalidArgument("the region was never completely formatted");
  if (h.region_bytes > bytes) {
    throw InvalidArgument("the region says it is " + std::to_string(h.region_bytes) + " bytes but only " +
                          std::to_string(bytes) + " are mapped");
  }
  if (!(h.spec == StoredSpec::of(spec))) {
    throw InvalidArgument("the region was made for a different limit (algorithm or parameters differ)");
  }
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  if (h.shards != l.shards || h.slots_per_shard != l.slots_per_shard || h.key_cap != l.key_cap) {
    throw InvalidArgument("the region was made with other options: " + std::to_string(h.shards) + " shards of " +
                          std::to_string(h.slots_per_shard) + " keys of up to " + std::to_string(h.key_cap) + " bytes");
  }
}

}  // namespace

struct SharedLimiter::Impl {
  Impl(std::unique_ptr<Region> r, const LimitSpec& s, const SharedOptions& o, std::shared_ptr<const Clock> c)
      : region(std::move(r)), spec(s), options(o), clock(c ? std::move(c) : std::make_shared<SystemClock>()) {}
  virtual ~Impl() = default;
  virtual Decision decide(std::string_view key, std::int64_t now, std::uint64_t cost, bool record) = 0;
  virtual bool reset(std::string_view key) = 0;
  virtual SharedStats stats() = 0;

  std::unique_ptr<Region> region;
  LimitSpec spec;
  SharedOptions options;
  std::shared_ptr<const Clock> clock;
};

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
    const RegionHeader& h = region->header();
    const std::uint64_t hash = store::hash_key(key, h.seed);
    const std::size_t s = hash % h.shards;
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
    if (shm_testing::hook) shm_testing::hook(shm_testing::Stage::kJournalled);
    std::memcpy(bytes, &state, sizeof state);
    if (shm_testing::hook) shm_testing::hook(shm_testing::Stage::kWritten);
    sh.journal_slot.store(kNil, std::memory_order_release);
    return d;
  }

  bool reset(std::string_view key) override {
    if (key.size() > options.max_key_bytes) return false;
    const RegionHeader& h = region->header();
    const std::uint64_t hash = store::hash_key(key, h.seed);
    const std::size_t s = hash % h.shards;
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
    const RegionHeader& h = region->header();
    out.capacity = std::size_t{h.shards} * h.slots_per_shard;
    out.region_bytes = h.region_bytes;
    for (std::size_t s = 0; s < h.shards; ++s) {
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
    const RegionHeader& h = r.header();
    ShardHeader& sh = r.shard(s);
    const std::uint32_t journalled = sh.journal_slot.load(std::memory_order_acquire);
    if (journalled != kNil && journalled < h.slots_per_shard) {
      std::memcpy(Region::state_of(r.slot(s, journalled)), sh.journal_state, kStateBytes);
    }
    sh.journal_slot.store(kNil, std::memory_order_release);
    std::uint32_t* buckets = r.buckets(s);
    std::fill(buckets, buckets + h.buckets_per_shard, kNil);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> live;  // (tick, slot): LRU order
    sh.free_head = kNil;
    for (std::uint32_t i = h.slots_per_shard; i-- > 0;) {
      SlotHead& slot = r.slot(s, i);
      if (slot.in_use.load(std::memory_order_acquire) == 1 && slot.key_len <= h.key_cap) {
        live.emplace_back(slot.tick, i);
        const std::size_t b = (slot.hash >> 32) % h.buckets_per_shard;
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

  std::uint32_t find(std::size_t s, std::uint64_t hash, std::string_view key) const {
    const RegionHeader& h = region->header();
    for (std::uint32_t i = region->buckets(s)[(hash >> 32) % h.buckets_per_shard]; i != kNil;) {
      SlotHead& slot = region->slot(s, i);
      if (slot.hash == hash && slot.key_len == key.size() &&
          (key.empty() || std::memcmp(Region::key_of(slot), key.data(), key.size()) == 0)) {
        return i;
      }
      i = slot.bucket_next;
    }
    return kNil;
  }

  void lru_unlink(ShardHeader& sh, std::size_t s, SlotHead& slot) {
    if (slot.lru_prev == kNil) sh.lru_head = slot.lru_next;
    else region->slot(s, slot.lru_prev).lru_next = slot.lru_next;
    if (slot.lru_next == kNil) sh.lru_tail = slot.lru_prev;
    else region->slot(s, slot.lru_next).lru_prev = slot.lru_prev;
  }

  void lru_push_front(ShardHeader& sh, std::size_t s, std::uint32_t i) {
    SlotHead& slot = region->slot(s, i);
    slot.lru_prev = kNil;
    slot.lru_next = sh.lru_head;
    if (sh.lru_head != kNil) region->slot(s, sh.lru_head).lru_prev = i;
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
    const RegionHeader& h = region->header();
    ShardHeader& sh = region->shard(s);
    SlotHead& slot = region->slot(s, i);
    slot.in_use.store(0, std::memory_order_release);
    std::uint32_t* link = &region->buckets(s)[(slot.hash >> 32) % h.buckets_per_shard];
    while (*link != i) link = &region->slot(s, *link).bucket_next;
    *link = slot.bucket_next;
    lru_unlink(sh, s, slot);
    --sh.count;
  }

  std::uint32_t insert(std::size_t s, std::uint64_t hash, std::string_view key) {
    const RegionHeader& h = region->header();
    ShardHeader& sh = region->shard(s);
    std::uint32_t i = sh.free_head;
    if (i != kNil) {
      sh.free_head = region->slot(s, i).lru_next;
    } else {
      i = sh.lru_tail;  // full: the least recently used key goes
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
    std::uint32_t& head = region->buckets(s)[(hash >> 32) % h.buckets_per_shard];
    slot.bucket_next = head;
    head = i;
    lru_push_front(sh, s, i);
    ++sh.count;
    slot.in_use.store(1, std::memory_order_release);
    return i;
  }

  typename Algo::Params params_;
};

std::unique_ptr<SharedLimiter::Impl> make(std::unique_ptr<Region> r, const LimitSpec& spec, const SharedOptions& o,
                                          std::shared_ptr<const Clock> c) {
  switch (spec.algorithm) {
    case Algorithm::kEarrrl:
      return std::make_unique<ShmStore<core::Earrrl>>(std::move(r), spec, o, std::move(c), core::earrrl_params(spec));
    case Algorithm::kGcra:
      return std::make_unique<ShmStore<core::Gcra>>(std::move(r), spec, o, std::move(c), core::gcra_params(spec));
    case Algorithm::kLeakyQueue:
      return std::make_unique<ShmStore<core::LeakyQueue>>(std::move(r), spec, o, std::move(c), core::gcra_params(spec));
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      return std::make_unique<ShmStore<core::Fluid>>(std::move(r), spec, o, std::move(c), core::fluid_params(spec));
    case Algorithm::kFixedWindow:
      return std::make_unique<ShmStore<core::FixedWindow>>(std::move(r), spec, o, std::move(c), core::window_params(spec));
    case Algorithm::kSlidingWindow:
      return std::make_unique<ShmStore<core::SlidingWindow>>(std::move(r), spec, o, std::move(c),
                                                             core::window_params(spec));
    case Algorithm::kSlidingLog:
      break;
  }
  throw InvalidArgument("algorithm: not available in shared memory");
}

}  // namespace

std::size_t SharedLimiter::region_bytes(const SharedOptions& o) {
  return layout_for(o.max_keys, o.max_key_bytes, o.shards).bytes;
}

std::size_t SharedLimiter::keys_that_fit(std::size_t bytes, std::size_t max_key_bytes, std::size_t shards) {
  if (shards < 1 || shards > kMaxShards || max_key_bytes < 1 || max_key_bytes > kMaxKeyBytes) return 0;
  // The most slots per shard that fit, by bisection (the layout rounds each shard's part).
  std::size_t lo = 0, hi = kMaxKeys / shards;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (layout_for(mid * shards, max_key_bytes, shards).bytes <= bytes) lo = mid;
    else hi = mid - 1;
  }
  return lo * shards;
}

SharedLimiter SharedLimiter::anonymous(const LimitSpec& spec, const SharedOptions& o, std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  void* p = ::mmap(nullptr, l.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw os_error("mmap of " + std::to_string(l.bytes) + " bytes of shared memory");
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(p), l.bytes, true);
  format_region(static_cast<unsigned char*>(p), l, spec, store::random_seed());
  return SharedLimiter(make(std::move(region), spec, o, std::move(c)));
}

SharedLimiter SharedLimiter::open(const std::string& path, const LimitSpec& spec, const SharedOptions& o,
                                  std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw os_error("opening the shared store " + path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // One opener at a time formats or checks the file.
  if (::flock(fd, LOCK_EX) != 0) throw os_error("locking " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw os_error("fstat " + path);
  const bool fresh = st.st_size == 0;
  if (fresh && ::ftruncate(fd, static_cast<off_t>(l.bytes)) != 0) throw os_error("sizing " + path);
  const std::size_t bytes = fresh ? l.bytes : static_cast<std::size_t>(st.st_size);
  if (bytes < sizeof(RegionHeader)) {
    throw InvalidArgument(path + " is " + std::to_string(bytes) + " bytes: not a ratekeeper shared store");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw os_error("mmap of " + path);
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(p), bytes, true);
  if (fresh) {
    format_region(static_cast<unsigned char*>(p), l, spec, store::random_seed());
  } else {
    try {
      check_region(*region, bytes, spec, o);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(path + ": " + e.what());
    }
  }
  return SharedLimiter(make(std::move(region), spec, o, std::move(c)));
}

SharedLimiter SharedLimiter::in_region(void* base, std::size_t bytes, bool format, const LimitSpec& spec,
                                       const SharedOptions& o, std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  if (base == nullptr || reinterpret_cast<std::uintptr_t>(base) % 8 != 0) {
    throw InvalidArgument("the region's base must be non-null and 8-byte aligned");
  }
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(base), bytes, false);
  if (format) {
    if (bytes < l.bytes) {
      throw InvalidArgument("the region is " + std::to_string(bytes) + " bytes; " + std::to_string(o.max_keys) +
                            " keys of " + std::to_string(o.max_key_bytes) + " bytes need " + std::to_string(l.bytes));
    }
    format_region(static_cast<unsigned char*>(base), l, spec, store::random_seed());
  } else {
    check_region(*region, bytes, spec, o);
  }
  return SharedLimiter(make(std::move(region), spec, o, std::move(c)));
}

SharedLimiter::SharedLimiter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SharedLimiter::~SharedLimiter() = default;
SharedLimiter::SharedLimiter(SharedLimiter&&) noexcept = default;
SharedLimiter& SharedLimiter::operator=(SharedLimiter&&) noexcept = default;

Decision SharedLimiter::check(std::string_view key, std::uint64_t cost) {
  return check_at(key, impl_->clock->now(), cost);
}
Decision SharedLimiter::check_at(std::string_view key, Nanos now, std::uint64_t cost) {
  return impl_->decide(key, now.count(), cost, true);
}
Decision SharedLimiter::peek(std::string_view key, std::uint64_t cost) const {
  return peek_at(key, impl_->clock->now(), cost);
}
Decision SharedLimiter::peek_at(std::string_view key, Nanos now, std::uint64_t cost) const {
  return impl_->decide(key, now.count(), cost, false);
}
bool SharedLimiter::reset(std::string_view key) { return impl_->reset(key); }
SharedStats SharedLimiter::stats() const { return impl_->stats(); }
const LimitSpec& SharedLimiter::spec() const { return impl_->spec; }

}  // namespace rk
