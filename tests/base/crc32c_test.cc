// CRC-32C (base/crc32c.h), the state file's checksum: the check value, an empty input, a running CRC over two
// pieces, and RFC 3720's zeros.
#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace rk {
namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(base::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(base::crc32c(""), 0u);
  EXPECT_EQ(base::crc32c("56789", base::crc32c("1234")), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(base::crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
}

}  // namespace
}  // namespace rk
