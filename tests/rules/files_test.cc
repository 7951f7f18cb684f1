// rules/files.h through its users: the loader (load_rules, which check-config runs) and the live reloader. An
// entry of the rules folder that is not a regular file once symbolic links are followed (a FIFO, a link to
// /dev/zero, a directory), or a file over the size bound, is refused with its name and never read: no hang, no
// unbounded read, and the reloader keeps the last good rules. A symbolic link to a regular file (how a Kubernetes
// ConfigMap is mounted) is read as the file.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>

#include "rules/parse.h"
#include "rules/reloader.h"

namespace rk::rules {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kGood =
    "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n";

// A read of a FIFO with no writer, or of /dev/zero, never ends: past this the test fails rather than hang. Far above
// what a refusal takes (a stat and a close), on a busy machine under a sanitizer too.
constexpr auto kDeadline = 30s;

template <class F>
auto within_deadline(const char* what, F f) {
  auto done = std::async(std::launch::async, std::move(f));
  if (done.wait_for(kDeadline) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not return within %llds (it reads a special file)\n", what,
                 static_cast<long long>(kDeadline.count()));
    std::_Exit(1);  // the thread is stuck in a read: nothing else can end it
  }
  return done.get();
}

class RulesFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rk-rules-files-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) {
    const std::string tmp = path(name + ".tmp");
    std::ofstream(tmp) << text;
    fs::rename(tmp, path(name));
  }

  // The entry `name` of one special kind, and the error it must give (after "<its path>: ").
  struct Special {
    const char* name;
    const char* error;
  };
  static constexpr Special kSpecials[] = {
      {"pipe.yaml",
       "a FIFO, not a regular file: refused unread (a rules file is a regular file, or a symbolic link "
       "to one)"},
      {"zero.yaml",
       "a symbolic link to /dev/zero, a character device, not a regular file: refused unread (a rules "
       "file is a regular file, or a symbolic link to one)"},
      {"big.yml", "the file is 16777217 bytes, over the limit of 16777216"},
      {"folder.yaml",
       "a directory, not a regular file: refused unread (a rules file is a regular file, or a "
       "symbolic link to one)"},
  };
  void make(const Special& s) {
    const std::string p = path(s.name);
    const std::string name = s.name;
    if (name == "pipe.yaml") {
      ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
    }
    if (name == "zero.yaml") fs::create_symlink("/dev/zero", p);
    if (name == "big.yml") {  // sparse: one byte past the bound, costing no disk
      std::ofstream(p).close();
      fs::resize_file(p, kMaxRulesFileBytes + 1);
    }
    if (name == "folder.yaml") fs::create_directory(p);
  }

  fs::path dir_;
};

TEST_F(RulesFilesTest, EachSpecialEntryIsRefusedByNameUnread) {
  write("good.yaml", kGood);
  for (const Special& s : kSpecials) {
    SCOPED_TRACE(s.name);
    make(s);
    std::vector<DomainConfig> domains;
    const auto errors = within_deadline(s.name, [&] { return load_rules(dir_.string(), domains); });
    std::string all;
    for (const auto& e : errors) all += e.to_string() + "\n";
    ASSERT_EQ(errors.size(), 1u) << all;
    EXPECT_EQ(errors[0].to_string(), path(s.name) + ": " + s.error);
    // Given as the path itself, not in a folder: the same (a folder given is a rules folder, read as one).
    if (fs::is_directory(path(s.name))) {
      fs::remove(path(s.name));
      continue;
    }
    domains.clear();
    const auto alone = within_deadline(s.name, [&] { return load_rules(path(s.name), domains); });
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(alone[0].to_string(), path(s.name) + ": " + s.error);
    fs::remove(path(s.name));
  }
}

TEST_F(RulesFilesTest, TheReloaderKeepsTheLastGoodRulesAndNamesTheEntry) {
  std::vector<std::string> failures;
  Reloader r(dir_.string(), BuildOptions{},
             {.on_failure = [&](const std::vector<ConfigError>& e) { failures.push_back(e.at(0).to_string()); }});
  write("good.yaml", kGood);
  ASSERT_TRUE(r.load_now().empty());
  auto good = r.current();
  for (const Special& s : kSpecials) {
    SCOPED_TRACE(s.name);
    make(s);
    EXPECT_TRUE(within_deadline(s.name, [&] { return r.poll_once(); }));
    EXPECT_EQ(r.current(), good);
    ASSERT_FALSE(failures.empty());
    EXPECT_EQ(failures.back(), path(s.name) + ": " + s.error);
    failures.clear();
    fs::remove(path(s.name));
    EXPECT_TRUE(within_deadline(s.name, [&] { return r.poll_once(); }));  // gone: the rules load again
    EXPECT_TRUE(failures.empty());
    EXPECT_NE(r.current(), good);
    good = r.current();
  }
  // At start, with no good rules to keep: the same error from load_now().
  make(kSpecials[0]);
  Reloader fresh(dir_.string(), BuildOptions{});
  const auto errors = within_deadline("load_now", [&] { return fresh.load_now(); });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string(), path(kSpecials[0].name) + ": " + kSpecials[0].error);
  EXPECT_EQ(fresh.current(), nullptr);
}

