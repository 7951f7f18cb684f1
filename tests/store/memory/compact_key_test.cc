// The in-process store's keys (store/memory/compact_key.h): inline or on the heap, compared a word at a time.
#include "store/memory/compact_key.h"

#include <gtest/gtest.h>

#include <string>

namespace rk::store::memory {
namespace {

// Keys compare by words for common lengths: every byte counts, at every length (inline and on the heap).
TEST(CompactKey, EqualsComparesEveryByteAtEveryLength) {
  for (std::size_t n = 0; n <= 40; ++n) {
    std::string a(n, 'k');
    for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<char>('a' + i % 26);
    CompactKey k;
    EXPECT_TRUE(k.is_free());
    k.assign(a);
    EXPECT_FALSE(k.is_free());
    EXPECT_EQ(k.view(), a);
    EXPECT_TRUE(k.equals(a)) << n;
    EXPECT_FALSE(k.equals(a + "x")) << n;
    if (n > 0) {
      EXPECT_FALSE(k.equals(a.substr(0, n - 1))) << n;
    }
    for (std::size_t i = 0; i < n; ++i) {
      std::string b = a;
      b[i] = static_cast<char>(b[i] ^ 0x20);
      EXPECT_FALSE(k.equals(b)) << n << " differing at " << i;
    }
    k.make_free(12345);  // a free slot holds the free list's link and equals no key, not even the empty one
    EXPECT_TRUE(k.is_free());
    EXPECT_EQ(k.link(), 12345u);
    EXPECT_FALSE(k.equals(a));
    EXPECT_FALSE(k.equals(""));
  }
}

}  // namespace
}  // namespace rk::store::memory
