// The shared-memory store: the same decisions as the in-process store, exact across real forked processes, and
// a process killed in the middle of an update wedges no one and tears no state.
#include "ratekeeper/shared.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "ratekeeper/limiter.h"
#include "store/shm/testing.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

LimitSpec fixed(double limit) { return {.algorithm = Algorithm::kFixedWindow, .limit = limit, .window = 1h}; }

// Counters that forked children write and the parent reads.
struct SharedCounters {
  explicit SharedCounters(std::size_t n) : n_(n) {
    void* p = ::mmap(nullptr, n * sizeof(std::atomic<long>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap");
    c_ = new (p) std::atomic<long>[n]();
  }
  ~SharedCounters() { ::munmap(c_, n_ * sizeof(std::atomic<long>)); }
  std::atomic<long>& operator[](std::size_t i) { return c_[i]; }

 private:
  std::size_t n_;
  std::atomic<long>* c_;
};

// Runs f in a child process; returns its pid. The child never returns into the test framework.
template <class F>
pid_t fork_child(F f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    f();
    ::_exit(0);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(SharedLimiter, DecidesExactlyAsTheInProcessStoreForEveryAlgorithm) {
  for (Algorithm a : kAllAlgorithms) {
    if (a == Algorithm::kSlidingLog) continue;  // refused in shared memory: see below
    SCOPED_TRACE(std::string(algorithm_name(a)));
    LimitSpec spec{.algorithm = a, .limit = 4};
    if (a == Algorithm::kEarrrl) spec.half_life = 2s;
    if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) spec.burst = 2;
    auto shared = SharedLimiter::anonymous(spec, {.max_keys = 64, .shards = 4});
    Limiter reference(spec);
    std::mt19937_64 rng(11);
    std::int64_t now = 0;
    for (int i = 0; i < 2000; ++i) {
      now += static_cast<std::int64_t>(rng() % 300'000'000);
      const std::string key = "key-" + std::to_string(rng() % 20);
      const std::uint64_t cost = rng() % 3;
      const Decision d = shared.check_at(key, Nanos{now}, cost);
      const Decision r = reference.check_at(key, Nanos{now}, cost);
      ASSERT_EQ(d.allowed, r.allowed) << i;
      ASSERT_EQ(d.remaining, r.remaining) << i;
      ASSERT_EQ(d.retry_after, r.retry_after) << i;
      ASSERT_EQ(d.reset_after, r.reset_after) << i;
      ASSERT_EQ(d.delay, r.delay) << i;
      ASSERT_EQ(d.estimate, r.estimate) << i;
    }
    EXPECT_EQ(shared.stats().keys, 20u);
  }
}

TEST(SharedLimiter, ForkedProcessesShareOneLimitExactly) {
  auto limiter = SharedLimiter::anonymous(fixed(1000), {.max_keys = 1024});
  SharedCounters allowed(4);
  std::vector<pid_t> children;
  for (int c = 0; c < 4; ++c) {
    children.push_back(fork_child([&, c] {
      for (int i = 0; i < 10'000; ++i) {
        if (limiter.check_at("one key", Nanos{0}).allowed) allowed[c].fetch_add(1);
      }
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(wait_status(pid), 0);
  long total = 0;
  for (int c = 0; c < 4; ++c) total += allowed[c].load();
  EXPECT_EQ(total, 1000);
  EXPECT_FALSE(limiter.peek_at("one key", Nanos{0}).allowed);
  EXPECT_EQ(limiter.stats().keys, 1u);
}

TEST(SharedLimiter, ThreadsShareOneLimitExactly) {
  auto limiter = SharedLimiter::anonymous(fixed(1000), {.max_keys = 16, .shards = 2});
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) allowed += limiter.check_at("k", Nanos{0}).allowed ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1000);
}

// A child takes the shard's lock, journals, writes the new state and is killed before it clears the journal: the
// parent takes the lock over, undoes the update, and decides as if the child's attempt had never been made.
void killed_at(shm_testing::Stage stage) {
  auto limiter = SharedLimiter::anonymous(fixed(3), {.max_keys = 8, .shards = 1});
  ASSERT_TRUE(limiter.check_at("k", Nanos{0}).allowed);
  ASSERT_TRUE(limiter.check_at("k", Nanos{0}).allowed);
  static shm_testing::Stage die_at;
  die_at = stage;
  const pid_t child = fork_child([&] {
    shm_testing::hook = [](shm_testing::Stage s) {
      if (s == die_at) ::raise(SIGKILL);
    };
    limiter.check_at("k", Nanos{0});
  });
  const int status = wait_status(child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  const Decision d = limiter.check_at("k", Nanos{0});  // would hang forever on a plain process-shared mutex
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);  // the third: the child's attempt was undone
  EXPECT_FALSE(limiter.check_at("k", Nanos{0}).allowed);
  EXPECT_EQ(limiter.stats().recoveries, 1u);
  EXPECT_EQ(limiter.stats().keys, 1u);
}

TEST(SharedLimiter, AProcessKilledAfterJournallingWedgesNoOne) { killed_at(shm_testing::Stage::kJournalled); }
TEST(SharedLimiter, AProcessKilledAfterWritingIsUndone) { killed_at(shm_testing::Stage::kWritten); }

// SIGKILL at a random point under load from three processes: the others finish, and the limit holds exactly.
TEST(SharedLimiter, AProcessKilledUnderLoadLosesNothingForTheOthers) {
  auto limiter = SharedLimiter::anonymous(fixed(5000), {.max_keys = 64, .shards = 4});
  SharedCounters allowed(3), attempts(3);
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c) {
    children.push_back(fork_child([&, c] {
      for (int i = 0; i < (c == 0 ? 1'000'000'000 : 5'000); ++i) {
        const bool ok = limiter.check_at("hot", Nanos{0}).allowed;
        limiter.check_at("other-" + std::to_string(i % 100), Nanos{0});  // evictions, index changes
        attempts[c].fetch_add(1);
        if (ok) allowed[c].fetch_add(1);
      }
    }));
  }
  while (attempts[0].load() < 2000) std::this_thread::yield();  // a real process's progress, not a clock
  ::kill(children[0], SIGKILL);
  EXPECT_EQ(WTERMSIG(wait_status(children[0])), SIGKILL);
  EXPECT_EQ(wait_status(children[1]), 0);
  EXPECT_EQ(wait_status(children[2]), 0);
  const long total = allowed[0].load() + allowed[1].load() + allowed[2].load();
  // The killed process may have been admitted once without living to count it.
  EXPECT_GE(total, 4999);
  EXPECT_LE(total, 5000);
  const Decision d = limiter.peek_at("hot", Nanos{0});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_LE(limiter.stats().keys, 64u);
}

TEST(SharedLimiter, FullRegionEvictsTheLeastRecentlyUsedNeverTheHotKey) {
  auto limiter = SharedLimiter::anonymous(fixed(100), {.max_keys = 32, .shards = 1});
  for (int i = 0; i < 10'000; ++i) {
    limiter.check_at("abuser", Nanos{0});
    limiter.check_at("passer-by-" + std::to_string(i), Nanos{0});
  }
  EXPECT_FALSE(limiter.peek_at("abuser", Nanos{0}).allowed);  // still tracked: 100 spent, 9,900 refused
  const SharedStats st = limiter.stats();
  EXPECT_EQ(st.keys, 32u);
  EXPECT_EQ(st.capacity, 32u);
  EXPECT_EQ(st.evictions, 10'001u - 32u);
  EXPECT_TRUE(limiter.peek_at("passer-by-0", Nanos{0}).allowed);  // long evicted: fresh
  EXPECT_TRUE(limiter.reset("abuser"));
  EXPECT_FALSE(limiter.reset("abuser"));
  EXPECT_TRUE(limiter.check_at("abuser", Nanos{0}).allowed);
}

TEST(SharedLimiter, PeekRecordsNothing) {
  auto limiter = SharedLimiter::anonymous(fixed(1), {.max_keys = 4, .shards = 1});
  EXPECT_TRUE(limiter.peek_at("k", Nanos{0}).allowed);
  EXPECT_EQ(limiter.stats().keys, 0u);
  EXPECT_TRUE(limiter.check_at("k", Nanos{0}).allowed);
  EXPECT_FALSE(limiter.peek_at("k", Nanos{0}).allowed);
  EXPECT_EQ(limiter.check_at(std::string_view{}, Nanos{0}).allowed, true);  // the empty key is a key
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rk-shm-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST(SharedLimiter, AFileSharedByProcessesThatOpenItThemselves) {
  TempDir dir;
  const std::string path = dir.file("limits");
  const SharedOptions options{.max_keys = 128, .shards = 2};
  {
    auto first = SharedLimiter::open(path, fixed(10), options);
    EXPECT_TRUE(first.check_at("k", Nanos{0}, 4).allowed);
  }
  const pid_t child = fork_child([&] {
    auto mine = SharedLimiter::open(path, fixed(10), options);
    if (!mine.check_at("k", Nanos{0}, 6).allowed) ::_exit(3);
  });
  EXPECT_EQ(wait_status(child), 0);
  auto again = SharedLimiter::open(path, fixed(10), options);
  EXPECT_FALSE(again.check_at("k", Nanos{0}).allowed);  // 4 + 6 of 10, by two processes, through the file
  EXPECT_EQ(std::filesystem::file_size(path), SharedLimiter::region_bytes(options));
}

TEST(SharedLimiter, EachKindOfBadInputIsRefusedWithWhatIsWrong) {
  auto expect_error = [](auto f, const std::string& says) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected an error saying " << says;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error([] { SharedLimiter::anonymous({.algorithm = Algorithm::kSlidingLog, .limit = 5}); }, "sliding_log");
  expect_error([] { SharedLimiter::anonymous(fixed(-1)); }, "limit");
  expect_error([] { SharedLimiter::anonymous(fixed(1), {.max_keys = 0}); }, "max_keys 0");
  expect_error([] { SharedLimiter::anonymous(fixed(1), {.max_keys = std::size_t{1} << 40}); }, "max_keys");
  expect_error([] { SharedLimiter::anonymous(fixed(1), {.max_key_bytes = 5000}); }, "max_key_bytes 5000");
  expect_error([] { SharedLimiter::anonymous(fixed(1), {.max_keys = 4, .shards = 8}); }, "shards 8");
  auto limiter = SharedLimiter::anonymous(fixed(1), {.max_keys = 4, .max_key_bytes = 16, .shards = 1});
  expect_error([&] { limiter.check_at(std::string(17, 'x'), Nanos{0}); }, "17 bytes");
  EXPECT_EQ(limiter.stats().keys, 0u);

  TempDir dir;
  const std::string path = dir.file("limits");
  SharedLimiter::open(path, fixed(10), {.max_keys = 16, .shards = 1});
  expect_error([&] { SharedLimiter::open(path, fixed(11), {.max_keys = 16, .shards = 1}); }, "a different limit");
  expect_error([&] { SharedLimiter::open(path, fixed(10), {.max_keys = 32, .shards = 1}); }, "other options");
  std::ofstream(dir.file("garbage")) << std::string(4096, 'g');
  expect_error([&] { SharedLimiter::open(dir.file("garbage"), fixed(10)); }, "not a ratekeeper shared store");
  std::ofstream(dir.file("tiny")) << "rk";
  expect_error([&] { SharedLimiter::open(dir.file("tiny"), fixed(10)); }, "2 bytes");

  alignas(8) static unsigned char small[4096];
  expect_error([&] { SharedLimiter::in_region(small, sizeof small, true, fixed(1), {.max_keys = 1000}); }, "need");
  std::memset(small, 0, sizeof small);
  expect_error([&] { SharedLimiter::in_region(small, sizeof small, false, fixed(1), {.max_keys = 4, .shards = 1}); },
               "was it formatted");
  expect_error([&] { SharedLimiter::in_region(small + 1, 100, true, fixed(1)); }, "8-byte aligned");
}

TEST(SharedLimiter, RegionSizesAndWhatFits) {
  const SharedOptions o{.max_keys = 1000, .max_key_bytes = 16, .shards = 4};
  const std::size_t bytes = SharedLimiter::region_bytes(o);
  EXPECT_GE(SharedLimiter::keys_that_fit(bytes, 16, 4), 1000u);
  EXPECT_LT(SharedLimiter::keys_that_fit(bytes, 16, 4), 1010u);
  EXPECT_EQ(SharedLimiter::keys_that_fit(100, 16, 4), 0u);
  const std::size_t n = SharedLimiter::keys_that_fit(10 << 20, 16, 16);  // an nginx zone of 10 MiB
  EXPECT_LE(SharedLimiter::region_bytes({.max_keys = n, .max_key_bytes = 16, .shards = 16}), std::size_t{10} << 20);
  EXPECT_GT(n, 100'000u);  // ~100 bytes a key of 16 bytes, state, index and LRU links included
  std::vector<unsigned char> zone(SharedLimiter::region_bytes(o) + 8);
  void* base = zone.data() + (8 - reinterpret_cast<std::uintptr_t>(zone.data()) % 8) % 8;
  auto a = SharedLimiter::in_region(base, bytes, true, fixed(2), o);
  auto b = SharedLimiter::in_region(base, bytes, false, fixed(2), o);
  EXPECT_TRUE(a.check_at("k", Nanos{0}, 2).allowed);
  EXPECT_FALSE(b.check_at("k", Nanos{0}).allowed);
}

}  // namespace
}  // namespace rk
