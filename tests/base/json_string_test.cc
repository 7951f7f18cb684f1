#include "base/json_string.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

std::string literal(std::string_view s) {
  std::string out = "x=";
  append_json_string(out, s);
  return out;
}

TEST(JsonString, QuotesAndEscapes) {
  EXPECT_EQ(literal(""), "x=\"\"");
  EXPECT_EQ(literal("say \"hi\" \\ bye"), R"(x="say \"hi\" \\ bye")");
  EXPECT_EQ(literal("a\nb\rc\td"), R"(x="a\nb\rc\td")");
  EXPECT_EQ(literal(std::string("\0\x01\x1f\x7f", 4)), "x=\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(literal("\x08\x0c"), R"(x="\u0008\u000c")");
  EXPECT_EQ(literal("caf\xC3\xA9 /"), "x=\"caf\xC3\xA9 /\"");  // UTF-8 and '/' as they are
}

TEST(JsonString, EveryControlCharacterIsEscaped) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string s = literal(std::string(1, static_cast<char>(c)));
    for (const char o : s) EXPECT_GE(static_cast<unsigned char>(o), 0x20) << "byte " << c << " written raw";
    EXPECT_EQ(s[4], c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : 'u') << c;
  }
}

}  // namespace
}  // namespace rk::base
