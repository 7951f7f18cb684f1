#include "base/ascii.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

TEST(Ascii, LowersOnlyAsciiLetters) {
  EXPECT_EQ(ascii_lower("Content-Type: TEXT/Plain 09@[`{"), "content-type: text/plain 09@[`{");
  EXPECT_EQ(ascii_lower("\xC3\x89t\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // UTF-8 É and é pass through unchanged
  EXPECT_EQ(ascii_lower(""), "");
  static_assert(ascii_lower('Q') == 'q' && ascii_lower('q') == 'q' && ascii_lower('@') == '@');
}

TEST(Ascii, ComparesIgnoringAsciiCaseOnly) {
  EXPECT_TRUE(iequals("Bearer", "bEARER"));
  EXPECT_TRUE(iequals("", ""));
  EXPECT_FALSE(iequals("bearer", "bearer "));
  EXPECT_FALSE(iequals("[", "{"));  // 0x5B and 0x7B differ by the case bit but are not letters
  EXPECT_FALSE(iequals("\xC3\x89", "\xC3\xA9"));
  static_assert(iequals("Close", "close"));
}

}  // namespace
}  // namespace rk::base
