// The access log: a JSON line per write, itself rate-limited, its drops counted and reported on the next line.
#include "logging/access_log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace rk::logging {
namespace {

std::vector<nlohmann::json> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

struct AccessLogTest : ::testing::Test {
  std::string path =
      (std::filesystem::temp_directory_path() / ("rk_access_" + std::to_string(::getpid()) + ".log")).string();
  std::chrono::steady_clock::time_point now{};
  AccessLog::Now clock = [this] { return now; };
  void TearDown() override { std::filesystem::remove(path); }
};

TEST_F(AccessLogTest, EachWriteIsOneJsonLineWithItsTime) {
  {
    AccessLog log(path, {}, clock);
    log.write(R"("msg":"decision","domain":"edge","result":"OK")");
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0]["ts"].is_string());
  EXPECT_EQ(lines[0]["domain"], "edge");
  EXPECT_EQ(lines[0]["result"], "OK");
}

TEST_F(AccessLogTest, PastItsRateLinesAreDroppedCountedAndReported) {
  {
    AccessLog log(path, {.per_second = 10, .burst = 5}, clock);
    for (int i = 0; i < 100; ++i) log.write(R"("n":)" + std::to_string(i));
    EXPECT_EQ(log.written(), 5u);
    EXPECT_EQ(log.dropped(), 95u);
    now += std::chrono::milliseconds(100);  // one line's worth at 10 a second
    log.write(R"("n":100)");
    EXPECT_EQ(log.written(), 6u);
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[4]["n"], 4);
  EXPECT_EQ(lines[5]["msg"], "access log lines dropped");
  EXPECT_EQ(lines[5]["dropped"], 95);
  EXPECT_EQ(lines[6]["n"], 100);
}

TEST_F(AccessLogTest, AFileThatCannotBeOpenedIsNamed) {
  try {
    AccessLog log("/nonexistent-dir/access.log", {});
    FAIL() << "opened";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/access.log"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rk::logging
