// The shared-memory store: the same decisions as the in-process store, exact across real forked processes, and
// a process killed in the middle of an update wedges no one and tears no state.
#include "ratekeeper/shared.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
#include "ratekeeper/ratekeeper.h"
#include "store/shm/layout.h"
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
void killed_at(store::shm_testing::Stage stage) {
  auto limiter = SharedLimiter::anonymous(fixed(3), {.max_keys = 8, .shards = 1});
  ASSERT_TRUE(limiter.check_at("k", Nanos{0}).allowed);
  ASSERT_TRUE(limiter.check_at("k", Nanos{0}).allowed);
  static store::shm_testing::Stage die_at;
  die_at = stage;
  const pid_t child = fork_child([&] {
    store::shm_testing::hook = [](store::shm_testing::Stage s) {
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

TEST(SharedLimiter, AProcessKilledAfterJournallingWedgesNoOne) { killed_at(store::shm_testing::Stage::kJournalled); }
TEST(SharedLimiter, AProcessKilledAfterWritingIsUndone) { killed_at(store::shm_testing::Stage::kWritten); }

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

// Runs f, which must throw E saying `says`.
template <class E = InvalidArgument, class F>
void expect_error(F f, const std::string& says) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error saying " << says;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
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
  ASSERT_EQ(::chmod(dir.file("garbage").c_str(), 0600), 0);
  expect_error([&] { SharedLimiter::open(dir.file("garbage"), fixed(10)); }, "not a ratekeeper shared store");
  std::ofstream(dir.file("tiny")) << "rk";
  ASSERT_EQ(::chmod(dir.file("tiny").c_str(), 0600), 0);
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

// ---- Attacks on the file and the region (docs/security.md, "Shared memory") ----

const SharedOptions kSmall{.max_keys = 64, .max_key_bytes = 16, .shards = 2};

// Ends this process (SIGALRM) if the scope takes longer than `seconds`: a hang fails the test instead of stalling
// the run. The bound is far above what the scope needs (milliseconds), even under TSan on a busy machine.
class Watchdog {
 public:
  explicit Watchdog(unsigned seconds) { ::alarm(seconds); }
  ~Watchdog() { ::alarm(0); }
};

// Runs f (returning an exit code) in a child that SIGALRM ends after `seconds`; returns the child's pid.
template <class F>
pid_t fork_within(unsigned seconds, F f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    ::_exit(f());
  }
  return pid;
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A file made with exactly `mode`, whatever the umask, as another process could leave it.
void plant(const std::string& path, const std::string& contents, unsigned mode) {
  std::ofstream(path, std::ios::binary) << contents;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(SharedLimiterFile, APreCreatedFileOthersMayWriteIsRefused) {
  TempDir dir;
  const std::string path = dir.file("limits");
  // The trap: a sound region with a limit that never refuses, left writable by everyone.
  SharedOptions generous = kSmall;
  generous.mode = 0666;
  SharedLimiter::open(path, fixed(1e9), generous);
  ASSERT_EQ(mode_of(path), 0666u);
  expect_error([&] { SharedLimiter::open(path, fixed(10), kSmall); },
               "has mode 0666, which gives group or others 0066 beyond the 0600 asked for");
  expect_error([&] { SharedLimiter::open(path, fixed(1e9), kSmall); }, "whoever can write it can change the limits");
  // An empty file planted before the first opener: adopted (and formatted) by the old code.
  plant(dir.file("empty"), "", 0666);
  expect_error([&] { SharedLimiter::open(dir.file("empty"), fixed(10), kSmall); }, "has mode 0666");
  EXPECT_EQ(std::filesystem::file_size(dir.file("empty")), 0u);
  // Readable by the group: every key (client addresses, API keys) could be read.
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  expect_error([&] { SharedLimiter::open(path, fixed(1e9), kSmall); }, "whoever can read it sees every key");
  // Asked for, it is allowed.
  generous.mode = 0640;
  EXPECT_TRUE(SharedLimiter::open(path, fixed(1e9), generous).check_at("k", Nanos{0}).allowed);
}

TEST(SharedLimiterFile, ASymbolicLinkIsRefusedAndNothingIsMadeThroughIt) {
  TempDir dir;
  plant(dir.file("precious"), "the victim's data", 0600);
  ASSERT_EQ(::symlink(dir.file("precious").c_str(), dir.file("limits").c_str()), 0);
  expect_error([&] { SharedLimiter::open(dir.file("limits"), fixed(10), kSmall); }, "is a symbolic link");
  EXPECT_EQ(slurp(dir.file("precious")), "the victim's data");
  // A link to where nothing is yet: the old code created and formatted the file at the link's target.
  ASSERT_EQ(::symlink(dir.file("target").c_str(), dir.file("dangling").c_str()), 0);
  expect_error([&] { SharedLimiter::open(dir.file("dangling"), fixed(10), kSmall); }, "is a symbolic link");
  EXPECT_FALSE(std::filesystem::exists(dir.file("target")));
}

TEST(SharedLimiterFile, AFileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  TempDir dir;
  const std::string path = dir.file("limits");
  SharedLimiter::open(path, fixed(10), kSmall);       // sound, and made for this very limit: only its owner is wrong
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);  // nobody
  expect_error([&] { SharedLimiter::open(path, fixed(10), kSmall); },
               "belongs to uid 65534, not to this process's uid 0");
}

TEST(SharedLimiterFile, TheModeAskedForIsTheFilesExactly) {
  TempDir dir;
  const mode_t umask_before = ::umask(077);
  SharedOptions group = kSmall;
  group.mode = 0660;
  SharedLimiter::open(dir.file("group"), fixed(10), group);
  ::umask(0);
  SharedLimiter::open(dir.file("private"), fixed(10), kSmall);
  ::umask(umask_before);
  EXPECT_EQ(mode_of(dir.file("group")), 0660u);    // not narrowed by the umask
  EXPECT_EQ(mode_of(dir.file("private")), 0600u);  // not widened by it either
  expect_error([&] { SharedLimiter::open(dir.file("group"), fixed(10), kSmall); }, "has mode 0660");
  SharedOptions bad = kSmall;
  bad.mode = 0400;
  expect_error([&] { SharedLimiter::open(dir.file("x"), fixed(10), bad); }, "mode 0400");
  bad.mode = 04777;
  expect_error([&] { SharedLimiter::open(dir.file("x"), fixed(10), bad); }, "mode 4777");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x")));
}

// The region's file mapped by the test itself, to write into it what ratekeeper never would.
class RawRegion {
 public:
  explicit RawRegion(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st {};
    ::fstat(fd, &st);
    bytes_ = static_cast<std::size_t>(st.st_size);
    base_ = static_cast<unsigned char*>(::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap " + path);
  }
  ~RawRegion() { ::munmap(base_, bytes_); }
  store::shm::RegionHeader& header() { return *reinterpret_cast<store::shm::RegionHeader*>(base_); }

 private:
  unsigned char* base_;
  std::size_t bytes_;
};

TEST(SharedLimiterFile, ACorruptedHeaderIsRefusedNamingWhatIsWrong) {
  TempDir dir;
  const std::string path = dir.file("limits");
  SharedLimiter::open(path, fixed(10), kSmall);
  const std::string sound = slurp(path);
  const std::size_t bytes = SharedLimiter::region_bytes(kSmall);
  ASSERT_EQ(sound.size(), bytes);
  auto refused_after = [&](auto change, const std::string& says) {
    std::ofstream(path, std::ios::binary) << sound;
    {
      RawRegion raw(path);
      change(raw.header());
    }
    expect_error([&] { SharedLimiter::open(path, fixed(10), kSmall); }, says);
  };
  using H = store::shm::RegionHeader;
  refused_after([](H& h) { h.slot_stride = std::uint64_t{1} << 40; }, "slot_stride is 1099511627776 where a region");
  refused_after([&](H& h) { h.shards_offset = bytes + 4096; }, "shards_offset is " + std::to_string(bytes + 4096));
  refused_after([&](H& h) { h.slots_offset = ~std::uint64_t{0}; }, "slots_offset is 18446744073709551615");
  refused_after([&](H& h) { h.shard_stride = 8; }, "shard_stride is 8");
  refused_after([&](H& h) { h.buckets_per_shard = 1u << 30; }, "buckets_per_shard is 1073741824");
  refused_after([&](H& h) { h.region_bytes = bytes * 2; }, "region_bytes is " + std::to_string(bytes * 2));
  refused_after([](H& h) { h.shards = 0; }, "shards is 0 (1 to 1024)");
  refused_after([](H& h) { h.shards = 1u << 20; }, "shards is 1048576");
  refused_after([](H& h) { h.slots_per_shard = 0xffffffffu; }, "slots_per_shard is 4294967295");
  refused_after([](H& h) { h.key_cap = 13; }, "key_cap is 13");
  refused_after([](H& h) { h.magic[6] = '1'; }, "format version '01'; this build reads version '03'");
  refused_after([](H& h) { h.magic[0] = 'X'; }, "not a ratekeeper shared store");
  refused_after([](H& h) { h.ready.store(0); }, "never completely formatted");
  // A header consistent in itself, for a region bigger than the file: a truncated file.
  std::ofstream(path, std::ios::binary) << sound.substr(0, bytes / 2);
  expect_error([&] { SharedLimiter::open(path, fixed(10), kSmall); },
               "only " + std::to_string(bytes / 2) + " are mapped (a truncated file?)");
  // The same bytes made whole again are accepted: the refusals were the corruption's.
  std::ofstream(path, std::ios::binary) << sound;
  EXPECT_TRUE(SharedLimiter::open(path, fixed(10), kSmall).check_at("k", Nanos{0}).allowed);
}

// Two shards of one slot and one bucket each: every key of a shard walks its one chain.
class TinyRegion {
 public:
  static constexpr SharedOptions kOptions{.max_keys = 2, .max_key_bytes = 16, .shards = 2};
  TinyRegion()
      : layout_(store::shm::layout_for(2, 16, 2)),
        memory_(layout_.bytes / 8 + 1),
        limiter(SharedLimiter::in_region(memory_.data(), layout_.bytes, true, fixed(100), kOptions)) {}

  void* base() { return memory_.data(); }
  std::size_t bytes() const { return layout_.bytes; }
  store::shm::ShardHeader& shard(std::size_t s) {
    return *reinterpret_cast<store::shm::ShardHeader*>(raw() + layout_.shards_offset + s * layout_.shard_stride);
  }
  std::uint32_t& bucket(std::size_t s) {
    return *reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(&shard(s)) +
                                             sizeof(store::shm::ShardHeader));
  }
  store::shm::SlotHead& slot(std::size_t s) {
    return *reinterpret_cast<store::shm::SlotHead*>(raw() + layout_.slots_offset + s * layout_.slot_stride);
  }
  // The shard holding the only key checked so far.
  std::size_t shard_in_use() { return slot(0).in_use.load() == 1 ? 0 : 1; }

 private:
  unsigned char* raw() { return reinterpret_cast<unsigned char*>(memory_.data()); }
  store::shm::Layout layout_;
  std::vector<std::uint64_t> memory_;

 public:
  SharedLimiter limiter;
};

// Checks 64 keys; the messages of those refused as corrupt.
std::vector<std::string> corrupt_over_keys(SharedLimiter& limiter, int& fine) {
  std::vector<std::string> messages;
  fine = 0;
  for (int k = 0; k < 64; ++k) {
    try {
      limiter.check_at("k" + std::to_string(k), Nanos{0});
      ++fine;
    } catch (const SharedRegionCorrupt& e) {
      messages.emplace_back(e.what());
    }
  }
  return messages;
}

TEST(SharedLimiterCorruption, ALoopedChainIsReportedNotSpunAndTheLockIsReleased) {
  TinyRegion t;
  ASSERT_TRUE(t.limiter.check_at("a", Nanos{0}).allowed);
  const std::size_t s = t.shard_in_use();
  ASSERT_EQ(t.bucket(s), 0u);
  t.slot(s).bucket_next = 0;  // a -> a -> a ...
  // The old code spun forever on the first key of shard s other than "a", holding the shard's lock.
  const pid_t child = fork_within(60, [&] {
    int fine = 0;
    return corrupt_over_keys(t.limiter, fine).empty() ? 2 : 0;
  });
  const int status = wait_status(child);
  ASSERT_TRUE(exited_ok(status)) << (WIFSIGNALED(status) ? "spun until SIGALRM" : "no key was refused");
  Watchdog watchdog(60);
  int fine = 0;
  const std::vector<std::string> refused = corrupt_over_keys(t.limiter, fine);
  ASSERT_FALSE(refused.empty());
  EXPECT_GT(fine, 0);  // the other shard's keys still work
  for (const std::string& m : refused) {
    EXPECT_NE(m.find("shard " + std::to_string(s) +
                     " is corrupt: bucket 0's chain loops (more links than the "
                     "shard's 1 slots)"),
              std::string::npos)
        << m;
  }
  // The same shard's lock again: released on the way out of each error, or this would wait forever.
  EXPECT_FALSE(t.limiter.check_at("a", Nanos{0}, 100).allowed);
  EXPECT_EQ(t.limiter.stats().keys, 2u);
}

TEST(SharedLimiterCorruption, AnIndexPastTheShardIsReportedNotFollowed) {
  Watchdog watchdog(60);
  TinyRegion t;
  ASSERT_TRUE(t.limiter.check_at("a", Nanos{0}).allowed);
  const std::size_t s = t.shard_in_use();
  t.bucket(s) = 1000;  // the old code read a slot 1000 strides past its shard
  int fine = 0;
  std::vector<std::string> refused = corrupt_over_keys(t.limiter, fine);
  ASSERT_FALSE(refused.empty());
  EXPECT_GT(fine, 0);
  EXPECT_NE(refused[0].find("a bucket chain link is 1000, past the shard's 1 slots"), std::string::npos) << refused[0];
  t.bucket(s) = 0;
  t.shard(s).lru_tail = 7;  // the shard is full: the next new key evicts the tail
  refused = corrupt_over_keys(t.limiter, fine);
  ASSERT_FALSE(refused.empty());
  EXPECT_NE(refused[0].find("the LRU list's tail is 7"), std::string::npos) << refused[0];
  t.shard(s).lru_tail = store::shm::kNil;
  t.shard(s).free_head = store::shm::kNil;  // neither a free slot nor a key to evict
  refused = corrupt_over_keys(t.limiter, fine);
  ASSERT_FALSE(refused.empty());
  EXPECT_NE(refused[0].find("neither a free slot nor a key to evict"), std::string::npos) << refused[0];
  EXPECT_TRUE(t.limiter.check_at("a", Nanos{0}).allowed);  // found without walking: still served
}

TEST(SharedLimiterCorruption, TheCApiAnswersCorruptionWithAStatus) {
  Watchdog watchdog(60);
  TinyRegion t;
  rk_spec spec;
  rk_spec_init(&spec);
  spec.algorithm = "fixed_window";
  spec.limit = 100;
  spec.window_ns = std::chrono::nanoseconds(1h).count();
  spec.max_keys = 2;
  spec.max_key_bytes = 16;
  auto* h = static_cast<store::shm::RegionHeader*>(t.base());
  const std::uint64_t stride = h->slot_stride;
  h->slot_stride = std::uint64_t{1} << 40;
  rk_shared* shared = nullptr;
  EXPECT_EQ(rk_shared_in_region(t.base(), t.bytes(), 0, &spec, 2, &shared), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("slot_stride is 1099511627776"), std::string::npos) << rk_last_error();
  h->slot_stride = stride;
  ASSERT_EQ(rk_shared_in_region(t.base(), t.bytes(), 0, &spec, 2, &shared), RK_OK) << rk_last_error();
  rk_decision d;
  ASSERT_EQ(rk_shared_check_at(shared, "a", 1, 0, 1, &d), RK_OK);
  const std::size_t s = t.shard_in_use();
  t.slot(s).bucket_next = 0;
  int internal = 0, ok = 0;
  for (int k = 0; k < 64; ++k) {
    const std::string key = "k" + std::to_string(k);
    const rk_status st = rk_shared_check_at(shared, key.data(), key.size(), 0, 1, &d);
    if (st == RK_OK) {
      ++ok;
    } else {
      EXPECT_EQ(st, RK_INTERNAL);
      EXPECT_NE(std::string(rk_last_error()).find("chain loops"), std::string::npos) << rk_last_error();
      ++internal;
    }
  }
  EXPECT_GT(internal, 0);
  EXPECT_GT(ok, 0);
  rk_shared_free(shared);
}

// ---- Opening one file from several places at once (issue 21.1) ----

TEST(SharedLimiterFile, TwoProcessesHoldingTheFileAtOnceBothProceed) {
  TempDir dir;
  const std::string path = dir.file("limits");
  SharedCounters opened(2);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    children.push_back(fork_within(60, [&, c] {
      auto mine = SharedLimiter::open(path, fixed(10), kSmall);
      opened[c].store(1);
      // Each waits, holding its handle, for the other to open: the old code kept the first one's creation lock
      // until it exited, so the two waited for each other until SIGALRM.
      while (opened[1 - c].load() == 0) std::this_thread::yield();
      return mine.check_at("k", Nanos{0}, 3).allowed ? 0 : 3;
    }));
  }
  for (pid_t pid : children) {
    const int status = wait_status(pid);
    EXPECT_TRUE(exited_ok(status)) << (WIFSIGNALED(status) ? "waited for the other until SIGALRM" : "refused");
  }
  auto after = SharedLimiter::open(path, fixed(10), kSmall);
  EXPECT_TRUE(after.check_at("k", Nanos{0}, 4).allowed);  // 3 + 3 + 4 of 10: one region for all three
  EXPECT_FALSE(after.check_at("k", Nanos{0}, 1).allowed);
}

// Four processes race to create each file, with O_TMPFILE and without: exactly one region wins, all use it, and
// no temporary file is left behind.
TEST(SharedLimiterFile, ProcessesRacingToCreateTheFileAllUseOne) {
  TempDir dir;
  for (int round = 0; round < 6; ++round) {
    store::shm_testing::no_tmpfile = round % 2 == 1;
    const std::string path = dir.file("race-" + std::to_string(round));
    SharedCounters go(1);
    std::vector<pid_t> children;
    for (int c = 0; c < 4; ++c) {
      children.push_back(fork_within(60, [&] {
        while (go[0].load() == 0) std::this_thread::yield();
        return SharedLimiter::open(path, fixed(100), kSmall).check_at("k", Nanos{0}, 1).allowed ? 0 : 3;
      }));
    }
    go[0].store(1);
    for (pid_t pid : children) EXPECT_TRUE(exited_ok(wait_status(pid))) << round;
    store::shm_testing::no_tmpfile = false;
    auto after = SharedLimiter::open(path, fixed(100), kSmall);
    EXPECT_TRUE(after.check_at("k", Nanos{0}, 96).allowed) << round;
    EXPECT_FALSE(after.check_at("k", Nanos{0}, 1).allowed) << round;  // all four counted in the one region
    EXPECT_EQ(mode_of(path), 0600u);
  }
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.file(""))) ++files;
  EXPECT_EQ(files, 6u);
}

TEST(SharedLimiterFile, ADifferentLimitFailsAtOnceNamingBothValues) {
  TempDir dir;
  const std::string path = dir.file("limits");
  auto first = SharedLimiter::open(path, fixed(10), kSmall);  // held while the others try
  // Another process: the old code waited for the first to exit (here: until SIGALRM).
  const pid_t child = fork_within(60, [&] {
    try {
      SharedLimiter::open(path, fixed(11), kSmall);
      return 2;
    } catch (const InvalidArgument& e) {
      const bool names_both = std::string(e.what()).find("limit: the region has 10, this process asks for 11") !=
                              std::string::npos;
      if (!names_both) std::fprintf(stderr, "%s\n", e.what());
      return names_both ? 0 : 3;
    }
  });
  const int status = wait_status(child);
  EXPECT_TRUE(exited_ok(status)) << (WIFSIGNALED(status) ? "hung until SIGALRM" : "wrong or no error");
  Watchdog watchdog(60);
  expect_error([&] { SharedLimiter::open(path, {.algorithm = Algorithm::kGcra, .limit = 10, .window = 1h}, kSmall); },
               "algorithm: the region has fixed_window, this process asks for gcra");
  expect_error(
      [&] { SharedLimiter::open(path, {.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 1min}, kSmall); },
      "window: the region has 3600s, this process asks for 60s");
  SharedOptions bigger = kSmall;
  bigger.max_keys = 128;
  expect_error([&] { SharedLimiter::open(path, fixed(10), bigger); },
               "it has 2 shards of 32 keys of up to 16 bytes; this process asks for 2 shards of 64 keys");
  EXPECT_TRUE(first.check_at("k", Nanos{0}).allowed);
}

TEST(SharedLimiterFile, TwoOpensInOneProcessShareTheCounts) {
  TempDir dir;
  const std::string path = dir.file("limits");
  Watchdog watchdog(60);  // the old code deadlocked on the second open
  auto a = SharedLimiter::open(path, fixed(10), kSmall);
  auto b = SharedLimiter::open(path, fixed(10), kSmall);
  EXPECT_TRUE(a.check_at("k", Nanos{0}, 4).allowed);
  EXPECT_TRUE(b.check_at("k", Nanos{0}, 6).allowed);
  EXPECT_FALSE(a.check_at("k", Nanos{0}, 1).allowed);
  EXPECT_EQ(a.stats().keys, 1u);
  EXPECT_EQ(b.stats().keys, 1u);
}

}  // namespace
}  // namespace rk
