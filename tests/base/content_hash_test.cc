#include "base/content_hash.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

// FNV-1a 64's published test vectors (Fowler, Noll and Vo): names written to Redis and rule sets depend on these
// staying the same from one version to the next.
TEST(ContentHash, IsFnv1a64InHex) {
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");
  EXPECT_EQ(content_hash("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(content_hash("foobar"), "85944171f73967e8");
}

TEST(ContentHash, EveryByteCounts) {
  EXPECT_NE(content_hash("second"), content_hash("Second"));
  EXPECT_NE(content_hash(std::string("a\0b", 3)), content_hash("a"));
  EXPECT_EQ(content_hash("\xff\x80"), content_hash("\xff\x80"));
  EXPECT_EQ(content_hash("x").size(), 16u);
}

}  // namespace
}  // namespace rk::base
