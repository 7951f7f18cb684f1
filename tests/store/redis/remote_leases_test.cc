// The `concurrency` algorithm's leases in a real redis-server (lua/leases.lua), shared by two services as by a
// fleet: at most max_in_flight held across both, a dead client's slot back after the TTL (on the callers' clock,
// `--redis-clock local`, and on Redis's own TIME with a short TTL), and releases that free nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "service/service.h"
#include "store/redis/remote.h"
#include "support/redis_process.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

class RemoteLeases : public ::testing::Test {
 protected:
  void TearDown() override {
    services_.clear();
    reloaders_.clear();
    if (remote_) remote_->close();
    std::filesystem::remove_all(dir_);
  }

  Service& make(const std::string& url, bool caller_clock, const std::string& ttl = "30s") {
    if (!remote_) {
      remote_ = store::redis::make_redis_remote({.url = url, .caller_clock = caller_clock, .timeout = 2s});
      std::filesystem::create_directories(dir_);
      std::ofstream(dir_ / "r.yaml") << "domain: llm\ndescriptors:\n  - key: user\n    rate_limit: {algorithm: "
                                        "concurrency, max_in_flight: 10, lease_ttl: " +
                                            ttl + "}\n";
    }
    reloaders_.push_back(std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_}));
    EXPECT_TRUE(reloaders_.back()->load_now().empty());
    services_.push_back(std::make_unique<Service>(*reloaders_.back(), clock_, ServiceOptions{.remote = remote_}));
    return *services_.back();
  }

  static LeaseAnswer answer(const LeaseResult& r) {
    if (auto* e = std::get_if<RequestError>(&r)) ADD_FAILURE() << e->field << ": " << e->message;
    const LeaseAnswer a = std::get<LeaseAnswer>(r);
    EXPECT_EQ(a.store_error, "");
    return a;
  }
  static LeaseAnswer acquire(Service& s, const std::string& user) {
    return answer(s.acquire({.domain = "llm", .entries = {{"user", user}}}));
  }
  static LeaseAnswer release(Service& s, const std::string& user, const std::string& lease) {
    return answer(s.release({.domain = "llm", .entries = {{"user", user}}, .lease = lease}));
  }

  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("rk-leases-" + std::to_string(::getpid()));
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'123'456'789});
  std::shared_ptr<store::remote::RemoteStore> remote_;
  std::vector<std::unique_ptr<rules::Reloader>> reloaders_;
  std::vector<std::unique_ptr<Service>> services_;
};

TEST_F(RemoteLeases, AFleetHoldsAtMostTheLimitAndADeadClientsSlotComesBack) {
  RedisProcess redis;
  Service& a = make(redis.url(), true);
  Service& b = make(redis.url(), true);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(acquire(i % 2 ? a : b, "42").done);
  const LeaseAnswer full = acquire(a, "42");
  EXPECT_FALSE(full.done);
  EXPECT_EQ(full.in_flight, 10u);
  EXPECT_EQ(full.retry_after, 30s);
  EXPECT_TRUE(acquire(b, "7").done);
  clock_->advance(30s - 1us);
  EXPECT_FALSE(acquire(b, "42").done);
  clock_->advance(1us);
  EXPECT_TRUE(acquire(b, "42").done);  // every client died: their leases expired
}

TEST_F(RemoteLeases, ReleaseOfUnknownExpiredOrSomeoneElsesLeaseChangesNothing) {
  RedisProcess redis;
  Service& a = make(redis.url(), true);
  Service& b = make(redis.url(), true);
  const std::string mine = acquire(a, "42").lease;
  const std::string theirs = acquire(a, "7").lease;
  ASSERT_EQ(mine.size(), 32u);
  EXPECT_FALSE(release(b, "42", "ffffffffffffffffffffffffffffffff").done);
  EXPECT_FALSE(release(b, "42", theirs).done);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(acquire(b, "42").done);
  EXPECT_FALSE(acquire(b, "42").done);        // nothing was freed
  EXPECT_TRUE(release(b, "42", mine).done);   // released by another server of the fleet
  EXPECT_FALSE(release(a, "42", mine).done);  // twice
  EXPECT_TRUE(release(b, "7", theirs).done);
  const std::string late = acquire(a, "42").lease;
  clock_->advance(30s);
  EXPECT_FALSE(release(a, "42", late).done);  // expired
}

// Redis's own clock: a lease of 200 ms, its holder gone, frees its slot within real time.
TEST_F(RemoteLeases, AShortTtlExpiresOnRedisTime) {
  RedisProcess redis;
  Service& a = make(redis.url(), false, "200ms");
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(acquire(a, "42").done);
  EXPECT_FALSE(acquire(a, "42").done);
  std::this_thread::sleep_for(250ms);
  EXPECT_TRUE(acquire(a, "42").done);
}

// 100 clients over two servers on a limit of 10: those holding a lease, sampled throughout, never pass 10.
TEST_F(RemoteLeases, HundredClientsNeverHoldMoreThanTen) {
  RedisProcess redis;
  Service* servers[] = {&make(redis.url(), true), &make(redis.url(), true)};
  std::atomic<bool> stop{false};
  std::atomic<int> most{0}, holding{0}, granted{0};
  auto note = [&](int n) {
    for (int m = most.load(); n > m && !most.compare_exchange_weak(m, n);) {
    }
  };
  std::thread sampler([&] {
    while (!stop) {
      note(holding.load());
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < 100; ++c) {
    clients.emplace_back([&, c] {
      Service& s = *servers[c % 2];
      for (int i = 0; i < 5; ++i) {
        const LeaseAnswer a = acquire(s, "42");
        if (!a.done) continue;
        note(holding.fetch_add(1) + 1);
        granted.fetch_add(1);
        std::this_thread::sleep_for(1ms);
        holding.fetch_sub(1);
        EXPECT_TRUE(release(*servers[(c + 1) % 2], "42", a.lease).done);
      }
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  sampler.join();
  EXPECT_LE(most.load(), 10);
  EXPECT_GE(most.load(), 2);  // they did overlap
  EXPECT_GT(granted.load(), 10);
}

}  // namespace
}  // namespace rk::service
