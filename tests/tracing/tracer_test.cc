// Parent-based ratio sampling and span ids.
#include "tracing/tracer.h"

#include <gtest/gtest.h>

#include <set>

namespace rk::tracing {
namespace {

struct Collect : SpanSink {
  void submit(Span s) override { spans.push_back(std::move(s)); }
  std::vector<Span> spans;
};

Parent caller(Sampled sampled) {
  Parent p;
  p.has_ids = true;
  p.trace_id = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  p.span_id = {1, 1, 1, 1, 1, 1, 1, 1};
  p.sampled = sampled;
  return p;
}

TEST(Tracer, TheCallersDecisionIsFollowedWhateverTheRate) {
  Tracer never({.sample_rate = 0}, std::make_shared<Collect>());
  const auto ids = never.start(caller(Sampled::kYes));
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->trace_id, caller(Sampled::kYes).trace_id);
  EXPECT_EQ(ids->parent_span_id, caller(Sampled::kYes).span_id);
  EXPECT_NE(ids->span_id, caller(Sampled::kYes).span_id);
  Tracer always({.sample_rate = 1}, std::make_shared<Collect>());
  EXPECT_FALSE(always.start(caller(Sampled::kNo)));
}

TEST(Tracer, WithoutACallerANewRootTraceAtTheRate) {
  Tracer tracer({.sample_rate = 0.25}, std::make_shared<Collect>());
  int sampled = 0;
  std::set<TraceId> traces;
  for (int i = 0; i < 20000; ++i) {
    if (auto ids = tracer.start(Parent{})) {
      ++sampled;
      EXPECT_FALSE(ids->parent_span_id);
      traces.insert(ids->trace_id);
    }
  }
  EXPECT_NEAR(sampled, 5000, 400);
  EXPECT_EQ(traces.size(), static_cast<std::size_t>(sampled));  // each root its own trace
  Tracer off({.sample_rate = 0}, std::make_shared<Collect>());
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(off.start(Parent{}));
}

TEST(Tracer, ACallersTraceWithoutADecisionIsDecidedByItsId) {
  // The low 63 bits of the trace id against rate x 2^63: every server decides one trace alike.
  TraceId low{}, high{};
  low[15] = 2;
  high.fill(0xff);
  EXPECT_TRUE(Tracer::ratio_samples(low, 0.01));
  EXPECT_FALSE(Tracer::ratio_samples(high, 0.99));
  Tracer tracer({.sample_rate = 0.5}, std::make_shared<Collect>());
  Parent p = caller(Sampled::kUnknown);
  p.trace_id = high;
  EXPECT_FALSE(tracer.start(p));
  p.trace_id = low;
  EXPECT_TRUE(tracer.start(p));
}

TEST(Tracer, ARateOutsideZeroToOneIsRefused) {
  EXPECT_THROW(Tracer({.sample_rate = 1.5}, std::make_shared<Collect>()), std::invalid_argument);
  EXPECT_THROW(Tracer({.sample_rate = -0.1}, std::make_shared<Collect>()), std::invalid_argument);
}

}  // namespace
}  // namespace rk::tracing
