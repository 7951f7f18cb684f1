// The decision scripts (src/store/redis/lua/) in a real redis-server, on promises a single decision makes: what the
// differential test (tests/differential/) compares within a tolerance, asserted exactly here. And their replies as
// the C++ side reads them (store/redis/algorithm_scripts.h), without a server.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <future>
#include <string>
#include <vector>

#include "support/redis_process.h"
#include "store/redis/remote.h"
#include "store/redis/algorithm_scripts.h"
#include "store/remote/remote_store.h"

namespace rk::store::redis {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

std::vector<store::remote::RemoteResult> decide(store::remote::RemoteStore& s, std::vector<store::remote::RemoteOp> ops,
                                                Nanos now) {
  std::promise<std::vector<store::remote::RemoteResult>> p;
  auto f = p.get_future();
  s.decide(std::move(ops), now, [&p](std::vector<store::remote::RemoteResult> r) { p.set_value(std::move(r)); });
  return f.get();
}

// As Earrrl.APeeksRetryAfterHoldsForTheStateItLeft (tests/core/earrrl_test.cc), in earrrl.lua, unpacked and packed:
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
                    .at(0)
                    .decision.allowed);
    ASSERT_FALSE(decide(*store, {{&spec, key, 1, false}}, Nanos{27'589'418'441'108'978}).at(0).decision.allowed);
    int refused = 0, peeks = 0;
    for (std::int64_t t = 27'590'188'606'082'934, i = 0; i < 300; t += 235'390'959'835'387, ++i) {
      for (const std::uint64_t cost : {0, 1, 3}) {
        const auto now = decide(*store, {{&spec, key, cost, true}}, Nanos{t}).at(0);
        ASSERT_EQ(now.status, store::remote::RemoteResult::Status::kOk) << now.error;
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

// The script's reply as the C++ side reads it: three doubles as 24 little-endian bytes, whole nanoseconds as
// integers. Each malformed reply is named, never taken for a decision.
std::string doubles(double a, double b, double c) {
  std::string out;
  for (double v : {a, b, c}) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(bits >> (8 * i) & 0xff));
  }
  return out;
}

TEST(ScriptReply, DecodesEveryFieldExactly) {
  const std::vector<std::string> e = {"0", doubles(10, 0.125, 10.000000000000002), "1500000000", "9000000001", "0"};
  const auto d = decode_reply(e);
  ASSERT_TRUE(std::holds_alternative<Decision>(d)) << std::get<std::string>(d);
  const Decision& x = std::get<Decision>(d);
  EXPECT_FALSE(x.allowed);
  EXPECT_EQ(x.limit, 10);
  EXPECT_EQ(x.remaining, 0.125);
  EXPECT_EQ(x.estimate, 10.000000000000002);  // every bit
  EXPECT_EQ(x.retry_after, Nanos{1'500'000'000});
  EXPECT_EQ(x.reset_after, Nanos{9'000'000'001});
  const auto none = decode_reply(std::vector<std::string>{"1", doubles(3, 2, std::nan("")), "0", "5", "7"});
  ASSERT_TRUE(std::holds_alternative<Decision>(none));
  EXPECT_FALSE(std::get<Decision>(none).estimate.has_value());  // NaN: no estimate
  EXPECT_EQ(std::get<Decision>(none).delay, Nanos{7});
}

TEST(ScriptReply, EachMalformedReplyIsNamed) {
  const std::string ok = doubles(1, 1, 1);
  for (const auto& [e, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"1", ok, "0", "0"}, "4 elements, not 5"},
           {{"yes", ok, "0", "0", "0"}, "allowed='yes'"},
           {{"1", "short", "0", "0", "0"}, "5 bytes of numbers, not 24"},
           {{"1", doubles(std::nan(""), 1, 1), "0", "0", "0"}, "limit or remaining that is not a number"},
           {{"1", doubles(1, INFINITY, 1), "0", "0", "0"}, "limit or remaining that is not a number"},
           {{"1", ok, "soon", "0", "0"}, "not a number"},
       }) {
    const auto d = decode_reply(e);
    ASSERT_TRUE(std::holds_alternative<std::string>(d)) << says;
    EXPECT_NE(std::get<std::string>(d).find(says), std::string::npos) << std::get<std::string>(d);
  }
}

}  // namespace
}  // namespace rk::store::redis
