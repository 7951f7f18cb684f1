// rules/reloader.h with the rules folder a Kubernetes ConfigMap volume: every update made as the kubelet's
// AtomicWriter makes it (a new timestamped folder written, links for new files, "..data_tmp" renamed over "..data",
// links of files gone removed, the old folder deleted), a hundred times while the reloader polls and decisions flow.
// Each swap must give exactly one reload, of one whole version: never a mix of two (a domain in two files: "already
// defined"), never a file of the next version before its swap, never one reload twice; unchanged rules keep their
// counters. And a rules folder that is missing, or whose "..data" leads nowhere, is an error naming it: at start
// nothing loads, later the last good rules stay.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ratekeeper/clock.h"
#include "rules/reloader.h"

namespace rk::rules {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// How long a reload may take to follow a swap before the test gives up on it: far above a poll and a parse of a few
// dozen small files, on a busy 2-core machine under TSan too. Only a failing test waits this long.
constexpr auto kReloadDeadline = 60s;
constexpr int kSwaps = 100;
constexpr int kFillers = 12;  // unchanged files, so that a read takes a while and a swap lands inside one
// Between the writer's steps, as between a busy kubelet's: long enough that the reloader (polling every 1 ms) sees
// the volume between any two of them.
constexpr auto kStepPause = 1ms;

std::string rules(const std::string& domain, int limit) {
  return "domain: " + domain +
         "\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: " + std::to_string(limit) + "}\n";
}

// Version n of the ConfigMap: domains x and y trade files at every version (so that a.yaml of one version and b.yaml
// of the next define one domain twice), both with the limit n + 1; odd.yaml exists in odd versions only (its link
// dangles between the steps that make and remove it); steady.yaml and the fillers never change.
std::map<std::string, std::string> version(int n) {
  std::map<std::string, std::string> files{{"a.yaml", rules(n % 2 ? "x" : "y", n + 1)},
                                           {"b.yaml", rules(n % 2 ? "y" : "x", n + 1)},
                                           {"steady.yaml", rules("steady", 1'000'000)}};
  if (n % 2) files["odd.yaml"] = rules("odd", 1);
  for (int i = 0; i < kFillers; ++i) files["f" + std::to_string(i) + ".yaml"] = rules("f" + std::to_string(i), 5);
  return files;
}

// One update, in the order of Kubernetes' AtomicWriter.Write (pkg/volume/util/atomic_writer.go): the payload
// written into a new folder "..<UTC time>.<suffix>", a link "name -> ..data/name" made for each new file, a link
// "..data_tmp" to the new folder renamed over "..data" (the one atomic step), links of files no longer in the
// payload removed, the previous folder deleted; a pause after each step. Each file is written in two halves with a
// yield between: a reader that looked into the new folder before the swap would find half a file.
void kubelet_write(const fs::path& dir, const std::map<std::string, std::string>& payload, int n) {
  const fs::path data = dir / "..data";
  std::error_code ec;
  const fs::path old = fs::read_symlink(data, ec);
  const std::string stamp = "..2026_11_29_03_12_27." + std::to_string(1000000 + n);
  fs::create_directory(dir / stamp);
  for (const auto& [name, text] : payload) {
    std::ofstream f(dir / stamp / name);
    f << text.substr(0, text.size() / 2) << std::flush;
    std::this_thread::yield();
    f << text.substr(text.size() / 2);
  }
  std::this_thread::sleep_for(kStepPause);
  for (const auto& [name, text] : payload) {
    if (!fs::is_symlink(dir / name)) fs::create_symlink(fs::path("..data") / name, dir / name);
  }
  std::this_thread::sleep_for(kStepPause);
  fs::create_directory_symlink(stamp, dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", data);
  std::this_thread::sleep_for(kStepPause);
  if (!old.empty()) {
    for (const auto& entry : fs::directory_iterator(dir / old)) {
      const std::string name = entry.path().filename().string();
      if (!payload.contains(name)) fs::remove(dir / name);
    }
    std::this_thread::sleep_for(kStepPause);
    fs::remove_all(dir / old);
  }
}

class ConfigMapReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rk-reloader-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

// What one loaded set says, checked on the reloader's thread when it is loaded.
struct Seen {
  std::mutex mu;
  std::vector<std::string> problems;  // sets that are not one whole version, failures
  std::atomic<int> loads{0};
  std::atomic<int> last_version{-1};
};

void check_whole_version(const RuleSet& set, Seen& seen) {
  const Entry entry{"k", "v"};
  const Match x = set.match("x", {&entry, 1});
  const Match y = set.match("y", {&entry, 1});
  std::string problem;
  if (!x.rule || !y.rule || !set.domain("steady")) {
    problem = "a set without x, y or steady";
  } else {
    const int n = static_cast<int>(x.rule->limit->requests_per_unit) - 1;
    if (static_cast<int>(y.rule->limit->requests_per_unit) - 1 != n) {
      problem = "x of version " + std::to_string(n) + " with y of another";
    } else if ((set.domain("odd") != nullptr) != (n % 2 == 1)) {
      problem = "version " + std::to_string(n) + " with odd.yaml of another";
    } else if (set.domains().size() != version(n).size()) {
      problem = "version " + std::to_string(n) + " with " + std::to_string(set.domains().size()) + " domains";
    } else {
      seen.last_version = n;
    }
  }
  if (!problem.empty()) {
    std::lock_guard lock(seen.mu);
    seen.problems.push_back(problem);
  }
  ++seen.loads;
}

TEST_F(ConfigMapReloadTest, AHundredKubeletSwapsUnderLoadGiveAHundredReloadsOfWholeVersions) {
  kubelet_write(dir_, version(0), 0);
  Seen seen;
  auto clock = std::make_shared<ManualClock>();  // never ticks: the steady counter counts every hit
  Reloader r(dir_.string(), BuildOptions{.clock = clock},
             {.on_success = [&](const RuleSet& set) { check_whole_version(set, seen); },
              .on_failure =
                  [&](const std::vector<ConfigError>& errors) {
                    std::lock_guard lock(seen.mu);
                    for (const auto& e : errors) seen.problems.push_back("failed: " + e.to_string());
                  }});
  ASSERT_TRUE(r.load_now().empty());
  r.start(1ms);
  // Decisions flowing, on the steady rule of whatever set is current, all through the swaps.
  std::atomic<bool> done{false};
  std::atomic<long> hits{0};
  std::thread decisions([&] {
    const Entry entry{"k", "v"};
    while (!done) {
      const auto set = r.current();
      const Match m = set->match("steady", {&entry, 1});
      if (m.rule && m.rule->limiter && m.rule->limiter->check(m.counter_key).allowed) ++hits;
      std::this_thread::sleep_for(50us);  // a steady flow, not a spin that starves the reloader on a small machine
    }
  });
  const auto steady = [&] {
    const Entry entry{"k", "v"};
    return r.current()->match("steady", {&entry, 1});
  };
  const auto first = steady().rule->limiter;
  int reloads_late = 0;
  for (int n = 1; n <= kSwaps; ++n) {
    kubelet_write(dir_, version(n), n);
    const auto deadline = std::chrono::steady_clock::now() + kReloadDeadline;
    while (seen.last_version < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    if (seen.last_version < n) ++reloads_late;
  }
  // A duplicate reload would come at the next poll after the one that loaded: a few polls' quiet settles it.
  std::this_thread::sleep_for(50ms);
  r.stop();
  done = true;
  decisions.join();
  EXPECT_EQ(reloads_late, 0) << "swaps not followed by a reload within " << kReloadDeadline.count() << " s";
  EXPECT_EQ(seen.loads.load(), 1 + kSwaps) << "one load at start, then exactly one per swap";
  std::string all;
  for (const std::string& p : seen.problems) all += p + "\n";
  EXPECT_TRUE(seen.problems.empty()) << seen.problems.size() << " problems:\n" << all;
  // The unchanged rule kept its limiter through every reload, and so its count of every hit.
  EXPECT_EQ(steady().rule->limiter, first);
  // peek() says what would remain after one more request.
  EXPECT_EQ(first->peek(steady().counter_key).remaining, 1'000'000.0 - static_cast<double>(hits.load()) - 1)
      << hits.load() << " hits";
}

TEST_F(ConfigMapReloadTest, AMissingRulesFolderAtStartIsAnErrorNamingIt) {
  const std::string missing = (dir_ / "rules").string();
  Reloader r(missing, BuildOptions{});
  const auto errors = r.load_now();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string(), missing + ": no such file or directory");
  EXPECT_EQ(r.current(), nullptr);
}

TEST_F(ConfigMapReloadTest, ARulesFolderGoneOrLeadingNowhereLaterKeepsTheLastGoodRules) {
  const fs::path mount = dir_ / "rules";
  fs::create_directory(mount);
  kubelet_write(mount, version(0), 0);
  std::vector<std::string> failures;
  Reloader r(mount.string(), BuildOptions{},
             {.on_failure = [&](const std::vector<ConfigError>& e) { failures.push_back(e.at(0).to_string()); }});
  ASSERT_TRUE(r.load_now().empty());
  const auto good = r.current();
  // "..data" names a folder that is gone (deleted under the volume): an error naming the link, rules kept.
  fs::remove_all(mount / fs::read_symlink(mount / "..data"));
  EXPECT_TRUE(r.poll_once());
  EXPECT_EQ(r.current(), good);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], (mount / "..data").string() + ": cannot read the folder it links to (" +
                             fs::read_symlink(mount / "..data").string() + "): No such file or directory");
  EXPECT_FALSE(r.poll_once()) << "the same failure is not reported again until something changes";
  // The folder itself gone: an error naming it, rules kept.
  fs::remove_all(mount);
  EXPECT_TRUE(r.poll_once());
  EXPECT_EQ(r.current(), good);
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[1], mount.string() + ": no such file or directory");
  // Back: loaded again.
  fs::create_directory(mount);
  kubelet_write(mount, version(1), 1);
  EXPECT_TRUE(r.poll_once());
  EXPECT_NE(r.current(), good);
  EXPECT_EQ(failures.size(), 2u);
}

}  // namespace
}  // namespace rk::rules
