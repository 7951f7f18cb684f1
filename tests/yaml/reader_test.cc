// The typed YAML reader that rules files and scenarios share (src/yaml/reader.h): each type's rule, once, with the
// exact problem and place it reports. The rules' and scenarios' own messages are checked in
// tests/testdata/config_errors/ and tests/sim/simulate_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "yaml/read_params.h"
#include "yaml/reader.h"

namespace rk::yaml {
namespace {

// The value of `v` in the document "v: <text>", read by `read`; `problem` gets "line:column: message" or "".
template <class Read>
auto read_v(const std::string& text, Read read, std::string& problem) {
  std::vector<Problem> problems;
  Reader r("v.yaml", problems);
  const YAML::Node root = YAML::Load("v: " + text);
  auto value = read(r, root["v"]);
  problem.clear();
  if (!problems.empty()) {
    problem = std::to_string(problems[0].pos.line) + ":" + std::to_string(problems[0].pos.column) + ": " +
              problems[0].message;
  }
  EXPECT_LE(problems.size(), 1u);
  return value;
}

TEST(YamlReader, BooleansAreYaml12CoreSchemaOnly) {
  const auto boolean = [](Reader& r, const YAML::Node& n) { return r.boolean(n, "v"); };
  std::string problem;
  for (const char* t : {"true", "True", "TRUE"}) {
    EXPECT_EQ(read_v(t, boolean, problem), true) << t;
    EXPECT_EQ(problem, "") << t;
  }
  for (const char* f : {"false", "False", "FALSE"}) {
    EXPECT_EQ(read_v(f, boolean, problem), false) << f;
    EXPECT_EQ(problem, "") << f;
  }
  // YAML 1.1's words (which yaml-cpp's as<bool>() takes), other casings, numbers, quoted or not a scalar: refused.
  for (const char* other : {"yes", "no", "on", "off", "y", "n", "Yes", "tRUE", "1", "0", "\"\"", "[true]"}) {
    EXPECT_EQ(read_v(other, boolean, problem), std::nullopt) << other;
    EXPECT_EQ(problem, "1:4: v: expected true or false") << other;
  }
}

TEST(YamlReader, WholeNumbersAreDecimalDigitsWithinBounds) {
  const auto whole = [](Reader& r, const YAML::Node& n) { return r.whole(n, "v", 1, 100); };
  std::string problem;
  EXPECT_EQ(read_v("1", whole, problem), 1u);
  EXPECT_EQ(read_v("100", whole, problem), 100u);
  EXPECT_EQ(problem, "");
  for (const char* bad : {"0", "101", "-1", "1.5", "0x10", "+5", "5 ", "1e2", "99999999999999999999"}) {
    EXPECT_EQ(read_v(std::string("'") + bad + "'", whole, problem), std::nullopt) << bad;
    EXPECT_EQ(problem, std::string("1:4: v: '") + bad + "' is not a whole number from 1 to 100") << bad;
  }
  EXPECT_EQ(read_v("{a: 1}", whole, problem), std::nullopt);
  EXPECT_EQ(problem, "1:4: v: expected a whole number");
  const auto any = [](Reader& r, const YAML::Node& n) { return r.whole(n, "v", 0, ~std::uint64_t{0}); };
  EXPECT_EQ(read_v("18446744073709551615", any, problem), ~std::uint64_t{0});
}

TEST(YamlReader, NumbersAreFinite) {
  const auto number = [](Reader& r, const YAML::Node& n) { return r.number(n, "v"); };
  std::string problem;
  EXPECT_EQ(read_v("2.5", number, problem), 2.5);
  EXPECT_EQ(read_v("-3", number, problem), -3.0);
  EXPECT_EQ(read_v("1e3", number, problem), 1000.0);
  EXPECT_EQ(problem, "");
  for (const char* bad : {"nan", "inf", "1e999", "ten", "1,5"}) {
    EXPECT_EQ(read_v(bad, number, problem), std::nullopt) << bad;
    EXPECT_EQ(problem, std::string("1:4: v: '") + bad + "' is not a number") << bad;
  }
  EXPECT_EQ(read_v("[1]", number, problem), std::nullopt);
  EXPECT_EQ(problem, "1:4: v: expected a number");
}

TEST(YamlReader, DurationsAreNeverNegative) {
  const auto duration = [](Reader& r, const YAML::Node& n) { return r.duration(n, "v"); };
  std::string problem;
  EXPECT_EQ(read_v("250ms", duration, problem), Nanos{250'000'000});
  EXPECT_EQ(read_v("1d", duration, problem), Nanos{86'400'000'000'000});
  EXPECT_EQ(read_v("0s", duration, problem), Nanos{0});
  EXPECT_EQ(problem, "");
  EXPECT_EQ(read_v("-1s", duration, problem), std::nullopt);
  EXPECT_EQ(problem, "1:4: v: '-1s' is not a duration (like 10s, 250ms, 1.5m, 2h, 1d; never negative)");
  EXPECT_EQ(read_v("{s: 1}", duration, problem), std::nullopt);
  EXPECT_EQ(problem, "1:4: v: expected a duration");
}

TEST(YamlReader, StringsAreAnyScalar) {
  const auto string = [](Reader& r, const YAML::Node& n) { return r.string(n, "v"); };
  std::string problem;
  EXPECT_EQ(read_v("12", string, problem), "12");
  EXPECT_EQ(read_v("NO", string, problem), "NO");  // no YAML 1.1 boolean in disguise
  EXPECT_EQ(read_v("''", string, problem), "");
  EXPECT_EQ(problem, "");
  EXPECT_EQ(read_v("[a]", string, problem), std::nullopt);
  EXPECT_EQ(problem, "1:4: v: expected a string");
}

TEST(YamlReader, MapsHaveKnownKeysEachOnce) {
  std::vector<Problem> problems;
  Reader r("m.yaml", problems);
  EXPECT_TRUE(r.check_map(YAML::Load("{a: 1, b: 2}"), "m", {"a", "b", "c"}));
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(r.check_map(YAML::Load("a: 1\nd: 2\na: 3\n? [x]\n: 4\n"), "m", {"a", "b"}));
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0].message, "m: unknown key 'd' (expected one of: a, b)");
  EXPECT_EQ(problems[0].pos.to_string(), "m.yaml:2:1");
  EXPECT_EQ(problems[1].message, "m: 'a' is given twice");
  EXPECT_EQ(problems[1].pos.line, 3);
  EXPECT_EQ(problems[2].message, "m: keys must be plain names");
  EXPECT_FALSE(r.check_map(YAML::Load("[1, 2]"), "m", {"a"}));
  EXPECT_EQ(problems.back().message, "m: expected a map");
  EXPECT_EQ(r.problem_count(), 4u);
}

