// The shared-memory store (include/ratekeeper/shared.h); the region's bytes are in store/shm/layout.h, its file
// in store/shm/region_file.h.
//
// Crash safety. A shard's index (bucket chains, LRU list, free list) is derived data: after a process dies holding
// the shard's lock, the next locker rebuilds it from the slots alone (in_use, hash, key, tick). A slot's in_use
// flag is cleared before its key is overwritten and set only once key and state are in place. A state is changed
// only after it has been saved in the shard's journal; the next locker puts a journalled state back, so a
// half-made update is undone (the process that made it died before it could answer).
//
// Corruption. Any process that maps the region can write anything into it, so nothing read from it is used
// unchecked: the header's layout is checked once on attach and then kept in this process's memory (a later write
// to the header changes nothing here); every index is checked before it addresses a slot, every chain walk stops
// at the shard's slot count, and what fails throws SharedRegionCorrupt, which releases the shard's lock on its way
// out. Every index this code writes is in range, so a shard stays addressable even when its lists are wrong.
#include "ratekeeper/shared.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <type_traits>
#include <vector>

#include "base/number_text.h"
#include "core/algorithms.h"
#include "core/params.h"
#include "core/registry.h"
#include "store/memory/hash.h"
#include "store/shm/layout.h"
#include "store/shm/region_file.h"
#include "store/shm/testing.h"

