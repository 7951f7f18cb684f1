// tracing/tracer.h: which decisions are traced, their span ids, and their spans handed to an exporter.
//
//   Tracer tracer({.sample_rate = 0.01}, exporter);   // exporter: a SpanSink (tracing/otlp_exporter.h)
//   if (auto ids = tracer.start(parent)) { ... tracer.finish(make_span(*ids, ...)); }
//
// Sampling is parent-based: a caller that says whether its trace is sampled (traceparent's flag, B3's) is followed;
// otherwise the trace id decides, sampled when its low 63 bits fall below sample_rate x 2^63 (so every server that
// sees one trace decides it alike). A decision with no caller's trace starts a new one. Ids come from a
// xoshiro256** generator per thread, seeded from the system's random source: cheap, not for secrets.
//
// Thread safety: start() and finish() may be called from any thread; the sink must take spans without blocking.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tracing/context.h"

namespace rk::tracing {

using AttributeValue = std::variant<std::string, std::int64_t, bool, std::vector<std::string>>;

struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  std::optional<SpanId> parent_span_id;
  std::string trace_state;
  std::string name;
  std::uint64_t start_unix_ns = 0;
  std::uint64_t end_unix_ns = 0;
  std::vector<std::pair<std::string, AttributeValue>> attributes;
  bool error = false;  // OTLP status ERROR with `status_message`, else OK
  std::string status_message;
};

// Where finished spans go. submit() must return at once (a full queue drops the span and counts it).
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void submit(Span span) = 0;
};

struct SpanIds {
  TraceId trace_id{};
  SpanId span_id{};
  std::optional<SpanId> parent_span_id;
};

struct TracerOptions {
  double sample_rate = 1.0;  // 0..1: the share of traces without a caller's decision that are sampled
};

class Tracer {
 public:
  Tracer(TracerOptions options, std::shared_ptr<SpanSink> sink);

  // The new span's ids when this decision is sampled, else nullopt.
  std::optional<SpanIds> start(const Parent& parent);
  void finish(Span span) { sink_->submit(std::move(span)); }

  // Whether a trace with this id and no caller's decision is sampled at `rate`.
  static bool ratio_samples(const TraceId& trace_id, double rate);

 private:
  static std::uint64_t bound(double rate);  // rate x 2^63

  TracerOptions options_;
  std::uint64_t bound_ = 0;  // bound(options_.sample_rate)
  std::shared_ptr<SpanSink> sink_;
};

// A fast per-thread generator's next 64 bits (xoshiro256**).
std::uint64_t random64();

}  // namespace rk::tracing
