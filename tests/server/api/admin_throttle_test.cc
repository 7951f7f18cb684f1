// Wrong admin tokens counted per address (server/api/admin_throttle.h), on times the test gives: a burst, then one
// try per refill; an IPv6 host counted by its /64; the table bounded however many addresses guess, with the
// addresses beyond it throttled together rather than let through.
#include "server/api/admin_throttle.h"

#include <gtest/gtest.h>

#include <string>

namespace rk::server::api {
namespace {

using std::chrono::seconds;

constexpr Nanos kT0 = seconds(1000);

// Wrong tokens from `client` at `now` until it is throttled; how many were looked at.
int tries(AdminThrottle& t, const std::string& client, Nanos now) {
  int n = 0;
  while (t.wait(client, now) == Nanos{0} && n < 1000) {
    t.failed(client, now);
    ++n;
  }
  return n;
}

TEST(AdminThrottle, ABurstThenOneTryPerRefill) {
  AdminThrottle t({.burst = 3, .refill = seconds(2)});
  EXPECT_EQ(tries(t, "192.0.2.1", kT0), 3);
  EXPECT_EQ(t.wait("192.0.2.1", kT0), seconds(2));
  EXPECT_EQ(t.wait("192.0.2.1", kT0 + seconds(1)), seconds(1));
  EXPECT_EQ(tries(t, "192.0.2.1", kT0 + seconds(2)), 1);
  EXPECT_EQ(tries(t, "192.0.2.1", kT0 + seconds(9)), 3);  // 7 s since: three back, the bucket never above full
  EXPECT_EQ(tries(t, "192.0.2.2", kT0), 3);               // another address has its own
}

TEST(AdminThrottle, OneIpv6HostIsOneClientAndIpv4MappedIsIpv4) {
  AdminThrottle t({.burst = 2, .refill = seconds(10)});
  t.failed("2001:db8:1:2::1", kT0);
  t.failed("2001:db8:1:2:ffff::9", kT0);  // the same /64
  EXPECT_GT(t.wait("2001:db8:1:2::77", kT0), Nanos{0});
  EXPECT_EQ(t.wait("2001:db8:1:3::1", kT0), Nanos{0});
  t.failed("::ffff:192.0.2.9", kT0);
  t.failed("192.0.2.9", kT0);
  EXPECT_GT(t.wait("192.0.2.9", kT0), Nanos{0});
}

TEST(AdminThrottle, TheTableStaysBoundedAndAddressesBeyondItShareOneBucket) {
  AdminThrottle t({.burst = 2, .refill = seconds(10), .max_addresses = 100});
  int looked_at = 0;
  for (int i = 0; i < 100'000; ++i) {
    looked_at += tries(
        t, "10." + std::to_string(i >> 16) + "." + std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255), kT0);
  }
  EXPECT_EQ(t.addresses(), 100u);
  // 100,000 addresses got 2 tries each in the table's 100 places and 2 in the shared bucket, not 200,000; a new
  // address waits with the others beyond the table.
  EXPECT_EQ(looked_at, 100 * 2 + 2);
  EXPECT_EQ(t.wait("192.0.2.1", kT0), seconds(10));
  EXPECT_EQ(t.wait("10.0.0.5", kT0), seconds(10));
  // Once a bucket is full again its address is the same as a new one, and gives its place up.
  EXPECT_EQ(t.wait("192.0.2.1", kT0 + seconds(20)), Nanos{0});
  t.failed("192.0.2.1", kT0 + seconds(20));
  EXPECT_EQ(t.addresses(), 1u);
  EXPECT_EQ(t.wait("192.0.2.1", kT0 + seconds(20)), Nanos{0});
  t.failed("192.0.2.1", kT0 + seconds(20));
  EXPECT_EQ(t.wait("192.0.2.1", kT0 + seconds(20)), seconds(10));
}

TEST(AdminThrottle, AnAddressNeverWrongHasNoPlace) {
  AdminThrottle t;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(t.wait("10.0.0." + std::to_string(i % 256), kT0), Nanos{0});
  EXPECT_EQ(t.addresses(), 0u);
}

}  // namespace
}  // namespace rk::server::api
