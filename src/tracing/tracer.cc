// tracing/tracer.cc: parent-based ratio sampling and span ids (see tracer.h).
#include "tracing/tracer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

namespace rk::tracing {

namespace {

struct Xoshiro {
  std::uint64_t s[4];
  Xoshiro() {
    std::random_device rd;
    for (auto& w : s) w = (std::uint64_t{rd()} << 32) ^ rd();
    if ((s[0] | s[1] | s[2] | s[3]) == 0) s[0] = 1;  // the one state it never leaves
  }
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

// A random id, never all zeros (which W3C and OTLP read as no id).
template <std::size_t N>
void fill(std::array<std::uint8_t, N>& id) {
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      const std::uint64_t r = random64();
      std::memcpy(id.data() + i, &r, std::min<std::size_t>(8, N - i));
    }
  } while (std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; }));
}

}  // namespace

std::uint64_t random64() {
  thread_local Xoshiro generator;
  return generator.next();
}

Tracer::Tracer(TracerOptions options, std::shared_ptr<SpanSink> sink) : options_(options), sink_(std::move(sink)) {
  if (!(options_.sample_rate >= 0 && options_.sample_rate <= 1)) {
    throw std::invalid_argument("the sample rate must be from 0 to 1");
  }
  if (!sink_) throw std::invalid_argument("a tracer needs a sink");
  bound_ = bound(options_.sample_rate);
}

std::uint64_t Tracer::bound(double rate) {
  if (rate >= 1) return std::uint64_t{1} << 63;
  if (rate <= 0) return 0;
  return static_cast<std::uint64_t>(std::ldexp(rate, 63));
}

namespace {

// The trace id's low 63 bits against bound: every low 63-bit value is below 2^63.
bool below(const TraceId& trace_id, std::uint64_t bound) {
  std::uint64_t low = 0;
  for (std::size_t i = 8; i < 16; ++i) low = (low << 8) | trace_id[i];
  return (low >> 1) < bound;
}

}  // namespace

bool Tracer::ratio_samples(const TraceId& trace_id, double rate) { return below(trace_id, bound(rate)); }

std::optional<SpanIds> Tracer::start(const Parent& parent) {
  if (parent.sampled == Sampled::kNo) return std::nullopt;
  SpanIds ids;
  if (parent.has_ids) {
    ids.trace_id = parent.trace_id;
    ids.parent_span_id = parent.span_id;
  } else {
    if (parent.sampled == Sampled::kUnknown && options_.sample_rate <= 0) return std::nullopt;
    fill(ids.trace_id);
  }
  if (parent.sampled == Sampled::kUnknown && !below(ids.trace_id, bound_)) return std::nullopt;
  fill(ids.span_id);
  return ids;
}

}  // namespace rk::tracing
