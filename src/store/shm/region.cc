// store/shm/region.cc: a shared store's region checked and formatted (region.h): the options asked for, the limit
// and layout a region made elsewhere says it has, and a new region's header, shards and free lists.
#include "store/shm/region.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "base/number_text.h"
#include "core/algorithms.h"
#include "core/registry.h"

namespace rk::store::shm {

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

StoredSpec stored_spec(std::uint32_t max_in_flight, Nanos lease_ttl) {
  StoredSpec o{};
  o.algorithm = kConcurrencyCode;
  o.limit = max_in_flight;
  o.window_ns = lease_ttl.count();
  return o;
}

namespace {

std::string number(double v) { return base::shortest_number(v); }

std::string algorithm_text(std::uint8_t a) {
  if (a == kConcurrencyCode) return "concurrency";
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
  if (region.algorithm == kConcurrencyCode && mine.algorithm == kConcurrencyCode) {
    note("max_in_flight", number(region.limit), number(mine.limit));
    note("lease_ttl", seconds(region.window_ns), seconds(mine.window_ns));
    return out.empty() && std::memcmp(&region, &mine, sizeof region) != 0 ? "the stored parameters differ" : out;
  }
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

std::string describe(const Layout& l) {
  return std::to_string(l.shards) + " shards of " + std::to_string(l.slots_per_shard) + " keys of up to " +
         std::to_string(l.key_cap) + " bytes" +
         (l.state_bytes == kStateBytes ? "" : " with states of " + std::to_string(l.state_bytes) + " bytes");
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
  const std::size_t shards = h.shards, slots = h.slots_per_shard, key_cap = h.key_cap, state_bytes = h.state_bytes;
  if (shards < 1 || shards > kMaxShards) {
    throw InvalidArgument("the region's header is corrupt: shards is " + std::to_string(shards) + " (1 to 1024)");
  }
  if (slots < 1 || slots > kMaxKeys / shards) {
    throw InvalidArgument("the region's header is corrupt: slots_per_shard is " + std::to_string(slots) + " for " +
                          std::to_string(shards) + " shards (at most 2^31 keys in all)");
  }
  if (key_cap < 8 || key_cap > kMaxKeyBytes || key_cap % 8 != 0) {
    throw InvalidArgument("the region's header is corrupt: key_cap is " + std::to_string(key_cap) +
                          " (a multiple of 8 up to 4096)");
  }
  if (state_bytes < kStateBytes || state_bytes > round8(kMaxStateBytes) || state_bytes % 8 != 0) {
    throw InvalidArgument("the region's header is corrupt: state_bytes is " + std::to_string(state_bytes) +
                          " (a multiple of 8 from 32 to " + std::to_string(round8(kMaxStateBytes)) + ")");
  }
  const Layout l = layout_for(shards * slots, key_cap, shards, state_bytes);
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

}  // namespace

std::size_t keys_that_fit(std::size_t bytes, std::size_t key_bytes, std::size_t shards, std::size_t state_bytes) {
  if (shards < 1 || shards > kMaxShards || key_bytes < 1 || key_bytes > kMaxKeyBytes || state_bytes > kMaxStateBytes) {
    return 0;
  }
  // The most slots per shard that fit, by bisection (the layout rounds each shard's part).
  std::size_t lo = 0, hi = kMaxKeys / shards;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (layout_for(mid * shards, key_bytes, shards, state_bytes).bytes <= bytes) lo = mid;
    else hi = mid - 1;
  }
  return lo * shards;
}

void check_options(const LimitSpec& spec, const SharedOptions& o) {
  std::string message;
  for (const auto& e : validate(spec)) message += (message.empty() ? "" : "; ") + e.message;
  if (!message.empty()) throw InvalidArgument(message);
  if (const auto why = core::store_refuses(spec, core::StoreKind::kShared)) {
    throw InvalidArgument("algorithm: " + *why + "; use sliding_window");
  }
  check_sizes(o);
}

void check_sizes(const SharedOptions& o) {
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

void format_region(Region& r, const Layout& l, const LimitSpec& spec, std::uint64_t seed) {
  format_region(r, l, stored_spec(spec), seed);
}

void format_region(Region& r, const Layout& l, const StoredSpec& spec, std::uint64_t seed) {
  std::memset(r.base(), 0, l.bytes);
  r.adopt(l, seed);
  auto* h = new (r.base()) RegionHeader{};
  std::memcpy(h->magic, kMagic, sizeof kMagic);
  h->shards = static_cast<std::uint32_t>(l.shards);
  h->slots_per_shard = static_cast<std::uint32_t>(l.slots_per_shard);
  h->buckets_per_shard = static_cast<std::uint32_t>(l.buckets_per_shard);
  h->key_cap = static_cast<std::uint32_t>(l.key_cap);
  h->state_bytes = static_cast<std::uint32_t>(l.state_bytes);
  h->region_bytes = l.bytes;
  h->slot_stride = l.slot_stride;
  h->shard_stride = l.shard_stride;
  h->shards_offset = l.shards_offset;
  h->slots_offset = l.slots_offset;
  h->seed = seed;
  h->spec = spec;
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

// Checks a region made elsewhere against what this process expects of it, then adopts its layout and seed.
void attach_region(Region& r, const LimitSpec& spec, const SharedOptions& o) {
  attach_region(r, stored_spec(spec), layout_for(o.max_keys, o.max_key_bytes, o.shards));
}

void attach_region(Region& r, const StoredSpec& spec, const Layout& mine) {
  const RegionHeader& h = r.header();
  const Layout stored = checked_layout(h, r.bytes());
  const StoredSpec theirs = h.spec;
  const std::string differs = spec_difference(theirs, spec);
  if (!differs.empty()) throw InvalidArgument("the region was made for a different limit: " + differs);
  if (stored.shards != mine.shards || stored.slots_per_shard != mine.slots_per_shard ||
      stored.key_cap != mine.key_cap || stored.state_bytes != mine.state_bytes) {
    throw InvalidArgument("the region was made with other options: it has " + describe(stored) +
                          "; this process asks for " + describe(mine));
  }
  r.adopt(stored, h.seed);
}

}  // namespace rk::store::shm
