// The caller's trace context read strictly: W3C traceparent/tracestate, B3 single and multi; malformed is ignored.
#include "tracing/context.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace rk::tracing {
namespace {

constexpr std::string_view kTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view kSpan = "00f067aa0ba902b7";

std::string tp(std::string_view flags = "01") {
  return "00-" + std::string(kTrace) + "-" + std::string(kSpan) + "-" + std::string(flags);
}

Parent read(const std::map<std::string, std::string>& headers) {
  return read_parent([&](std::string_view name) -> std::optional<std::string_view> {
    const auto it = headers.find(std::string(name));
    if (it == headers.end()) return std::nullopt;
    return std::string_view(it->second);
  });
}

TEST(TraceParent, AWellFormedOneGivesTheCallersIdsAndDecision) {
  const auto p = parse_traceparent(tp(), "congo=t61rcWkgMzE");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->has_ids);
  EXPECT_EQ(to_hex(p->trace_id), kTrace);
  EXPECT_EQ(to_hex(p->span_id), kSpan);
  EXPECT_EQ(p->sampled, Sampled::kYes);
  EXPECT_EQ(p->trace_state, "congo=t61rcWkgMzE");
  EXPECT_EQ(parse_traceparent(tp("00"), std::nullopt)->sampled, Sampled::kNo);
}

TEST(TraceParent, MalformedOnesAreRefused) {
  for (const std::string& bad : {
           std::string(),                                                        // empty
           tp().substr(0, 54),                                                   // short
           tp() + "-",                                                           // version 00 with more after it
           "ff" + tp().substr(2),                                                // version ff is invalid
           "00-" + std::string(32, '0') + "-" + std::string(kSpan) + "-01",      // all-zero trace id
           "00-" + std::string(kTrace) + "-" + std::string(16, '0') + "-01",     // all-zero span id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-" + std::string(kSpan) + "-01",  // upper-case hex
           "00-" + std::string(kTrace) + "_" + std::string(kSpan) + "-01",       // wrong separator
           "0g" + tp().substr(2),                                                // not hex
           "00-" + std::string(kTrace) + "-" + std::string(kSpan) + "-0x",
       }) {
    EXPECT_FALSE(parse_traceparent(bad, std::nullopt)) << bad;
  }
}

TEST(TraceParent, ALaterVersionIsReadByItsFirstFields) {
  const auto p = parse_traceparent("cc" + tp().substr(2) + "-what-comes-later", std::nullopt);
  ASSERT_TRUE(p);
  EXPECT_EQ(to_hex(p->trace_id), kTrace);
  EXPECT_FALSE(parse_traceparent("cc" + tp().substr(2) + "x", std::nullopt));  // not '-' after the flags
}

TEST(TraceParent, ATraceStateOutOfBoundsIsDroppedNotTheParent) {
  const auto big = parse_traceparent(tp(), std::string(kMaxTraceState + 1, 'a'));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->trace_state, "");
  const auto control = parse_traceparent(tp(), "a=b\r\nx: y");
  ASSERT_TRUE(control);
  EXPECT_EQ(control->trace_state, "");
}

TEST(B3, TheSingleHeaderInItsForms) {
  auto p = parse_b3(std::string(kTrace) + "-" + std::string(kSpan) + "-1");
  ASSERT_TRUE(p);
  EXPECT_EQ(to_hex(p->trace_id), kTrace);
  EXPECT_EQ(to_hex(p->span_id), kSpan);
  EXPECT_EQ(p->sampled, Sampled::kYes);
  p = parse_b3("a3ce929d0e0e4736-" + std::string(kSpan));  // 64-bit trace id, no decision
  ASSERT_TRUE(p);
  EXPECT_EQ(to_hex(p->trace_id), "0000000000000000a3ce929d0e0e4736");
  EXPECT_EQ(p->sampled, Sampled::kUnknown);
  p = parse_b3(std::string(kTrace) + "-" + std::string(kSpan) + "-d-" + "1111111111111111");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sampled, Sampled::kYes);
  p = parse_b3("0");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->has_ids);
  EXPECT_EQ(p->sampled, Sampled::kNo);
  for (const std::string& bad : {std::string("2"), std::string("x-y"),
                                 std::string(kTrace) + "-" + std::string(kSpan) + "-2", std::string(kTrace) + "-123",
                                 std::string(kTrace) + "-" + std::string(kSpan) + "-1-zz", std::string(300, 'a')}) {
    EXPECT_FALSE(parse_b3(bad)) << bad;
  }
}

TEST(B3, TheMultiHeaders) {
  auto p = parse_b3_multi(kTrace, kSpan, "1", std::nullopt);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sampled, Sampled::kYes);
  EXPECT_EQ(to_hex(p->span_id), kSpan);
  p = parse_b3_multi(kTrace, kSpan, std::nullopt, "1");  // debug: sampled
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sampled, Sampled::kYes);
  EXPECT_FALSE(parse_b3_multi(kTrace, std::nullopt, "1", std::nullopt));  // a trace without its span
  EXPECT_FALSE(parse_b3_multi(kTrace, kSpan, "maybe", std::nullopt));
}

TEST(ReadParent, TraceparentFirstThenB3ThenMulti) {
  const std::string b3 = "a3ce929d0e0e4736a3ce929d0e0e4736-" + std::string(kSpan) + "-0";
  Parent p = read({{"traceparent", tp()}, {"b3", b3}});
  EXPECT_EQ(to_hex(p.trace_id), kTrace);
  // A malformed traceparent is ignored: the next format that is well formed is read.
  p = read({{"traceparent", "garbage"}, {"b3", b3}});
  EXPECT_EQ(to_hex(p.trace_id), "a3ce929d0e0e4736a3ce929d0e0e4736");
  EXPECT_EQ(p.sampled, Sampled::kNo);
  p = read({{"x-b3-traceid", std::string(kTrace)}, {"x-b3-spanid", std::string(kSpan)}, {"x-b3-sampled", "1"}});
  EXPECT_TRUE(p.has_ids);
  // Nothing well formed: no parent at all (a new root trace if sampled).
  EXPECT_EQ(read({{"traceparent", "00-zz"}, {"b3", "nope"}, {"x-b3-traceid", "q"}}), Parent{});
  EXPECT_EQ(read({{"traceparent", ""}}), Parent{});  // given twice: the lookup's empty value
}

}  // namespace
}  // namespace rk::tracing
