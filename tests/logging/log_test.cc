// A log line as JSON and as text: the same fields, each readable by a collector.
#include "logging/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace rk::logging {
namespace {

TEST(LogFormat, JsonIsOneObjectALine) {
  const std::string line =
      format_log_line(Format::kJson, Level::kError, "rules rejected", {{"error", "rules.yaml:3:5: \"x\""}});
  ASSERT_TRUE(line.ends_with("\n"));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["msg"], "rules rejected");
  EXPECT_EQ(j["error"], "rules.yaml:3:5: \"x\"");
  EXPECT_TRUE(j["ts"].get<std::string>().ends_with("Z"));
}

TEST(LogFormat, TextIsKeyValueWithValuesQuotedWhenTheyMustBe) {
  const std::string line = format_log_line(Format::kText, Level::kInfo, "rules loaded",
                                           {{"version", "abc123"}, {"path", "a b"}, {"empty", ""}, {"eq", "k=v"}});
  const std::size_t space = line.find(' ');
  ASSERT_NE(space, std::string::npos);
  EXPECT_TRUE(line.substr(0, space).ends_with("Z"));  // the timestamp first
  EXPECT_EQ(line.substr(space + 1), "info \"rules loaded\" version=abc123 path=\"a b\" empty=\"\" eq=\"k=v\"\n");
  // A value cannot forge a line of its own.
  const std::string forged = format_log_line(Format::kText, Level::kInfo, "x", {{"v", "a\ninfo fake"}});
  EXPECT_EQ(forged.find('\n'), forged.size() - 1);
}

TEST(LogFormat, NamesAreParsed) {
  Format f = Format::kJson;
  EXPECT_TRUE(parse_log_format("text", f));
  EXPECT_EQ(f, Format::kText);
  EXPECT_FALSE(parse_log_format("xml", f));
}

}  // namespace
}  // namespace rk::logging
