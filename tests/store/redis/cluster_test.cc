// Redis Cluster's slots (store/redis/cluster.h) against the specification's vectors, and the keys the store makes
// (store/redis/remote.h): each has its own slot, which no value inside it can choose.
#include "store/redis/cluster.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "store/redis/remote.h"

namespace rk::redis {
namespace {

TEST(RedisSlots, Crc16AndHashTagsAgainstPublishedVectors) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the Cluster specification's check value
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") & 16383);  // an empty tag is no tag
  EXPECT_EQ(key_slot("foo{{bar}}zap"), crc16("{bar") & 16383);
}

// Issue 19: a descriptor value holding "{x}" chose the Cluster slot of its key (Redis hashes only the first
// {...}), so clients could pile their keys onto one node. Every key now leads with an empty tag, "{}", after which
// Redis hashes the whole key (issue 17: it was a digest of the key, 18 bytes of every key's memory).
TEST(RedisKeys, EachKeyHasItsOwnSlotThatNoValueCanChoose) {
  const std::string key = "rk:0123456789abcdef:4:user5:alice";
  const std::string tagged = redis::redis_key(key);
  EXPECT_EQ(tagged, "rk:{}0123456789abcdef:4:user5:alice");
  EXPECT_EQ(redis::redis_key(key), tagged);  // the same on every server
  EXPECT_EQ(key_slot(tagged), crc16(tagged) & 16383);
  EXPECT_EQ(redis::redis_key("plain"), "{}plain");  // outside "rk:": still its own Redis key
  EXPECT_NE(redis::redis_key("rk:plain"), redis::redis_key("plain"));
  std::set<std::uint16_t> slots;
  for (int i = 0; i < 1000; ++i) {
    const std::string hostile = "rk:0123456789abcdef:4:user:{same}" + std::to_string(i);
    ASSERT_EQ(key_slot(hostile), key_slot("{same}"));  // the attack, without our tag: one slot for all
    slots.insert(key_slot(redis::redis_key(hostile)));
  }
  EXPECT_GT(slots.size(), 900u);  // 1000 keys over 16384 slots: a few share one by chance
}

}  // namespace
}  // namespace rk::redis
