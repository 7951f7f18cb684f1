// The batched store's key table (store/batched/key_table.h) without Redis: the attack its seeded hash answers, on a
// plain map, and what a key is charged against the memory budget. The store itself under the same keys, and under
// floods, is in key_table_redis_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>

#include "colliding_keys.h"
#include "store/batched/batcher.h"

namespace rk::store::batched {
namespace {

using namespace std::chrono_literals;
using attack::buckets_for;
using attack::colliding_keys;
using attack::kAttackKeys;

LimitSpec fixed() { return LimitSpec{.algorithm = Algorithm::kFixedWindow, .limit = 5, .window = Nanos{1h}}; }

// The attack is real: a map hashed by std::hash puts every one of the keys in one chain, so each lookup there walks
// up to all of them (a map keyed as the key table's are, with std::hash in place of the store's seeded hash).
TEST(BatcherHostileKeys, KeysCollidingUnderStdHashPileUpInAnUnseededMap) {
  const auto keys = colliding_keys(kAttackKeys);
  std::unordered_map<std::string, int> m;
  for (const auto& k : keys) m.emplace(k, 0);
  ASSERT_EQ(m.bucket_count(), buckets_for(kAttackKeys));
  EXPECT_EQ(m.bucket_size(m.bucket(keys.front())), kAttackKeys);
}

// A sliding log is charged its whole log at the limit, which it may grow to.
TEST(BatcherHostileKeys, ASlidingLogIsChargedItsWholeLog) {
  const LimitSpec log{.algorithm = Algorithm::kSlidingLog, .limit = 1000, .window = Nanos{1h}};
  EXPECT_GE(Batcher::key_bytes(log, "k"), Batcher::key_bytes(fixed(), "k") + 1000 * 16);
}

}  // namespace
}  // namespace rk::store::batched
