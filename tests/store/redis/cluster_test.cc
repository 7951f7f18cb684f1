// Redis Cluster's slots (store/redis/cluster.h) against the specification's vectors. The keys the store makes, each
// with a slot no value inside it can choose, are remote_keys_test.cc's. And reserve and settle on a real cluster of
// three primaries: a reservation's record and its key's state in one slot, so one script takes both.
#include "store/redis/cluster.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "library/random_id.h"
#include "store/redis/remote.h"
#include "support/redis_process.h"

namespace rk::store::redis {
namespace {

TEST(RedisSlots, Crc16AndHashTagsAgainstPublishedVectors) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the Cluster specification's check value
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") & 16383);  // an empty tag is no tag
  EXPECT_EQ(key_slot("foo{{bar}}zap"), crc16("{bar") & 16383);
}

using namespace std::chrono_literals;

// Three primaries, no replicas, made with redis-cli --cluster create; each node's cluster file in a directory of its
// own, removed after.
class ThreeShards {
 public:
  ThreeShards() {
    for (auto& n : nodes_) {
      char dir[] = "/tmp/rk-cluster-XXXXXX";
      EXPECT_NE(::mkdtemp(dir), nullptr);
      dirs_.emplace_back(dir);
      n = std::make_unique<redis_test::RedisProcess>(
          std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--dir", dir,
                                   "--cluster-node-timeout", "1000"});
    }
    std::string create = "--cluster create";
    for (const auto& n : nodes_) create += " 127.0.0.1:" + std::to_string(n->port());
    redis_test::redis_cli(nodes_[0]->port(), create + " --cluster-replicas 0 --cluster-yes");
    for (int i = 0; i < 300 && !ok(); ++i) std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(ok()) << "the cluster did not come up";
  }
  ~ThreeShards() {
    for (auto& n : nodes_) n.reset();
    for (const auto& d : dirs_) std::filesystem::remove_all(d);
  }
  std::string url() const {
    std::string u = "redis+cluster://";
    for (const auto& n : nodes_) u += "127.0.0.1:" + std::to_string(n->port()) + (&n == &nodes_[2] ? "" : ",");
    return u;
  }

 private:
  bool ok() const {
    for (const auto& n : nodes_) {
      if (redis_test::redis_cli(n->port(), "CLUSTER INFO").find("cluster_state:ok") == std::string::npos) return false;
    }
    return true;
  }
  std::unique_ptr<redis_test::RedisProcess> nodes_[3];
  std::vector<std::string> dirs_;
};

TEST(RedisCluster, ReserveAndSettleOnThreePrimaries) {
  ThreeShards cluster;
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 3600s};
  const Nanos now{1'790'000'000'000'000'000};
  for (std::uint32_t packed : {0u, 4u}) {
    auto store =
        make_redis_remote({.url = cluster.url(), .caller_clock = true, .timeout = 5s, .packed_hashes = packed});
    for (int i = 0; i < 12; ++i) {  // keys on every shard
      const std::string key = "rk:cluster:" + std::to_string(packed) + ":" + std::to_string(i);
      const std::string id = library::random_id();
      EXPECT_EQ(key_slot(reservation_key(key, id, packed)), key_slot(redis_keys(key, packed).back()));
      std::promise<remote::ReservationResult> reserved, settled;
      store->reserve(&spec, key, id, 6, 60s, now, [&](remote::ReservationResult r) { reserved.set_value(r); });
      const remote::ReservationResult r = reserved.get_future().get();
      ASSERT_TRUE(r.done) << r.error;
      EXPECT_EQ(r.decision.remaining, 4);
      store->settle(&spec, key, id, 2, now + 1ms, [&](remote::ReservationResult a) { settled.set_value(a); });
      const remote::ReservationResult s = settled.get_future().get();
      ASSERT_TRUE(s.done) << s.error;
      EXPECT_EQ(s.reserved, 6u);
      EXPECT_EQ(s.decision.remaining, 8);  // 4 of the 6 given back
    }
    store->close();
  }
}

}  // namespace
}  // namespace rk::store::redis
