// Client addresses and their keys (server/api/client_address.h).
#include <gtest/gtest.h>

#include <set>

#include "server/api/client_address.h"

namespace rk::server::api {
namespace {

std::string key(std::string_view text, ClientPrefixes p = {}) {
  const auto a = parse_ip(text);
  EXPECT_TRUE(a) << text;
  return a ? client_key(*a, p) : "";
}

TEST(ClientAddress, ParsesTheFormsProxiesWrite) {
  EXPECT_EQ(format_ip(*parse_ip(" 192.0.2.1\t")), "192.0.2.1");
  EXPECT_EQ(format_ip(*parse_ip("192.0.2.1:8080")), "192.0.2.1");
  EXPECT_EQ(format_ip(*parse_ip("[2001:DB8::1]:443")), "2001:db8::1");
  EXPECT_EQ(format_ip(*parse_ip("2001:0db8:0000:0000:0000:0000:0000:0001")), "2001:db8::1");
  for (const char* bad : {"", " ", "garbage", "example.com", "192.0.2", "192.0.2.1.5", "300.0.0.1", "fe80::1%eth0",
                          "[2001:db8::1", "unknown", "1.2.3.4, 5.6.7.8"}) {
    EXPECT_FALSE(parse_ip(bad)) << bad;
  }
}

TEST(ClientAddress, Ipv6KeyedByItsSlash64ByDefault) {
  EXPECT_EQ(key("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64");
  EXPECT_EQ(key("2001:db8:1:2::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(key("2001:db8:1:3::1"), "2001:db8:1:3::/64");
  EXPECT_EQ(key("2001:db8:1:2::1", {.ipv6 = 128}), "2001:db8:1:2::1");
  EXPECT_EQ(key("2001:db8:1:2ff::1", {.ipv6 = 56}), "2001:db8:1:200::/56");
  EXPECT_EQ(key("2001:db8:1:2::1", {.ipv6 = 1}), "::/1");
  EXPECT_EQ(key("::1"), "::/64");
}

TEST(ClientAddress, Ipv4KeyedWholeByDefaultAndMappedIpv6IsIpv4) {
  EXPECT_EQ(key("192.0.2.77"), "192.0.2.77");
  EXPECT_EQ(key("::ffff:192.0.2.77"), "192.0.2.77");  // not "::/64": one IPv4 client, not a shared /64
  EXPECT_EQ(key("::FFFF:c000:024d"), "192.0.2.77");
  EXPECT_EQ(key("192.0.2.77", {.ipv4 = 24}), "192.0.2.0/24");
  EXPECT_EQ(key("::ffff:192.0.2.77", {.ipv4 = 24}), "192.0.2.0/24");
  EXPECT_EQ(key("192.0.2.77", {.ipv4 = 31}), "192.0.2.76/31");
}

TEST(ClientAddress, EveryAddressOfOneSlash64SharesOneKey) {
  std::set<std::string> keys;
  char text[64];
  for (unsigned i = 0; i < 65536; ++i) {
    std::snprintf(text, sizeof text, "2001:db8:aa:bb:%x:%x:%x:%x", i, i ^ 0x5a5a, (i * 7) & 0xffff, 65535 - i);
    keys.insert(key(text));
  }
  EXPECT_EQ(keys, std::set<std::string>{"2001:db8:aa:bb::/64"});
}

}  // namespace
}  // namespace rk::server::api
