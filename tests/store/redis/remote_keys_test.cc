// The Redis keys of a store key (store/redis/remote.h's redis_key and redis_keys, shared_counters.h's counters_key
// and snapshot_key): every kind has a hash tag that no byte of a client's values can shape, so that no choice of
// values piles keys onto one Cluster slot, and so onto one node. Pure: no Redis here (tests/integration/
// redis_test.py's ClusterSlotsTest sends the same values through the real server to a real Cluster).
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "store/redis/cluster.h"
#include "store/redis/remote.h"
#include "store/redis/shared_counters.h"

namespace rk::store::redis {
namespace {

// A store key as the service makes one: the rule's prefix, then each entry as <length>:<text>.
std::string store_key(std::string_view rule_hash, std::string_view value) {
  return "rk:" + std::string(rule_hash) + ":4:user" + std::to_string(value.size()) + ":" + std::string(value);
}

constexpr std::string_view kRule = "0123456789abcdef";

// Which third of the slots holds `slot`: a 3-primary Cluster (`redis-cli --cluster create`) gives each one a third.
int primary_of(std::uint16_t slot) { return slot * 3 / static_cast<int>(kSlots); }

std::set<std::uint16_t> slots_of(const std::vector<std::string>& keys) {
  std::set<std::uint16_t> slots;
  for (const std::string& k : keys) slots.insert(key_slot(k));
  return slots;
}

// Values a client can choose so that their keys share one slot whatever the (secret) rule hash before them: CRC-16
// is linear, so two values of one length whose CRCs agree in the slot's 14 bits agree after any prefix. Each is 5
// random letters and 3 more searched so that its CRC's slot bits are those of the first: about 16 384 tries each.
std::vector<std::string> values_of_one_crc_slot(std::size_t n) {
  constexpr std::string_view kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
  std::mt19937 rng(19);
  std::vector<std::string> values;
  std::optional<std::uint16_t> target;
  while (values.size() < n) {
    std::string v(8, 'a');
    for (std::size_t i = 0; i < 5; ++i) v[i] = kLetters[rng() % kLetters.size()];
    for (std::size_t tail = 0; tail < kLetters.size() * kLetters.size() * kLetters.size(); ++tail) {
      v[5] = kLetters[tail % 64];
      v[6] = kLetters[tail / 64 % 64];
      v[7] = kLetters[tail / 4096];
      const std::uint16_t slot = crc16(v) & (kSlots - 1);
      if (!target) target = slot;
      if (slot == *target) {
        values.push_back(v);
        break;
      }
    }
  }
  return values;
}

// Whole-key hashing (an empty tag, "{}") is not enough: values found without knowing the rule's hash put every key
// of any rule in one slot.
TEST(RedisKeys, ValuesWhoseCrcsAgreeDoNotShareASlot) {
  const std::vector<std::string> values = values_of_one_crc_slot(60);
  std::vector<std::string> whole_a, whole_b, ours_a, ours_b;
  for (const std::string& v : values) {
    whole_a.push_back("rk:{}" + store_key(kRule, v).substr(3));  // the attack on a key hashed whole
    whole_b.push_back("rk:{}" + store_key("fedcba9876543210", v).substr(3));
    ours_a.push_back(redis_key(store_key(kRule, v)));
    ours_b.push_back(redis_key(store_key("fedcba9876543210", v)));
  }
  ASSERT_EQ(slots_of(whole_a).size(), 1u);  // the attack works, and for another rule as well
  ASSERT_EQ(slots_of(whole_b).size(), 1u);
  EXPECT_GE(slots_of(ours_a).size(), 57u);  // 60 keys over 16 384 slots: rarely more than one pair shares one
  EXPECT_GE(slots_of(ours_b).size(), 57u);
}

// The values a client might send to end or open a hash tag early, against plain ones: as many slots either way, on
// every primary. Exact keys (redis_key), packed ones (redis_keys) and a batched key's two (counters_key,
// snapshot_key, which must share one slot for their script).
TEST(RedisKeys, NoValueShapesTheHashTagOfAnyKind) {
  std::vector<std::vector<std::string>> families(6);
  for (int i = 0; i < 60; ++i) {
    const std::string n = std::to_string(i);
    families[0].push_back("u" + n);  // plain
    families[1].push_back("x}" + n);
    families[2].push_back("{x}" + n);
    families[3].push_back("x{" + n);
    families[4].push_back("{}" + n);
    families[5].push_back("}{" + n);
  }
  for (const auto& values : families) {
    std::vector<std::string> exact, counters, packed;
    for (const std::string& v : values) {
      const std::string key = store_key(kRule, v);
      exact.push_back(redis_key(key));
      counters.push_back(counters_key(key));
      EXPECT_EQ(key_slot(counters_key(key)), key_slot(snapshot_key(key))) << v;
      const std::vector<std::string> p = redis_keys(key, 1u << 20);
      ASSERT_EQ(p.size(), 2u);
      EXPECT_EQ(key_slot(p[0]), key_slot(p[1])) << v;
      packed.push_back(p[0]);
    }
    for (const auto* keys : {&exact, &counters, &packed}) {
      const std::set<std::uint16_t> slots = slots_of(*keys);
      EXPECT_GE(slots.size(), 57u) << values[0] << " " << (*keys)[0];
      std::set<int> primaries;
      for (const std::uint16_t s : slots) primaries.insert(primary_of(s));
      EXPECT_EQ(primaries.size(), 3u) << values[0] << " " << (*keys)[0];
    }
  }
}

// The tag: fixed width, hex digits only, first in the key after "rk:", the same on every server; the full store key
// follows it, so two store keys never share a Redis key, and no kind's name is another kind's.
TEST(RedisKeys, TheTagIsADigestAndTheWholeKeyFollowsIt) {
  const std::string key = store_key(kRule, "alice");
  const std::string exact = redis_key(key);
  ASSERT_EQ(exact.size(), key.size() + 10);
  EXPECT_EQ(exact.substr(0, 4), "rk:{");
  EXPECT_EQ(exact[12], '}');
  EXPECT_EQ(exact.find_first_not_of("0123456789abcdef", 4), 12u);
  EXPECT_EQ(exact.substr(13), key.substr(3));
  EXPECT_EQ(redis_key(key), exact);
  EXPECT_EQ(key_slot(exact), crc16(exact.substr(4, 8)) & (kSlots - 1));
  EXPECT_EQ(counters_key(key).substr(0, 6), "rk:{b:");
  EXPECT_EQ(counters_key(key).substr(6, 8), exact.substr(4, 8));  // one digest for both kinds
  EXPECT_EQ(counters_key(key).substr(14), "}" + key.substr(3) + "c");
  EXPECT_EQ(snapshot_key(key).substr(14), "}" + key.substr(3) + "s");
  // Outside "rk:" (none of the service's keys): the tag leads, and the key stays whole.
  EXPECT_EQ(redis_key("plain").substr(10), "plain");
  EXPECT_EQ(redis_key("plain")[0], '{');
  EXPECT_NE(redis_key("rk:plain"), redis_key("plain"));
  EXPECT_NE(counters_key("rk:plain"), counters_key("plain"));
  EXPECT_NE(counters_key("rk:a:b}"), counters_key("rk:a:b"));
  const std::vector<std::string> keys = {"rk:0a1b:user", "rk:0a1b:{same}", "rk:0a1b:}x{", "rk:}", "rk:", "other", "{}",
                                         "}{",           "rk:0a1b:user}"};
  std::set<std::string> names;
  for (const std::string& k : keys) {
    for (const std::string& name : {redis_key(k), counters_key(k), snapshot_key(k)}) {
      EXPECT_TRUE(names.insert(name).second) << name;
    }
  }
  for (const std::string& k : keys) {  // a packed hash, and a packed key's own key, are no other kind's name
    const std::vector<std::string> packed = redis_keys(k, kMaxPackedHashes);
    if (packed.size() == 1) continue;  // not packed: its redis_key
    for (const std::string& name : packed) EXPECT_EQ(names.count(name), 0u) << name;
  }
}

}  // namespace
}  // namespace rk::store::redis
