#include "cli/replay.h"

#include <gtest/gtest.h>

#include <charconv>
#include <sstream>

#include "ratekeeper/limiter.h"

namespace rk::cli {
namespace {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome replay(const std::vector<std::string>& args, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int code = run_replay(args, in, out, err);
  return {code, out.str(), err.str()};
}

const std::vector<std::string> kEarrrl = {"--algorithm", "earrrl", "--limit", "0.5", "--half-life", "10s"};

TEST(Replay, EarrrlCsv) {
  const Outcome r = replay(kEarrrl, "0 alice\n1 alice\n# a comment\n\n2 bob 3\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "time,key,allowed,remaining,retry_after,estimate\n"
            "0,alice,1,6.213475204444817,0,0\n"
            "1,alice,1,5.28044221290801,0,0.06467291874531493\n"
            "2,bob,1,4.213475204444817,0,0\n");
  EXPECT_EQ(r.err, "");
}

// Every number reads back as exactly what the limiter decided (the maths can be checked against the output), and
// durations are exact to the nanosecond.
TEST(Replay, NumbersReadBackExactlyAsTheLimitersDecisions) {
  const Outcome r = replay({"--algorithm", "earrrl", "--limit", "3", "--half-life", "7s", "--window", "1.000000001s"},
                           "0 a\n0.1 a\n0.100000001 a 40\n0.3 a\n1.123456789 a\n");
  ASSERT_EQ(r.code, 0) << r.err;
  Limiter reference({.algorithm = Algorithm::kEarrrl,
                     .limit = 3,
                     .window = Nanos{1'000'000'001},
                     .half_life = std::chrono::seconds(7)});
  const std::pair<Nanos, std::uint64_t> attempts[] = {{Nanos{0}, 1},
                                                      {Nanos{100'000'000}, 1},
                                                      {Nanos{100'000'001}, 40},
                                                      {Nanos{300'000'000}, 1},
                                                      {Nanos{1'123'456'789}, 1}};
  std::istringstream rows(r.out);
  std::string row;
  std::getline(rows, row);  // the header
  int refused = 0;
  for (const auto& [t, cost] : attempts) {
    const Decision d = reference.check_at("a", t, cost);
    ASSERT_TRUE(std::getline(rows, row));
    std::vector<std::string> f;
    std::istringstream fields(row);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 6u) << row;
    auto number = [](const std::string& s) {
      double v = -1;
      EXPECT_EQ(std::from_chars(s.data(), s.data() + s.size(), v).ec, std::errc{}) << s;
      return v;
    };
    EXPECT_EQ(f[0], format_seconds(t));
    EXPECT_EQ(f[2], d.allowed ? "1" : "0");
    EXPECT_EQ(number(f[3]), d.remaining) << row;
    EXPECT_EQ(parse_seconds(f[4]), d.retry_after) << row;  // exact to the nanosecond
    EXPECT_EQ(number(f[5]), *d.estimate) << row;
    refused += !d.allowed;
  }
  EXPECT_GT(refused, 0) << "a refusal's retry_after must be among the rows:\n" << r.out;
}

TEST(Replay, RefusalsCarryRetryAfterAndOtherAlgorithmsNoEstimate) {
  const Outcome r = replay({"--algorithm=fixed_window", "--limit=1", "--window=10s"}, "1.5 k\n2 k\n3 k 5\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "time,key,allowed,remaining,retry_after,estimate\n"
            "1.5,k,1,0,0,\n"
            "2,k,0,0,8,\n"
            "3,k,0,0,-1,\n");
}

TEST(Replay, LeakyQueueAddsDelay) {
  const Outcome r = replay({"--algorithm", "leaky_queue", "--limit", "2", "--burst", "1"}, "0 k\n0 k\n0 k\n");
  EXPECT_EQ(r.out,
            "time,key,allowed,remaining,retry_after,estimate,delay\n"
            "0,k,1,1,0,,0\n"
            "0,k,1,0,0,,0.5\n"
            "0,k,0,0,0.5,,0\n");
}

TEST(Replay, KeysWithCommasAreQuoted) {
  const Outcome r = replay({"--algorithm", "gcra", "--limit", "1"}, "0 a,\"b\n");
  EXPECT_EQ(r.out, "time,key,allowed,remaining,retry_after,estimate\n0,\"a,\"\"b\",1,0,0,\n");
}

TEST(Replay, MalformedLineNamesTheLineNumber) {
  const Outcome r = replay(kEarrrl, "0 a\n\nfoo a\n5 a\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "ratekeeper replay: line 3: time 'foo' is not a number of seconds (digits, an optional '-', at most 9 "
            "decimals)\n");
  EXPECT_EQ(r.out, "time,key,allowed,remaining,retry_after,estimate\n0,a,1,6.213475204444817,0,0\n");
}

TEST(Replay, EachKindOfBadLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"1", "line 1: missing key: expected '<time-seconds> <key> [cost]'"},
      {"1 k -1", "line 1: cost '-1' is not a whole number from 0 to 18446744073709551615"},
      {"1 k 99999999999999999999", "line 1: cost '99999999999999999999' is not a whole number from 0 to"},
      {"1 k 2.5", "line 1: cost '2.5' is not a whole number"},
      {"1 k 2 x", "line 1: unexpected 'x' after the cost"},
      {"1.0000000001 k", "line 1: time '1.0000000001' is not a number of seconds"},
      {"99999999999 k", "line 1: time '99999999999' is not a number of seconds"},
      {"1 " + std::string(5000, 'k'), "line 1: key is 5000 bytes, above the limit of 4096"},
  };
  for (const auto& [line, message] : cases) {
    const Outcome r = replay(kEarrrl, line + "\n");
    EXPECT_EQ(r.code, 1) << line;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

TEST(Replay, BadFlagsExitTwoNamingTheProblem) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--algorithm", "earrrl", "--limit", "1"}, "half_life: earrrl needs half_life"},
      {{"--algorithm", "nope", "--limit", "1"}, "--algorithm: unknown algorithm 'nope'"},
      {{"--algorithm", "gcra"}, "--limit is required"},
      {{"--algorithm", "gcra", "--limit", "ten"}, "--limit: 'ten' is not a number"},
      {{"--algorithm", "gcra", "--limit", "-5"}, "limit: limit must be a number greater than 0 (got -5)"},
      {{"--algorithm", "gcra", "--limit", "5", "--window", "soon"}, "--window: 'soon' is not a duration"},
      {{"--algorithm", "gcra", "--limit", "5", "--frobnicate", "1"}, "unknown flag --frobnicate"},
      {{"--algorithm", "gcra", "--limit"}, "--limit needs a value"},
      {{"--algorithm", "gcra", "--limit", "5", "--max-keys", "0"}, "--max-keys: '0' is not a whole number"},
      {{"--algorithm", "gcra", "--limit", "5", "--count-refused", "maybe"}, "--count-refused: 'maybe' is not"},
  };
  for (const auto& [args, message] : cases) {
    const Outcome r = replay(args, "0 k\n");
    EXPECT_EQ(r.code, 2) << message;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("ratekeeper replay: " + message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace rk::cli