namespace rk {

#if defined(RK_TEST_HOOKS)
namespace shm_testing {
void (*hook)(Stage) = nullptr;
}
#endif

namespace {

using shm::kMagic;
using shm::kMagicNameBytes;
using shm::kMaxKeyBytes;
using shm::kMaxKeys;
using shm::kMaxShards;
using shm::kNil;
using shm::kStateBytes;
using shm::Layout;
using shm::layout_for;
using shm::RegionHeader;
using shm::round8;
using shm::ShardHeader;
using shm::SlotHead;
using shm::StoredSpec;

StoredSpec stored_spec(const LimitSpec& s) {
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

std::string number(double v) { return base::shortest_number(v); }

std::string algorithm_text(std::uint8_t a) {
  for (Algorithm known : kAllAlgorithms) {
    if (static_cast<std::uint8_t>(known) == a) return std::string(algorithm_name(known));
  }
  return "algorithm #" + std::to_string(a);
}

// Each parameter on which the region and this process disagree, with both values.
std::string spec_difference(const StoredSpec& region, const StoredSpec& mine) {
  std::string out;
  auto note = [&](const char* param, const std::string& theirs, const std::string& ours) {
    if (theirs == ours) return;
    out += (out.empty() ? "" : "; ") + std::string(param) + ": the region has " + theirs + ", this process asks for " +
           ours;
  };
  auto seconds = [](std::int64_t ns) { return format_seconds(Nanos{ns}) + "s"; };
  auto optional = [](bool has, const std::string& v) { return has ? v : std::string("unset"); };
  note("algorithm", algorithm_text(region.algorithm), algorithm_text(mine.algorithm));
  note("limit", number(region.limit), number(mine.limit));
  note("window", seconds(region.window_ns), seconds(mine.window_ns));
  note("half_life", optional(region.has_half_life, seconds(region.half_life_ns)),
       optional(mine.has_half_life, seconds(mine.half_life_ns)));
  note("burst", optional(region.has_burst, number(region.burst)), optional(mine.has_burst, number(mine.burst)));
  note("capacity", optional(region.has_capacity, number(region.capacity)),
       optional(mine.has_capacity, number(mine.capacity)));
  note("count_refused", optional(region.has_count_refused, region.count_refused ? "true" : "false"),
       optional(mine.has_count_refused, mine.count_refused ? "true" : "false"));
  note("align", region.align == 0 ? "epoch" : "calendar", mine.align == 0 ? "epoch" : "calendar");
  if (out.empty() && std::memcmp(&region, &mine, sizeof region) != 0) {
    out = "the stored parameters differ in their bytes";
  }
  return out;
}

void check_options(const LimitSpec& spec, const SharedOptions& o) {
  std::string message;
  for (const auto& e : validate(spec)) message += (message.empty() ? "" : "; ") + e.message;
  if (!message.empty()) throw InvalidArgument(message);
  if (const auto why = core::store_refuses(spec, core::StoreKind::kShared)) {
    throw InvalidArgument("algorithm: " + *why + "; use sliding_window");
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

std::string describe(const Layout& l) {
  return std::to_string(l.shards) + " shards of " + std::to_string(l.slots_per_shard) + " keys of up to " +
         std::to_string(l.key_cap) + " bytes";
}

// The region, and this process's view of it: where it is mapped, its layout and seed as checked when this
// process attached (never read from the region again), and whether this object unmaps it.
class Region {
 public:
  Region(unsigned char* base, std::size_t bytes, bool owned) : base_(base), bytes_(bytes), owned_(owned) {}
  ~Region() {
    if (owned_) ::munmap(base_, bytes_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  void adopt(const Layout& l, std::uint64_t seed) {
    layout_ = l;
    seed_ = seed;
  }
  const Layout& layout() const { return layout_; }
  std::uint64_t seed() const { return seed_; }
  RegionHeader& header() const { return *reinterpret_cast<RegionHeader*>(base_); }
  ShardHeader& shard(std::size_t s) const {
    return *reinterpret_cast<ShardHeader*>(base_ + layout_.shards_offset + s * layout_.shard_stride);
  }
  std::uint32_t* buckets(std::size_t s) const {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(&shard(s)) + sizeof(ShardHeader));
  }
  // Shard s's slot i (shard-local; i < slots_per_shard, checked by the caller).
  SlotHead& slot(std::size_t s, std::uint32_t i) const {
    return *reinterpret_cast<SlotHead*>(base_ + layout_.slots_offset +
                                        (s * layout_.slots_per_shard + i) * layout_.slot_stride);
  }
  static unsigned char* state_of(SlotHead& slot) {
    return reinterpret_cast<unsigned char*>(&slot) + round8(sizeof(SlotHead));
  }
  static char* key_of(SlotHead& slot) { return reinterpret_cast<char*>(state_of(slot) + kStateBytes); }
  unsigned char* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }

 private:
  unsigned char* base_;
  std::size_t bytes_;
  bool owned_;
  Layout layout_{};
  std::uint64_t seed_ = 0;
};

void format_region(Region& r, const Layout& l, const LimitSpec& spec, std::uint64_t seed) {
  std::memset(r.base(), 0, l.bytes);
  r.adopt(l, seed);
  auto* h = new (r.base()) RegionHeader{};
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
  h->spec = stored_spec(spec);
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

// The layout a region made elsewhere says it has, once every field is checked against the others and against the
// `bytes` mapped. Read field by field into this process's memory, so that what is checked is what is used.
Layout checked_layout(const RegionHeader& h, std::size_t bytes) {
  if (bytes < sizeof(RegionHeader) || std::memcmp(h.magic, kMagic, kMagicNameBytes) != 0) {
    throw InvalidArgument("the region is not a ratekeeper shared store (" + std::to_string(bytes) +
                          " bytes, no header); was it formatted?");
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    throw InvalidArgument("the region is of format version '" + std::string(h.magic + kMagicNameBytes, 2) +
                          "'; this build reads version '" + std::string(kMagic + kMagicNameBytes, 2) + "'");
  }
  if (h.ready.load(std::memory_order_acquire) != 1) throw InvalidArgument("the region was never completely formatted");
  const std::size_t shards = h.shards, slots = h.slots_per_shard, key_cap = h.key_cap;
  if (shards < 1 || shards > kMaxShards) {
    throw InvalidArgument("the region's header is corrupt: shards is " + std::to_string(shards) + " (1 to 1024)");
  }
  if (slots < 1 || slots > kMaxKeys / shards) {
    throw InvalidArgument("the region's header is corrupt: slots_per_shard is " + std::to_string(slots) +
                          " for " + std::to_string(shards) + " shards (at most 2^31 keys in all)");
  }
  if (key_cap < 8 || key_cap > kMaxKeyBytes || key_cap % 8 != 0) {
    throw InvalidArgument("the region's header is corrupt: key_cap is " + std::to_string(key_cap) +
                          " (a multiple of 8 up to 4096)");
  }
  const Layout l = layout_for(shards * slots, key_cap, shards);
  const std::pair<const char*, std::pair<std::uint64_t, std::size_t>> derived[] = {
      {"buckets_per_shard", {h.buckets_per_shard, l.buckets_per_shard}},
      {"slot_stride", {h.slot_stride, l.slot_stride}},
      {"shard_stride", {h.shard_stride, l.shard_stride}},
      {"shards_offset", {h.shards_offset, l.shards_offset}},
      {"slots_offset", {h.slots_offset, l.slots_offset}},
      {"region_bytes", {h.region_bytes, l.bytes}},
  };
  for (const auto& [field, values] : derived) {
    if (values.first != values.second) {
      throw InvalidArgument("the region's header is corrupt: " + std::string(field) + " is " +
                            std::to_string(values.first) + " where a region of " + describe(l) + " has " +
                            std::to_string(values.second));
    }
  }
  if (l.bytes > bytes) {
    throw InvalidArgument("the region says it is " + std::to_string(l.bytes) + " bytes but only " +
                          std::to_string(bytes) + " are mapped (a truncated file?)");
  }
  return l;
}

// Checks a region made elsewhere against what this process expects of it, then adopts its layout and seed.
void attach_region(Region& r, const LimitSpec& spec, const SharedOptions& o) {
  const RegionHeader& h = r.header();
  const Layout stored = checked_layout(h, r.bytes());
  const StoredSpec theirs = h.spec;
  const std::string differs = spec_difference(theirs, stored_spec(spec));
  if (!differs.empty()) throw InvalidArgument("the region was made for a different limit: " + differs);
  const Layout mine = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  if (stored.shards != mine.shards || stored.slots_per_shard != mine.slots_per_shard ||
      stored.key_cap != mine.key_cap) {
    throw InvalidArgument("the region was made with other options: it has " + describe(stored) +
                          "; this process asks for " + describe(mine));
  }
  r.adopt(stored, h.seed);
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
    const std::uint64_t hash = store::hash_key(key, region->seed());
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
    shm_testing::reached(shm_testing::Stage::kJournalled);
    std::memcpy(bytes, &state, sizeof state);
    shm_testing::reached(shm_testing::Stage::kWritten);
    sh.journal_slot.store(kNil, std::memory_order_release);
    return d;
  }

  bool reset(std::string_view key) override {
    if (key.size() > options.max_key_bytes) return false;
    const std::uint64_t hash = store::hash_key(key, region->seed());
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

std::unique_ptr<SharedLimiter::Impl> make(std::unique_ptr<Region> r, const LimitSpec& spec, const SharedOptions& o,
                                          std::shared_ptr<const Clock> c) {
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
  if (p == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mmap of " + std::to_string(l.bytes) + " bytes of shared memory");
  }
  auto region = std::make_unique<Region>(static_cast<unsigned char*>(p), l.bytes, true);
  format_region(*region, l, spec, store::random_seed());
  return SharedLimiter(make(std::move(region), spec, o, std::move(c)));
}

SharedLimiter SharedLimiter::open(const std::string& path, const LimitSpec& spec, const SharedOptions& o,
                                  std::shared_ptr<const Clock> c) {
  check_options(spec, o);
  const Layout l = layout_for(o.max_keys, o.max_key_bytes, o.shards);
  const std::uint64_t seed = store::random_seed();
  const shm::MappedFile file = shm::map_region_file(path, l.bytes, o.mode, [&](unsigned char* base) {
    Region scratch(base, l.bytes, false);
    format_region(scratch, l, spec, seed);
  });
  auto region = std::make_unique<Region>(file.base, file.bytes, true);
  if (file.created) {
    region->adopt(l, seed);
  } else {
    try {
      attach_region(*region, spec, o);
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
    format_region(*region, l, spec, store::random_seed());
  } else {
    attach_region(*region, spec, o);
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
