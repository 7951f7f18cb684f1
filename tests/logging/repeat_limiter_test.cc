// The log's repeat limiter (logging/repeat_limiter.h) on a clock the test moves: the first lines of an event in its
// interval are written, the rest counted, and the count handed back once, when the interval is over or at exit;
// events apart from each other, and their number bounded. Then the log itself (logging/log.h): a flood of one
// message is a few lines and one count, every line one JSON object.
#include "logging/repeat_limiter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "logging/log.h"

namespace rk::logging {
namespace {

using namespace std::chrono_literals;
using Held = RepeatLimiter::Held;
using TimePoint = std::chrono::steady_clock::time_point;

struct Limiter : ::testing::Test {
  TimePoint now{1000s};
  RepeatLimiter limiter{{.lines = 3, .interval = 10s, .max_events = 4}, [this] { return now; }};
  std::vector<Held> ended;

  int written(const std::string& event, int lines, Level level = Level::kError) {
    int n = 0;
    for (int i = 0; i < lines; ++i) n += limiter.admit(event, level, ended) ? 1 : 0;
    return n;
  }
};

TEST_F(Limiter, TheFirstLinesOfAnIntervalAreWrittenTheRestCountedAndReportedWhenItEnds) {
  EXPECT_EQ(written("handshake", 1000), 3);
  EXPECT_TRUE(ended.empty());
  now += 9s;
  EXPECT_EQ(written("handshake", 5), 0);  // the same interval still
  EXPECT_TRUE(ended.empty());
  now += 1s;
  EXPECT_EQ(written("handshake", 1), 1);  // a new one: written, after the count of the last
  EXPECT_EQ(ended, (std::vector<Held>{{.event = "handshake", .count = 1002, .level = Level::kError}}));
  ended.clear();
  EXPECT_EQ(written("handshake", 2), 2);
  now += 10s;
  EXPECT_EQ(written("handshake", 1), 1);
  EXPECT_TRUE(ended.empty());  // nothing held back: nothing to report
}

TEST_F(Limiter, EventsAreHeldApartAndAnyLineReportsTheCountsOfIntervalsOver) {
  EXPECT_EQ(written("a", 5), 3);
  now += 5s;
  EXPECT_EQ(written("b", 4, Level::kInfo), 3);
  now += 5s;
  EXPECT_EQ(written("c", 1), 1);  // a's interval is over: its count comes with any line; b's is not yet
  EXPECT_EQ(ended, (std::vector<Held>{{.event = "a", .count = 2, .level = Level::kError}}));
  ended.clear();
  now += 5s;
  EXPECT_EQ(written("c", 1), 1);
  EXPECT_EQ(ended, (std::vector<Held>{{.event = "b", .count = 1, .level = Level::kInfo}}));
}

TEST_F(Limiter, DrainHandsBackEveryCountAtOnceAndForgetsThem) {
  written("a", 4);
  written("b", 6);
  std::vector<Held> held = limiter.drain();
  std::sort(held.begin(), held.end(), [](const Held& x, const Held& y) { return x.event < y.event; });
  EXPECT_EQ(held, (std::vector<Held>{{.event = "a", .count = 1, .level = Level::kError},
                                     {.event = "b", .count = 3, .level = Level::kError}}));
  EXPECT_TRUE(limiter.drain().empty());
  EXPECT_EQ(written("a", 1), 0);  // its interval goes on: drained is not forgotten
  now += 10s;
  EXPECT_EQ(written("a", 1), 1);
  EXPECT_EQ(ended, (std::vector<Held>{{.event = "a", .count = 1, .level = Level::kError}}));
}

// Events made up by whoever sends the lines' content cannot grow the limiter: past max_events, new ones share one.
TEST_F(Limiter, EventsPastTheBoundShareOneAndOnesOverAreForgotten) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(written("e" + std::to_string(i), 1), 1);
  EXPECT_EQ(written("new-1", 2), 2);
  EXPECT_EQ(written("new-2", 2), 1);  // the same event as new-1: "(other events)"
  now += 10s;
  EXPECT_EQ(written("new-3", 3), 3);  // the others' intervals are over: forgotten, room again
  EXPECT_EQ(
      ended,
      (std::vector<Held>{{.event = std::string(RepeatLimiter::kOtherEvents), .count = 1, .level = Level::kError}}));
}

// The log: a flood of one message writes kRepeatLines lines, then the count at exit; other messages go on.
TEST(Log, AFloodOfOneMessageIsAFewLinesAndACount) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 500; ++i) log(Level::kError, "repeat_limiter_test flood", {{"i", std::to_string(i)}});
  log(Level::kError, "repeat_limiter_test other");
  for (int i = 0; i < 50; ++i) log(Level::kDebug, "repeat_limiter_test debug");  // not enabled: nothing
  report_held_lines();
  const std::string out = ::testing::internal::GetCapturedStderr();
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; (end = out.find('\n', at)) != std::string::npos; at = end + 1) {
    lines.push_back(out.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), kRepeatLines + 2) << out;
  for (const std::string& line : lines) EXPECT_TRUE(line.starts_with("{\"ts\":\"") && line.ends_with("}")) << line;
  EXPECT_NE(lines[kRepeatLines - 1].find("\"i\":\"" + std::to_string(kRepeatLines - 1) + "\""), std::string::npos);
  EXPECT_NE(lines[kRepeatLines].find("\"msg\":\"repeat_limiter_test other\""), std::string::npos);
  EXPECT_NE(lines.back().find("\"msg\":\"log lines suppressed\",\"event\":\"repeat_limiter_test flood\","
                              "\"suppressed\":\"" +
                              std::to_string(500 - kRepeatLines) + "\",\"interval\":\"10s\""),
            std::string::npos)
      << lines.back();
}

}  // namespace
}  // namespace rk::logging
