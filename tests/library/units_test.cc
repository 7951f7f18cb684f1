#include "ratekeeper/units.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rk {
namespace {

using namespace std::chrono_literals;

TEST(ParseDuration, UnitsAndDecimals) {
  EXPECT_EQ(parse_duration("10s"), Nanos{10s});
  EXPECT_EQ(parse_duration("250ms"), Nanos{250ms});
  EXPECT_EQ(parse_duration("1.5m"), Nanos{90s});
  EXPECT_EQ(parse_duration("2h"), Nanos{2h});
  EXPECT_EQ(parse_duration("1d"), Nanos{24h});
  EXPECT_EQ(parse_duration("1w"), Nanos{168h});
  EXPECT_EQ(parse_duration("500us"), Nanos{500us});
  EXPECT_EQ(parse_duration("7ns"), Nanos{7});
  EXPECT_EQ(parse_duration("3"), Nanos{3s});
  EXPECT_EQ(parse_duration("0.000000001"), Nanos{1});
}

TEST(ParseDuration, RejectsGarbage) {
  for (const char* bad : {"", "s", "-1s", "1.s", ".s", "1x", "abc", "1.0000000001s", "1e3s", "10 s", "1ss",
                          "99999999999999999999s", "300y"}) {
    EXPECT_EQ(parse_duration(bad), std::nullopt) << bad;
  }
}

TEST(ParseSeconds, ExactAndSigned) {
  EXPECT_EQ(parse_seconds("12"), Nanos{12s});
  EXPECT_EQ(parse_seconds("0.25"), Nanos{250ms});
  EXPECT_EQ(parse_seconds("-3.000000001"), -Nanos{3'000'000'001});
  EXPECT_EQ(parse_seconds("1.0000000001"), std::nullopt);  // finer than a nanosecond
  EXPECT_EQ(parse_seconds("1e3"), std::nullopt);
  EXPECT_EQ(parse_seconds("9223372037"), std::nullopt);  // past the int64 nanosecond range
}

TEST(FormatSeconds, TrimsZeros) {
  EXPECT_EQ(format_seconds(Nanos{1'500'000'000}), "1.5");
  EXPECT_EQ(format_seconds(Nanos{1}), "0.000000001");
  EXPECT_EQ(format_seconds(Nanos{12s}), "12");
  EXPECT_EQ(format_seconds(-Nanos{250ms}), "-0.25");
  EXPECT_EQ(format_seconds(Nanos::min()), "-9223372036.854775808");
}

TEST(NanosFromSeconds, SaturatesAndRoundsUp) {
  EXPECT_EQ(nanos_from_seconds_ceil(1e300), Nanos::max());
  EXPECT_EQ(nanos_from_seconds_ceil(-1e300), Nanos::min());
  EXPECT_EQ(nanos_from_seconds_ceil(std::nan("")), Nanos{0});
  EXPECT_EQ(nanos_from_seconds_ceil(1.0000000001), Nanos{1'000'000'001});
}

}  // namespace
}  // namespace rk
