#include "base/hex.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

TEST(Hex, ReadsEitherCaseAndRefusesTheRest) {
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    int want = -1;
    if (c >= '0' && c <= '9') want = c - '0';
    if (c >= 'a' && c <= 'f') want = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') want = c - 'A' + 10;
    EXPECT_EQ(hex_value(ch), want) << c;
  }
}

TEST(Hex, WritesLowerCaseWithLeadingZeros) {
  std::string out;
  append_hex(out, 0x00);
  append_hex(out, 0x0f);
  append_hex(out, 0xa5);
  append_hex(out, 0xff);
  EXPECT_EQ(out, "000fa5ff");
  EXPECT_EQ(hex16(0), "0000000000000000");
  EXPECT_EQ(hex16(0x1f), "000000000000001f");
  EXPECT_EQ(hex16(0xcbf29ce484222325ULL), "cbf29ce484222325");
  EXPECT_EQ(hex16(~0ULL), "ffffffffffffffff");
}

}  // namespace
}  // namespace rk::base
