#include "base/number_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

namespace rk::base {
namespace {

std::string printf_g(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

TEST(NumberText, ShortestReadsBackExactly) {
  EXPECT_EQ(shortest_number(0.1), "0.1");
  EXPECT_EQ(shortest_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(shortest_number(2.0), "2");
  EXPECT_EQ(shortest_number(1e13), "1e+13");
  EXPECT_EQ(shortest_number(1e-5), "1e-05");
  EXPECT_EQ(shortest_number(-0.0), "-0");
  EXPECT_EQ(shortest_number(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(shortest_number(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(shortest_number(std::numeric_limits<double>::quiet_NaN()), "nan");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    double v;
    const std::uint64_t bits = rng();
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    EXPECT_EQ(std::strtod(shortest_number(v).c_str(), nullptr), v) << shortest_number(v);
  }
}

TEST(NumberText, DigitsAreWhatPrintfsGWrites) {
  EXPECT_EQ(digits_number(1e7, 10), "10000000");
  EXPECT_EQ(digits_number(1e13, 17), "10000000000000");
  EXPECT_EQ(digits_number(0.1, 17), "0.10000000000000001");
  EXPECT_EQ(digits_number(2.5, 17), "2.5");
  EXPECT_EQ(digits_number(1e10, 10), "1e+10");
  EXPECT_EQ(digits_number(std::numeric_limits<double>::quiet_NaN(), 17), "nan");
  EXPECT_EQ(digits_number(-std::numeric_limits<double>::infinity(), 10), "-inf");
  // Byte for byte printf's "%.*g" (in the C locale, as the tests run), for the precisions the tree uses and others.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> exponent(-30, 30);
  for (int i = 0; i < 20000; ++i) {
    const double v = (i % 2 ? -1 : 1) * std::pow(10.0, exponent(rng));
    const double whole = std::round(v);
    for (int digits : {1, 6, 10, 15, 17}) {
      EXPECT_EQ(digits_number(v, digits), printf_g(v, digits)) << v;
      EXPECT_EQ(digits_number(whole, digits), printf_g(whole, digits)) << whole;
    }
  }
  for (double v : {0.0, -0.0, 5e-324, std::numeric_limits<double>::max(), 999999999.5, 9999999999.0}) {
    for (int digits : {1, 10, 17}) EXPECT_EQ(digits_number(v, digits), printf_g(v, digits)) << v;
  }
}

}  // namespace
}  // namespace rk::base
