// RESP, the Redis protocol (store/redis/resp.h): the parser on every kind of reply, whole and a byte at a time, and
// on every kind of malformed input, each named; commands encoded as arrays of bulk strings.
#include "store/redis/resp.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace rk::store::redis {
namespace {

std::vector<Reply> parse_all(std::string_view bytes, bool one_at_a_time, std::string* error = nullptr) {
  Parser p;
  std::vector<Reply> out;
  auto drain = [&] {
    while (auto r = p.next()) out.push_back(std::move(*r));
  };
  if (one_at_a_time) {
    for (char c : bytes) {
      p.feed(std::string_view(&c, 1));
      drain();
    }
  } else {
    p.feed(bytes);
    drain();
  }
  if (error) *error = p.error();
  return out;
}

TEST(RespParser, EveryKindOfReplyWholeAndByteByByte) {
  const std::string wire =
      "+OK\r\n-ERR bad\r\n:-42\r\n$5\r\nhe\r\no\r\n$-1\r\n*2\r\n*1\r\n:1\r\n$0\r\n\r\n*-1\r\n*0\r\n";
  for (bool bytewise : {false, true}) {
    const auto r = parse_all(wire, bytewise);
    ASSERT_EQ(r.size(), 8u);
    EXPECT_EQ(r[0].type, Reply::Type::kSimple);
    EXPECT_EQ(r[0].str, "OK");
    EXPECT_EQ(r[1].type, Reply::Type::kError);
    EXPECT_EQ(r[1].str, "ERR bad");
    EXPECT_EQ(r[2].integer, -42);
    EXPECT_EQ(r[3].str, "he\r\no");  // a bulk string may hold CRLF
    EXPECT_EQ(r[4].type, Reply::Type::kNil);
    ASSERT_EQ(r[5].elements.size(), 2u);
    EXPECT_EQ(r[5].elements[0].elements[0].integer, 1);
    EXPECT_EQ(r[5].elements[1].str, "");
    EXPECT_EQ(r[6].type, Reply::Type::kNil);
    EXPECT_EQ(r[7].type, Reply::Type::kArray);
    EXPECT_TRUE(r[7].elements.empty());
  }
}

TEST(RespParser, MalformedInputIsAnErrorThatNamesIt) {
  struct Case {
    std::string bytes, message;
  };
  const Case cases[] = {
      {"?what\r\n", "unknown reply type byte 63"},
      {":12x\r\n", "not a number: '12x'"},
      {"$-5\r\n", "bulk length -5"},
      {"$99999999999\r\n", "bulk length 99999999999"},
      {"*-2\r\n", "array length -2"},
      {"$3\r\nabcde\r\n", "a bulk string not followed by CRLF"},
      {std::string(20, '*').replace(0, 20, "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n") +
           "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
       "arrays nested deeper than 16"},
      {"+" + std::string(70000, 'a'), "a reply line longer than 64 KiB"},
  };
  for (const Case& c : cases) {
    std::string error;
    EXPECT_TRUE(parse_all(c.bytes, false, &error).empty()) << c.bytes.substr(0, 20);
    EXPECT_NE(error.find(c.message), std::string::npos) << "got '" << error << "' for " << c.bytes.substr(0, 20);
  }
}

TEST(RespEncode, ArraysOfBulkStrings) {
  std::string out;
  encode(out, {"SET", "k", std::string("a\0b", 3)});
  EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n", 29));
}

}  // namespace
}  // namespace rk::store::redis
