// The `concurrency` algorithm through the service (service/leases.cc), its leases in memory: acquire and release,
// expiry on the injected clock, releases that free nothing, and checks refused on a concurrency limit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "service/service.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;

const char* kRules = R"(
domain: llm
descriptors:
  - key: user
    rate_limit: {algorithm: concurrency, max_in_flight: 10, lease_ttl: 30s}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 5}
)";

class LeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-leases-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "llm.yaml") << kRules;
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    ASSERT_TRUE(reloader_->load_now().empty());
    service_ = std::make_unique<Service>(*reloader_, clock_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LeaseAnswer acquire(const std::string& user) {
    auto r = service_->acquire({.domain = "llm", .entries = {{"user", user}}});
    if (auto* e = std::get_if<RequestError>(&r)) ADD_FAILURE() << e->field << ": " << e->message;
    return std::get<LeaseAnswer>(r);
  }
  LeaseAnswer release(const std::string& user, const std::string& lease) {
    auto r = service_->release({.domain = "llm", .entries = {{"user", user}}, .lease = lease});
    if (auto* e = std::get_if<RequestError>(&r)) ADD_FAILURE() << e->field << ": " << e->message;
    return std::get<LeaseAnswer>(r);
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<Service> service_;
};

TEST_F(LeasesTest, AcquiresUpToTheLimitAndReleases) {
  std::vector<std::string> held;
  for (int i = 0; i < 10; ++i) {
    const LeaseAnswer a = acquire("42");
    ASSERT_TRUE(a.done);
    EXPECT_EQ(a.in_flight, static_cast<std::uint32_t>(i + 1));
    EXPECT_EQ(a.lease.size(), 32u);
    held.push_back(a.lease);
  }
  const LeaseAnswer full = acquire("42");
  EXPECT_FALSE(full.done);
  EXPECT_TRUE(full.lease.empty());
  EXPECT_EQ(full.retry_after, 30s);
  EXPECT_TRUE(acquire("7").done);  // another user's slots
  EXPECT_TRUE(release("42", held[3]).done);
  EXPECT_TRUE(acquire("42").done);
}

TEST_F(LeasesTest, AKilledClientsSlotComesBackAfterTheTtl) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(acquire("42").done);  // then every client dies
  clock_->advance(30s - 1ns);
  EXPECT_FALSE(acquire("42").done);
  clock_->advance(1ns);
  EXPECT_TRUE(acquire("42").done);
}

TEST_F(LeasesTest, ReleaseOfUnknownExpiredOrSomeoneElsesLeaseChangesNothing) {
  const std::string mine = acquire("42").lease;
  const std::string theirs = acquire("7").lease;
  EXPECT_FALSE(release("42", "ffffffffffffffffffffffffffffffff").done);
  EXPECT_FALSE(release("42", theirs).done);  // the id of another key's lease frees nothing here
  EXPECT_FALSE(release("42", "x").done);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(acquire("42").done);
  EXPECT_FALSE(acquire("42").done);  // still 10 held: nothing was freed
  EXPECT_TRUE(release("7", theirs).done);
  clock_->advance(30s);
  EXPECT_FALSE(release("42", mine).done);  // expired
  auto bad = service_->release({.domain = "llm", .entries = {{"user", "42"}}});
  ASSERT_TRUE(std::holds_alternative<RequestError>(bad));
  EXPECT_EQ(std::get<RequestError>(bad).field, "lease");
}

TEST_F(LeasesTest, ADescriptorWithoutAConcurrencyLimitIsABadRequest) {
  auto r = service_->acquire({.domain = "llm", .entries = {{"tenant", "a"}}});
  ASSERT_TRUE(std::holds_alternative<RequestError>(r));
  EXPECT_EQ(std::get<RequestError>(r).field, "descriptor");
  r = service_->acquire({.domain = "llm", .entries = {}});
  ASSERT_TRUE(std::holds_alternative<RequestError>(r));
  EXPECT_EQ(std::get<RequestError>(r).field, "descriptor.entries");
}

// A check (HTTP /v1/check, Envoy's gRPC API, forward-auth) has no release: a concurrency limit refuses it by name.
TEST_F(LeasesTest, ACheckOnAConcurrencyLimitIsRefused) {
  CheckRequest c{.domain = "llm", .descriptors = {{.entries = {{"tenant", "a"}}}, {.entries = {{"user", "42"}}}}};
  auto r = service_->check(c);
  ASSERT_TRUE(std::holds_alternative<RequestError>(r));
  EXPECT_EQ(std::get<RequestError>(r).field, "descriptors[1]");
  EXPECT_NE(std::get<RequestError>(r).message.find("concurrency"), std::string::npos);
}

// 100 clients on a limit of 10, each acquiring, holding a moment and releasing; the leases held, sampled by a
// thread of its own throughout, never pass 10.
TEST_F(LeasesTest, HundredClientsNeverHoldMoreThanTen) {
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
    clients.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto r = service_->acquire({.domain = "llm", .entries = {{"user", "42"}}});
        const auto& a = std::get<LeaseAnswer>(r);
        if (!a.done) continue;
        note(holding.fetch_add(1) + 1);
        granted.fetch_add(1);
        std::this_thread::yield();
        holding.fetch_sub(1);
        ASSERT_TRUE(
            std::get<LeaseAnswer>(service_->release({.domain = "llm", .entries = {{"user", "42"}}, .lease = a.lease}))
                .done);
      }
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  sampler.join();
  EXPECT_LE(most.load(), 10);
  EXPECT_GT(granted.load(), 0);
}

}  // namespace
}  // namespace rk::service
