#include "base/percent.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

TEST(Percent, DecodesPlusAndEscapes) {
  std::string out = "old";
  EXPECT_TRUE(form_decode("a%20b+c%2Bd%2fe%2F", out));
  EXPECT_EQ(out, "a b c+d/e/");
  EXPECT_TRUE(form_decode("%00%ff%C3%A9", out));
  EXPECT_EQ(out, std::string("\0\xff\xC3\xA9", 4));
  EXPECT_TRUE(form_decode("", out));
  EXPECT_EQ(out, "");
}

TEST(Percent, AStrayPercentStaysAsWrittenAndIsReported) {
  std::string out;
  EXPECT_FALSE(form_decode("100%", out));
  EXPECT_EQ(out, "100%");
  EXPECT_FALSE(form_decode("%4", out));
  EXPECT_EQ(out, "%4");
  EXPECT_FALSE(form_decode("%zz+%41", out));
  EXPECT_EQ(out, "%zz A");
  EXPECT_FALSE(form_decode("%%41", out));  // the first '%' begins no escape; the second does
  EXPECT_EQ(out, "%A");
  EXPECT_TRUE(form_decode("%41", out));  // an escape ending the text is whole
  EXPECT_EQ(out, "A");
}

}  // namespace
}  // namespace rk::base
