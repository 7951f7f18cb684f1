// The rules every listener counts connections by (server/connections/limits.h): whom an address counts as, which
// are exempt, and the counts.
#include "server/connections/limits.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <stdexcept>

namespace rk::server::connections {
namespace {

Address v4(const char* text) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, text, &a.sin_addr);
  return address_of(reinterpret_cast<const sockaddr*>(&a));
}

Address v6(const char* text) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  inet_pton(AF_INET6, text, &a.sin6_addr);
  return address_of(reinterpret_cast<const sockaddr*>(&a));
}

TEST(ConnectionLimits, AnIpv4AddressCountsAloneAnIpv6OneByItsSlash64) {
  ConnectionLimits limits({.max = 10, .max_per_ip = 2});
  EXPECT_EQ(limits.ip_key(v4("10.0.0.1")), limits.ip_key(v6("::ffff:10.0.0.1")));  // IPv4-mapped is IPv4
  EXPECT_NE(limits.ip_key(v4("10.0.0.1")), limits.ip_key(v4("10.0.0.2")));
  EXPECT_EQ(limits.ip_key(v6("2001:db8:0:1::1")), limits.ip_key(v6("2001:db8:0:1:ffff::9")));
  EXPECT_NE(limits.ip_key(v6("2001:db8:0:1::1")), limits.ip_key(v6("2001:db8:0:2::1")));
  EXPECT_EQ(limits.ip_key(v4("0.0.0.0")), "");  // a peer already gone
  const std::string key = limits.ip_key(v4("10.0.0.1"));
  EXPECT_TRUE(limits.take_ip(key));
  EXPECT_TRUE(limits.take_ip(key));
  EXPECT_FALSE(limits.take_ip(key));
  limits.give_ip(key);
  EXPECT_TRUE(limits.take_ip(key));
}

TEST(ConnectionLimits, ExemptAddressesAndRangesAreNotCountedByAddress) {
  ConnectionLimits limits({.max = 10, .max_per_ip = 2, .per_ip_exempt = {"127.0.0.0/8", "::1", "2001:db8::/32"}});
  EXPECT_EQ(limits.ip_key(v4("127.1.2.3")), "");
  EXPECT_EQ(limits.ip_key(v6("::1")), "");
  EXPECT_EQ(limits.ip_key(v6("2001:db8:ffff::1")), "");
  EXPECT_NE(limits.ip_key(v4("128.0.0.1")), "");
  EXPECT_NE(limits.ip_key(v6("2001:db9::1")), "");
  EXPECT_EQ(ConnectionLimits({.max = 10, .max_per_ip = 0}).ip_key(v4("10.0.0.1")), "");  // no per-address limit
}

TEST(ConnectionLimits, TheTotalAndTheBusyMark) {
  ConnectionLimits limits({.max = 4});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limits.take());
  EXPECT_TRUE(limits.busy());
  EXPECT_FALSE(limits.take());  // counted all the same, until given back
  EXPECT_EQ(limits.count(), 5u);
  limits.give();
  limits.give();
  EXPECT_TRUE(limits.busy());  // 3 of 4
  limits.give();
  EXPECT_FALSE(limits.busy());
}

TEST(ConnectionLimits, ABadExemptEntryIsAClearError) {
  for (const std::string bad : {"localhost", "10.0.0.0/33", "::1/129", "10.0.0.1/x", "10.0.0.1/", ""}) {
    try {
      Networks n({"127.0.0.1", bad});
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "'" + bad + "' is not an IP address or CIDR range (like 10.0.0.0/8)");
    }
  }
}

}  // namespace
}  // namespace rk::server::connections