TEST(YamlReader, EachAlgorithmParameterWithItsType) {
  std::vector<Problem> problems;
  Reader r("m.yaml", problems);
  const YAML::Node n =
      YAML::Load("{half_life: 2s, burst: 3, capacity: 4.5, count_refused: FALSE, align: calendar, bad: sideways}");
  LimitSpec spec;
  read_param(r, n["half_life"], "half_life", core::Param::kHalfLife, spec);
  read_param(r, n["burst"], "burst", core::Param::kBurst, spec);
  read_param(r, n["capacity"], "capacity", core::Param::kCapacity, spec);
  read_param(r, n["count_refused"], "count_refused", core::Param::kCountRefused, spec);
  read_param(r, n["align"], "align", core::Param::kAlign, spec);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(spec.half_life, Nanos{2'000'000'000});
  EXPECT_EQ(spec.burst, 3.0);
  EXPECT_EQ(spec.capacity, 4.5);
  EXPECT_EQ(spec.count_refused, false);
  EXPECT_EQ(spec.align, Align::kCalendar);
  read_param(r, n["bad"], "align", core::Param::kAlign, spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "align: 'sideways' is not an alignment (epoch, calendar)");
  EXPECT_EQ(spec.align, Align::kCalendar);  // left as it was
  read_param(r, n["bad"], "burst", core::Param::kBurst, spec);
  EXPECT_EQ(spec.burst, std::nullopt);
}

TEST(YamlReader, PlacesCountFromOneAndANodeMadeInCodeHasNone) {
  std::vector<Problem> problems;
  const Reader r("a.yaml", problems);
  const YAML::Node root = YAML::Load("a: 1\n");
  EXPECT_EQ(r.pos(root["a"]).to_string(), "a.yaml:1:4");
  EXPECT_EQ(r.pos(YAML::Node()).line, 0);
  EXPECT_EQ(r.pos(YAML::Node()).column, 0);
  EXPECT_EQ(r.pos(YAML::Node()).to_string(), "a.yaml");
}

TEST(YamlReader, ADocumentThatDoesNotParseIsOneProblemAtItsPlace) {
  std::vector<Problem> problems;
  bool read = false;
  read_document("a: [1, 2\nb: 3\n", "a.yaml", problems, [&](const YAML::Node&) { read = true; });
  EXPECT_FALSE(read);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(problems[0].message.starts_with("not valid YAML: ")) << problems[0].message;
  EXPECT_GT(problems[0].pos.line, 0);
}

TEST(YamlReader, WhatYamlCppThrowsWhileReadingIsAProblemNotAnException) {
  std::vector<Problem> problems;
  read_document("a: 1\n", "a.yaml", problems, [&](const YAML::Node& root) { (void)root["a"].as<std::vector<int>>(); });
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(problems[0].message.starts_with("unreadable: ")) << problems[0].message;
  EXPECT_EQ(problems[0].pos.line, 1);
  EXPECT_EQ(problems[0].pos.column, 4);
}

}  // namespace
}  // namespace rk::yaml
