// A secret kept in a file (base/secret_file.h; --redis-password-file, --admin-token-file): read once at start with
// errors that name the flag and the file but never the content, and read again when the file is rotated (a
// rename, as a Kubernetes secret's symlink swap makes, or a rewrite in place), keeping the last good secret while
// the file is broken.
#include "base/secret_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rk::base {
namespace {

namespace fs = std::filesystem;

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rk-secret-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "secret").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Written whole under another name, then renamed over the file: a new inode, whatever the size.
  void replace(const std::string& text) {
    const std::string tmp = path_ + ".new";
    std::ofstream(tmp, std::ios::binary) << text;
    fs::rename(tmp, path_);
  }
  // Rewritten in place (the same inode).
  void rewrite(const std::string& text) { std::ofstream(path_, std::ios::binary | std::ios::trunc) << text; }

  std::string error_for(const std::string& text, SecretFile::Charset charset = SecretFile::kAnyBytes) {
    rewrite(text);
    try {
      SecretFile f("--flag", path_, charset);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(SecretFileTest, ItsFinalLineBreakIsNotPartOfIt) {
  for (const auto& [text, secret] : {std::pair{"pw\n", "pw"}, {"pw\r\n", "pw"}, {"pw", "pw"}, {"a b\n\n", "a b\n"}}) {
    rewrite(text);
    EXPECT_EQ(*SecretFile("--flag", path_).current(), secret) << text;
  }
}

TEST_F(SecretFileTest, ARenameOrARewriteIsReadAgain) {
  replace("first");
  SecretFile f("--flag", path_);
  EXPECT_EQ(*f.current(), "first");
  replace("other");  // same size, new inode
  EXPECT_EQ(*f.current(), "other");
  rewrite("third-one");  // same inode, new size
  EXPECT_EQ(*f.current(), "third-one");
  const auto held = f.current();
  replace("fourth");
  EXPECT_EQ(*f.current(), "fourth");
  EXPECT_EQ(*held, "third-one");  // a secret handed out stays whole while it is used
  EXPECT_EQ(f.reread_failures(), 0u);
}

TEST_F(SecretFileTest, ABrokenFileKeepsTheLastGoodSecret) {
  replace("good");
  SecretFile f("--flag", path_, SecretFile::kVisibleAscii);
  for (const std::string bad : {"", "\n", "two words", "tab\there"}) {
    replace(bad);
    EXPECT_EQ(*f.current(), "good") << bad;
  }
  EXPECT_EQ(f.reread_failures(), 4u);
  fs::remove(path_);  // gone for a moment (a secret being swapped): the last good one
  EXPECT_EQ(*f.current(), "good");
  replace("better");
  EXPECT_EQ(*f.current(), "better");
}

TEST_F(SecretFileTest, ErrorsNameTheFlagAndTheFileNeverTheContent) {
  EXPECT_EQ(error_for(""), "--flag: '" + path_ + "' is empty; it must hold the secret");
  EXPECT_EQ(error_for("\n"), "--flag: '" + path_ + "' is empty; it must hold the secret");
  const std::string ascii = error_for("hunter2 secret", SecretFile::kVisibleAscii);
  EXPECT_EQ(ascii, "--flag: '" + path_ + "' must hold one line of visible ASCII (no space, tab or control character)");
  EXPECT_EQ(ascii.find("hunter2"), std::string::npos);
  EXPECT_EQ(error_for("hunter2 secret"), "");  // any bytes, where the caller allows them (a Redis password)
  try {
    SecretFile f("--flag", (dir_ / "missing").string());
    ADD_FAILURE() << "no error for a missing file";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "--flag: '" + (dir_ / "missing").string() + "' cannot be read: No such file or directory");
  }
  try {
    SecretFile f("--flag", dir_.string());
    ADD_FAILURE() << "no error for a directory";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--flag: '" + dir_.string() + "' is a directory, not a file holding the secret");
  }
}

TEST_F(SecretFileTest, AShortSecretIsRefusedAtStartAndARotationToOneKeepsTheOldAndSaysWhy) {
  rewrite("123456789\n");
  try {
    SecretFile f("--flag", path_, SecretFile::kAnyBytes, 10);
    ADD_FAILURE() << "no error for a 9-byte secret";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--flag: '" + path_ + "' is 9 bytes long; it must be at least 10 bytes");
  }
  replace("0123456789");
  std::vector<std::string> heard;
  SecretFile f("--flag", path_, SecretFile::kAnyBytes, 10, [&heard](const std::string& m) { heard.push_back(m); });
  replace("x\n");
  EXPECT_EQ(*f.current(), "0123456789");
  EXPECT_EQ(*f.current(), "0123456789");  // the broken version is reported once, not at every look
  EXPECT_EQ(f.reread_failures(), 1u);
  EXPECT_EQ(heard, std::vector<std::string>{"--flag: '" + path_ + "' is 1 byte long; it must be at least 10 bytes"});
  replace("abcdefghij");
  EXPECT_EQ(*f.current(), "abcdefghij");
  EXPECT_EQ(heard.size(), 1u);
}

// A key (--state-file-key-file) has a least length: a shorter one is refused at start, and a shorter rewrite later
// keeps the last good key.
TEST_F(SecretFileTest, AKeyShorterThanItsLeastLengthIsRefused) {
  rewrite("0123456789abcdef\n");
  try {
    SecretFile f("--flag", path_, SecretFile::kAnyBytes, 32);
    ADD_FAILURE() << "no error for a 16-byte key";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--flag: '" + path_ + "' is 16 bytes long; it must be at least 32 bytes");
  }
  replace(std::string(32, 'k'));
  SecretFile f("--flag", path_, SecretFile::kAnyBytes, 32);
  replace("short");
  EXPECT_EQ(*f.current(), std::string(32, 'k'));
  EXPECT_EQ(f.reread_failures(), 1u);
}

}  // namespace
}  // namespace rk::base
