// The `concurrency` algorithm in shared memory (SharedConcurrencyLimiter): at most max_in_flight leases of a key
// among real forked processes, a dead holder's leases back after their time to live, a full region refusing rather
// than evicting a held lease, and a region made for another limit refused by name.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ratekeeper/ratekeeper.h"
#include "ratekeeper/shared.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

// Shared memory mapped before fork(), unmapped when the test ends.
class Mapping {
 public:
  explicit Mapping(std::size_t bytes) : bytes_(bytes) {
    base_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap");
  }
  ~Mapping() { ::munmap(base_, bytes_); }
  void* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* base_;
  std::size_t bytes_;
};

constexpr SharedOptions kOptions{.max_keys = 64, .max_key_bytes = 16, .shards = 4};

SharedConcurrencyLimiter make(const Mapping& m, std::uint32_t n, Nanos ttl, bool format = true,
                              const SharedOptions& o = kOptions) {
  return SharedConcurrencyLimiter::in_region(m.base(), m.bytes(), format, {.max_in_flight = n, .lease_ttl = ttl}, o);
}

TEST(SharedConcurrency, AtMostMaxInFlightThenARefusalUntilTheFirstExpiry) {
  Mapping m(SharedConcurrencyLimiter::region_bytes(3, kOptions));
  auto limiter = make(m, 3, 10s);
  std::vector<SharedLease> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(limiter.acquire_at("k", Nanos{i * 1'000'000'000LL}));
    ASSERT_TRUE(held.back().acquired);
    EXPECT_EQ(held.back().id.size(), 32u);
    EXPECT_EQ(held.back().in_flight, static_cast<std::uint32_t>(i + 1));
  }
  const SharedLease refused = limiter.acquire_at("k", 4s);
  EXPECT_FALSE(refused.acquired);
  EXPECT_EQ(refused.id, "");
  EXPECT_EQ(refused.retry_after, 6s);                     // the first lease, taken at 0, expires at 10 s
  EXPECT_TRUE(limiter.acquire_at("other", 4s).acquired);  // keys are apart
  EXPECT_TRUE(limiter.release_at("k", held[1].id, 5s));
  EXPECT_FALSE(limiter.release_at("k", held[1].id, 5s));      // once
  EXPECT_FALSE(limiter.release_at("other", held[0].id, 5s));  // another key's id frees nothing
  EXPECT_FALSE(limiter.release_at("k", "not an id", 5s));
  EXPECT_EQ(limiter.in_flight_at("k", 5s), 2u);
  EXPECT_TRUE(limiter.acquire_at("k", 5s).acquired);
  EXPECT_EQ(limiter.in_flight_at("k", 10s), 2u);  // the first expired at 10 s
}

TEST(SharedConcurrency, TheLastReleaseFreesTheKeysSlot) {
  Mapping m(SharedConcurrencyLimiter::region_bytes(2, kOptions));
  auto limiter = make(m, 2, 10s);
  const SharedLease a = limiter.acquire_at("k", 0s), b = limiter.acquire_at("k", 0s);
  EXPECT_EQ(limiter.stats().keys, 1u);
  EXPECT_TRUE(limiter.release_at("k", a.id, 1s));
  EXPECT_EQ(limiter.stats().keys, 1u);
  EXPECT_TRUE(limiter.release_at("k", b.id, 1s));
  EXPECT_EQ(limiter.stats().keys, 0u);
  EXPECT_FALSE(limiter.release_at("k", b.id, 1s));  // an unknown key is not made by a release
  EXPECT_EQ(limiter.stats().keys, 0u);
}

TEST(SharedConcurrency, AFullRegionRefusesANewKeyRatherThanEvictAHeldLease) {
  const SharedOptions one{.max_keys = 2, .max_key_bytes = 16, .shards = 1};
  Mapping m(SharedConcurrencyLimiter::region_bytes(1, one));
  auto limiter = make(m, 1, 10s, true, one);
  ASSERT_TRUE(limiter.acquire_at("a", 0s).acquired);
  ASSERT_TRUE(limiter.acquire_at("b", 1s).acquired);
  const SharedLease refused = limiter.acquire_at("c", 2s);
  EXPECT_FALSE(refused.acquired);
  EXPECT_EQ(refused.retry_after, 10s);
  EXPECT_EQ(limiter.in_flight_at("a", 2s), 1u);
  EXPECT_FALSE(limiter.acquire_at("a", 2s).acquired);  // a's lease is still counted
  // Once a's lease has expired its slot may go to a new key (a was used last: the walk from the least recently
  // used passes b, still held).
  EXPECT_TRUE(limiter.acquire_at("c", 10s).acquired);
  EXPECT_EQ(limiter.in_flight_at("b", 10s), 1u);
}

TEST(SharedConcurrency, AKilledHoldersLeasesComeBackAfterTheirTimeToLive) {
  Mapping m(SharedConcurrencyLimiter::region_bytes(2, kOptions));
  auto limiter = make(m, 2, 30s);
  const pid_t child = ::fork();
  if (child == 0) {
    auto mine = make(m, 2, 30s, false);
    const bool ok = mine.acquire_at("k", 0s).acquired && mine.acquire_at("k", 1s).acquired;
    ::raise(SIGKILL);  // holding both, released by no one
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(limiter.in_flight_at("k", 2s), 2u);
  EXPECT_FALSE(limiter.acquire_at("k", 29s).acquired);
  EXPECT_TRUE(limiter.acquire_at("k", 30s).acquired);  // the first came back
  EXPECT_FALSE(limiter.acquire_at("k", 30s).acquired);
  EXPECT_TRUE(limiter.acquire_at("k", 31s).acquired);  // and the second
}

// 100 processes, each taking and giving back leases of one key as fast as it can, on a limit of 10; each holder
// counts itself in while it holds one, and the most ever counted at once is at most 10.
TEST(SharedConcurrency, AHundredProcessesNeverHoldMoreThanTheLimit) {
  Mapping m(SharedConcurrencyLimiter::region_bytes(10, kOptions));
  Mapping counts(3 * sizeof(std::atomic<long>));
  auto* holding = new (counts.base()) std::atomic<long>[3]();  // now, most, acquired in all
  auto limiter = make(m, 10, 60s);
  std::vector<pid_t> children;
  for (int c = 0; c < 100; ++c) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      auto mine = make(m, 10, 60s, false);
      for (int i = 0; i < 20; ++i) {
        const SharedLease l = mine.acquire("k");
        if (!l.acquired) {
          std::this_thread::yield();
          continue;
        }
        const long now = ++holding[0];
        for (long most = holding[1]; now > most && !holding[1].compare_exchange_weak(most, now);) {
        }
        ++holding[2];
        std::this_thread::sleep_for(200us);
        --holding[0];
        if (!mine.release("k", l.id)) ::_exit(2);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_LE(holding[1].load(), 10);
  EXPECT_GE(holding[1].load(), 2);  // they did overlap
  EXPECT_GT(holding[2].load(), 100);
  EXPECT_EQ(limiter.in_flight("k"), 0u);
  EXPECT_EQ(limiter.stats().keys, 0u);
}

TEST(SharedConcurrency, ARegionMadeForAnotherLimitIsRefusedByName) {
  Mapping m(SharedConcurrencyLimiter::region_bytes(5, kOptions));
  auto limiter = make(m, 4, 10s);
  auto refused = [&](auto f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused([&] { make(m, 5, 10s, false); }, "max_in_flight: the region has 4, this process asks for 5");
  refused([&] { make(m, 4, 20s, false); }, "lease_ttl: the region has 10s, this process asks for 20s");
  refused([&] { SharedLimiter::in_region(m.base(), m.bytes(), false, {.limit = 4, .half_life = 1s}, kOptions); },
          "algorithm: the region has concurrency, this process asks for earrrl");
  refused([&] { make(m, 0, 10s); }, "max_in_flight: must be 1 to 4096 in shared memory (got 0)");
  refused([&] { make(m, 4097, 10s); }, "max_in_flight: must be 1 to 4096 in shared memory (got 4097)");
  refused([&] { make(m, 4, 0s); }, "lease_ttl");
  refused([&] { limiter.acquire(std::string(17, 'k')); }, "key is 17 bytes");
}

TEST(SharedConcurrency, TheCApiTakesAndGivesBackLeases) {
  const std::size_t bytes = rk_shared_concurrency_region_bytes(2, 64, 16, 4);
  ASSERT_GT(bytes, 0u);
  EXPECT_EQ(rk_shared_concurrency_region_bytes(RK_SHARED_MAX_IN_FLIGHT + 1, 64, 16, 4), 0u);
  EXPECT_EQ(rk_shared_concurrency_keys_that_fit(bytes, 2, 16, 4), 64u);
  Mapping m(bytes);
  rk_shared_concurrency* c = nullptr;
  ASSERT_EQ(rk_shared_concurrency_in_region(m.base(), bytes, 1, 2, 10'000'000'000, 64, 16, 4, &c), RK_OK);
  char a[RK_LEASE_ID_SIZE], b[RK_LEASE_ID_SIZE], none[RK_LEASE_ID_SIZE];
  int acquired = 0, released = 0;
  std::int64_t retry = 0;
  ASSERT_EQ(rk_shared_concurrency_acquire_at(c, "k", 1, 0, a, &acquired, &retry), RK_OK);
  EXPECT_EQ(acquired, 1);
  ASSERT_EQ(rk_shared_concurrency_acquire_at(c, "k", 1, 1'000'000'000, b, &acquired, &retry), RK_OK);
  ASSERT_EQ(rk_shared_concurrency_acquire_at(c, "k", 1, 2'000'000'000, none, &acquired, &retry), RK_OK);
  EXPECT_EQ(acquired, 0);
  EXPECT_EQ(retry, 8'000'000'000);
  std::uint32_t n = 0;
  ASSERT_EQ(rk_shared_concurrency_in_flight(c, "k", 1, &n), RK_OK);
  ASSERT_EQ(rk_shared_concurrency_release_at(c, "k", 1, a, 3'000'000'000, &released), RK_OK);
  EXPECT_EQ(released, 1);
  ASSERT_EQ(rk_shared_concurrency_release_at(c, "k", 1, a, 3'000'000'000, &released), RK_OK);
  EXPECT_EQ(released, 0);
  rk_shared_concurrency* other = nullptr;
  EXPECT_EQ(rk_shared_concurrency_in_region(m.base(), bytes, 0, 3, 10'000'000'000, 64, 16, 4, &other),
            RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("max_in_flight"), std::string::npos) << rk_last_error();
  EXPECT_EQ(other, nullptr);
  rk_shared_concurrency_free(c);
}

}  // namespace
}  // namespace rk
