// Redis URLs (store/redis/url.h): single, Cluster and Sentinel forms read, and each bad one refused naming what is
// wrong.
#include "store/redis/url.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace rk::store::redis {
namespace {

TEST(RedisUrl, GoodAndBad) {
  auto o = ClientOptions::parse_url("redis://u:p@127.0.0.1:7000/3");
  EXPECT_EQ(o.mode, ClientOptions::Mode::kSingle);
  EXPECT_EQ(o.username, "u");
  EXPECT_EQ(o.password, "p");
  EXPECT_EQ(o.endpoints[0].port, 7000);
  EXPECT_EQ(o.db, 3);
  o = ClientOptions::parse_url("redis+cluster://127.0.0.1:7000,[::1]:7001");
  ASSERT_EQ(o.endpoints.size(), 2u);
  EXPECT_EQ(o.endpoints[1].host, "::1");
  o = ClientOptions::parse_url("redis+sentinel://127.0.0.1/mymaster");
  EXPECT_EQ(o.endpoints[0].port, 26379);
  EXPECT_EQ(o.primary_name, "mymaster");
  EXPECT_EQ(ClientOptions::parse_url("redis://localhost").endpoints[0].host, "localhost");  // resolved at connect
  const std::pair<const char*, const char*> bad[] = {
      {"http://127.0.0.1", "the scheme must be"},
      {"redis://127.0.0.1:0", "port '0'"},
      {"redis://127.0.0.1:99999", "port '99999'"},
      {"redis://db example:6379", "neither an IP address nor a host name"},
      {"redis://127.0.0.1,127.0.0.2", "takes one host"},
      {"redis://127.0.0.1/99", "database '99'"},
      {"redis+sentinel://127.0.0.1:26379", "needs the primary's name"},
      {"redis://", "no host"},
  };
  for (const auto& [url, message] : bad) {
    try {
      ClientOptions::parse_url(url);
      ADD_FAILURE() << url << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << url << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace rk::store::redis
