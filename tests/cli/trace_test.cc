// A trace's lines (cli/trace.h), as `ratekeeper replay` reads them: time, key and cost; blank lines and comments.
#include "cli/trace.h"

#include <gtest/gtest.h>

#include <string>

namespace rk::cli {
namespace {

TEST(TraceLine, ParsesFields) {
  TraceLine t;
  std::string error;
  ASSERT_EQ(parse_trace_line("  12.25\tuser:1  7\r", 100, t, error), TraceParse::kAttempt);
  EXPECT_EQ(t.time, Nanos{12'250'000'000});
  EXPECT_EQ(t.key, "user:1");
  EXPECT_EQ(t.cost, 7u);
  EXPECT_EQ(parse_trace_line("   ", 100, t, error), TraceParse::kNothing);
  EXPECT_EQ(parse_trace_line("#1 a", 100, t, error), TraceParse::kNothing);
}

}  // namespace
}  // namespace rk::cli
