// The decision scripts (src/store/redis/lua/) in a real redis-server, on promises a single decision makes: what the
// differential test (tests/differential/) compares within a tolerance, asserted exactly here.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "redis_process.h"
#include "store/redis/remote.h"
#include "store/remote/remote_store.h"

namespace rk::redis {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

std::vector<store::RemoteResult> decide(store::RemoteStore& s, std::vector<store::RemoteOp> ops, Nanos now) {
  std::promise<std::vector<store::RemoteResult>> p;
  auto f = p.get_future();
  s.decide(std::move(ops), now, [&p](std::vector<store::RemoteResult> r) { p.set_value(std::move(r)); });
  return f.get();
}

// As Earrrl.APeeksRetryAfterHoldsForTheStateItLeft (tests/unit/earrrl_test.cc), in earrrl.lua, unpacked and packed:
// a peek leaves the state as it was, and its retry_after holds for the attempt that then decides from it (here a
// peek too, which decides as that attempt would and leaves the state for the next).
TEST(EarrrlScript, APeeksRetryAfterHoldsForTheStateItLeft) {
  RedisProcess redis;
  const LimitSpec spec{.algorithm = Algorithm::kEarrrl,
                       .limit = 2,
                       .window = Nanos{1'496'494'349'083},
                       .half_life = Nanos{3'676'054'682'684'580},
                       .count_refused = false};
  for (const std::uint32_t packed : {0u, 16u}) {
    auto store = make_redis_remote({.url = redis.url(), .caller_clock = true, .timeout = 10s, .packed_hashes = packed});
    const std::string key = "rk:earrrl:" + std::to_string(packed);
    ASSERT_TRUE(decide(*store, {{&spec, key, std::uint64_t{1} << 36, false}}, Nanos{27'589'418'441'108'499})
                    .at(0).decision.allowed);
    ASSERT_FALSE(decide(*store, {{&spec, key, 1, false}}, Nanos{27'589'418'441'108'978}).at(0).decision.allowed);
    int refused = 0, peeks = 0;
    for (std::int64_t t = 27'590'188'606'082'934, i = 0; i < 300; t += 235'390'959'835'387, ++i) {
      for (const std::uint64_t cost : {0, 1, 3}) {
        const auto now = decide(*store, {{&spec, key, cost, true}}, Nanos{t}).at(0);
        ASSERT_EQ(now.status, store::RemoteResult::Status::kOk) << now.error;
        if (now.decision.allowed) continue;
        ++peeks;
        const auto then = decide(*store, {{&spec, key, cost, true}}, Nanos{t} + now.decision.retry_after).at(0);
        refused += !then.decision.allowed;
      }
    }
    EXPECT_GT(peeks, 600) << "packed " << packed;
    EXPECT_EQ(refused, 0) << "packed " << packed << ": " << peeks << " peeks refused";
    store->close();
  }
}

}  // namespace
}  // namespace rk::redis