// A Kubernetes ConfigMap's volume: each file a symbolic link through "..data" to a timestamped folder, and an
// update a new folder with "..data" swapped to it. Read, and reloaded on the swap.
TEST_F(RulesFilesTest, AConfigMapsSymbolicLinksAreReadAndFollowedOnUpdate) {
  fs::create_directory(dir_ / "..2024_01_01");
  std::ofstream(dir_ / "..2024_01_01" / "rules.yaml") << kGood;
  fs::create_directory_symlink("..2024_01_01", dir_ / "..data");
  fs::create_symlink("..data/rules.yaml", dir_ / "rules.yaml");
  Reloader r(dir_.string(), BuildOptions{});
  ASSERT_TRUE(r.load_now().empty());
  const std::string before = r.current()->version();
  fs::create_directory(dir_ / "..2024_01_02");
  std::ofstream(dir_ / "..2024_01_02" / "rules.yaml") << std::string(kGood) << "# updated\n";
  fs::create_directory_symlink("..2024_01_02", dir_ / "..data_tmp");
  fs::rename(dir_ / "..data_tmp", dir_ / "..data");  // as the kubelet swaps it: one rename
  EXPECT_TRUE(r.poll_once());
  ASSERT_NE(r.current(), nullptr);
  EXPECT_NE(r.current()->version(), before);
  EXPECT_NE(r.current()->domain("edge"), nullptr);
}

// RUNTIME_IGNOREDOTFILES (serve's --skip-dotfiles): a folder's files named with a dot are left out, in a plain
// folder and in a ConfigMap's volume alike (where "..data" itself starts with dots and is still followed); without
// it they are read like the others.
TEST_F(RulesFilesTest, DotFilesAreSkippedOnlyWhenAskedAndTheConfigMapStillRead) {
  const std::string other =
      "domain: hidden\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  write("rules.yaml", kGood);
  write(".draft.yaml", other);
  const auto names = [](const std::vector<ListedFile>& files) {
    std::vector<std::string> out;
    for (const ListedFile& f : files) out.push_back(fs::path(f.name).filename().string());
    return out;
  };
  std::vector<ConfigError> errors;
  EXPECT_EQ(names(list_rules_files(dir_.string(), errors)), (std::vector<std::string>{".draft.yaml", "rules.yaml"}));
  EXPECT_EQ(names(list_rules_files(dir_.string(), errors, true)), (std::vector<std::string>{"rules.yaml"}));
  EXPECT_TRUE(errors.empty());
  std::vector<DomainConfig> domains;
  ASSERT_TRUE(load_rules(dir_.string(), domains, {.skip_dotfiles = true}).empty());
  ASSERT_EQ(domains.size(), 1u);
  EXPECT_EQ(domains[0].domain, "edge");
  // A dot file's change is no change: the reloader skipping them does not reload.
  Reloader r(dir_.string(), BuildOptions{}, {}, {.skip_dotfiles = true});
  ASSERT_TRUE(r.load_now().empty());
  write(".draft.yaml", other + "# edited\n");
  EXPECT_FALSE(r.poll_once());
  EXPECT_EQ(r.current()->domain("hidden"), nullptr);

  // A ConfigMap's volume with a dot file among its keys.
  const fs::path cm = dir_ / "configmap";
  fs::create_directories(cm / "..2024_01_01");
  std::ofstream(cm / "..2024_01_01" / "rules.yaml") << kGood;
  std::ofstream(cm / "..2024_01_01" / ".draft.yaml") << other;
  fs::create_directory_symlink("..2024_01_01", cm / "..data");
  fs::create_symlink("..data/rules.yaml", cm / "rules.yaml");
  fs::create_symlink("..data/.draft.yaml", cm / ".draft.yaml");
  EXPECT_EQ(names(list_rules_files(cm.string(), errors, true)), (std::vector<std::string>{"rules.yaml"}));
  EXPECT_EQ(names(list_rules_files(cm.string(), errors)), (std::vector<std::string>{".draft.yaml", "rules.yaml"}));
  EXPECT_TRUE(errors.empty());
}

}  // namespace
}  // namespace rk::rules
