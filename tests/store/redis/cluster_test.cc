// Redis Cluster's slots (store/redis/cluster.h) against the specification's vectors. The keys the store makes, each
// with a slot no value inside it can choose, are remote_keys_test.cc's.
#include "store/redis/cluster.h"

#include <gtest/gtest.h>

#include <string>

namespace rk::store::redis {
namespace {

TEST(RedisSlots, Crc16AndHashTagsAgainstPublishedVectors) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the Cluster specification's check value
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") & 16383);  // an empty tag is no tag
  EXPECT_EQ(key_slot("foo{{bar}}zap"), crc16("{bar") & 16383);
}

}  // namespace
}  // namespace rk::store::redis
