// store/shm/shard_table.cc: a shared store's keys in its region (shard_table.h says how an update survives a
// process that dies in it, and a region that another process corrupted).
#include "store/shm/shard_table.h"

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>
#include <vector>

#include "base/hash.h"

namespace rk::store::shm {

// The shard's lock; taken over, with the shard repaired, from a process that died holding it.
ShardTable::Locked::Locked(const Region& r, std::size_t s) : mu_(&r.shard(s).mu) {
  const int rc = pthread_mutex_lock(mu_);
  if (rc == EOWNERDEAD) {
    repair(r, s);
    pthread_mutex_consistent(mu_);
    ++r.shard(s).recoveries;
  } else if (rc != 0) {
    throw std::system_error(rc, std::generic_category(), "locking a shared store shard");
  }
}

// Undoes a journalled update, then rebuilds the shard's index from its slots.
void ShardTable::repair(const Region& r, std::size_t s) {
  const Layout& l = r.layout();
  ShardHeader& sh = r.shard(s);
  const std::uint32_t journalled = sh.journal_slot.load(std::memory_order_acquire);
  if (journalled != kNil && journalled < l.slots_per_shard) {
    std::memcpy(Region::state_of(r.slot(s, journalled)), r.journal(s), l.state_bytes);
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

void ShardTable::corrupt(std::size_t s, const std::string& what) const {
  throw SharedRegionCorrupt("the shared store's shard " + std::to_string(s) + " is corrupt: " + what +
                            " (its lock is released and other shards still work; make the region anew)");
}

// An index read from the region, once: a slot of the shard, or kNil.
std::uint32_t ShardTable::index(std::size_t s, const std::uint32_t& in_region, const char* what) const {
  const std::uint32_t i = in_region;
  if (i != kNil && i >= region_.layout().slots_per_shard) {
    corrupt(s, std::string(what) + " is " + std::to_string(i) + ", past the shard's " +
                   std::to_string(region_.layout().slots_per_shard) + " slots");
  }
  return i;
}

// The link in bucket b's chain that holds slot `stop_at` (kNil: the slot of `key`), or the chain's kNil end. A
// chain of more links than the shard has slots loops: reported, never followed round again.
std::uint32_t* ShardTable::chain_link(std::size_t s, std::size_t b, std::uint32_t stop_at, std::uint64_t hash,
                                      std::string_view key) const {
  std::uint32_t* link = &region_.buckets(s)[b];
  for (std::size_t links = 0;; ++links) {
    const std::uint32_t i = index(s, *link, "a bucket chain link");
    if (i == kNil) return link;
    if (links == region_.layout().slots_per_shard) {
      corrupt(s, "bucket " + std::to_string(b) + "'s chain loops (more links than the shard's " +
                     std::to_string(links) + " slots)");
    }
    SlotHead& slot = region_.slot(s, i);
    if (stop_at != kNil ? i == stop_at
                        : slot.hash == hash && slot.key_len == key.size() &&
                              (key.empty() || std::memcmp(region_.key_of(slot), key.data(), key.size()) == 0)) {
      return link;
    }
    link = &slot.bucket_next;
  }
}

std::uint32_t ShardTable::find(std::size_t s, std::uint64_t hash, std::string_view key) const {
  return *chain_link(s, bucket_of(region_.layout(), hash), kNil, hash, key);
}

void ShardTable::lru_unlink(ShardHeader& sh, std::size_t s, SlotHead& slot) {
  const std::uint32_t prev = index(s, slot.lru_prev, "an LRU link");
  const std::uint32_t next = index(s, slot.lru_next, "an LRU link");
  if (prev == kNil) sh.lru_head = next;
  else region_.slot(s, prev).lru_next = next;
  if (next == kNil) sh.lru_tail = prev;
  else region_.slot(s, next).lru_prev = prev;
}

void ShardTable::lru_push_front(ShardHeader& sh, std::size_t s, std::uint32_t i) {
  const std::uint32_t head = index(s, sh.lru_head, "the LRU list's head");
  SlotHead& slot = region_.slot(s, i);
  slot.lru_prev = kNil;
  slot.lru_next = head;
  if (head != kNil) region_.slot(s, head).lru_prev = i;
  sh.lru_head = i;
  if (sh.lru_tail == kNil) sh.lru_tail = i;
  slot.tick = ++sh.tick;
}

void ShardTable::touch(std::size_t s, std::uint32_t i) {
  ShardHeader& sh = region_.shard(s);
  if (sh.lru_head == i) {
    region_.slot(s, i).tick = ++sh.tick;
    return;
  }
  lru_unlink(sh, s, region_.slot(s, i));
  lru_push_front(sh, s, i);
}

// Takes slot i out of the index; it is not in use afterwards, and not yet on the free list.
void ShardTable::remove(std::size_t s, std::uint32_t i) {
  ShardHeader& sh = region_.shard(s);
  SlotHead& slot = region_.slot(s, i);
  std::uint32_t* link = chain_link(s, bucket_of(region_.layout(), slot.hash), i, 0, {});
  if (*link == kNil) corrupt(s, "slot " + std::to_string(i) + " is indexed but missing from its bucket's chain");
  const std::uint32_t next = index(s, slot.bucket_next, "a bucket chain link");
  slot.in_use.store(0, std::memory_order_release);
  *link = next;
  lru_unlink(sh, s, slot);
  --sh.count;
}

void ShardTable::free_slot(std::size_t s, std::uint32_t i) {
  ShardHeader& sh = region_.shard(s);
  region_.slot(s, i).lru_next = sh.free_head;
  sh.free_head = i;
}

void ShardTable::place(std::size_t s, std::uint32_t i, std::uint64_t hash, std::string_view key,
                       std::span<const unsigned char> fresh) {
  ShardHeader& sh = region_.shard(s);
  SlotHead& slot = region_.slot(s, i);
  slot.hash = hash;
  slot.key_len = static_cast<std::uint16_t>(key.size());
  if (!key.empty()) std::memcpy(region_.key_of(slot), key.data(), key.size());
  unsigned char* state = Region::state_of(slot);
  std::memset(state, 0, region_.layout().state_bytes);
  std::memcpy(state, fresh.data(), std::min(fresh.size(), region_.layout().state_bytes));
  std::uint32_t& head = region_.buckets(s)[bucket_of(region_.layout(), hash)];
  slot.bucket_next = index(s, head, "a bucket head");
  head = i;
  lru_push_front(sh, s, i);
  ++sh.count;
  slot.in_use.store(1, std::memory_order_release);
}

std::size_t ShardTable::shard_of(std::string_view key, std::uint64_t& hash) const {
  hash = base::hash_key(key, region_.seed());
  return hash % region_.layout().shards;
}

bool ShardTable::erase(std::string_view key) {
  std::uint64_t hash = 0;
  const std::size_t s = shard_of(key, hash);
  Locked lock(region_, s);
  const std::uint32_t i = find(s, hash, key);
  if (i == kNil) return false;
  remove(s, i);
  free_slot(s, i);
  return true;
}

SharedStats ShardTable::stats() const {
  SharedStats out;
  const Layout& l = region_.layout();
  out.capacity = l.shards * l.slots_per_shard;
  out.region_bytes = l.bytes;
  for (std::size_t s = 0; s < l.shards; ++s) {
    Locked lock(region_, s);
    const ShardHeader& sh = region_.shard(s);
    out.keys += sh.count;
    out.evictions += sh.evictions;
    out.recoveries += sh.recoveries;
  }
  return out;
}

}  // namespace rk::store::shm
