// tracing/context.h: the caller's trace context read from its request's headers (HTTP) or metadata (gRPC): W3C
// Trace Context (`traceparent`, `tracestate`), then B3's single `b3` header, then B3's X-B3-* headers.
//
//   Parent p = read_parent([&](std::string_view name) { return header(name); });
//   // p.has_ids: the caller's trace and span; p.sampled: its decision (kUnknown: ours to make)
//
// Every header is the client's: each is read strictly and within fixed bounds (a traceparent is 55 bytes or a
// later version's few more, a tracestate at most kMaxTraceState bytes of printable ASCII), and one that is malformed
// is ignored as if absent, never guessed at: the decision then starts a new trace (when sampled) rather than join
// one that is not there. A header given twice reads as malformed (Lookup's empty value).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace rk::tracing {

using TraceId = std::array<std::uint8_t, 16>;
using SpanId = std::array<std::uint8_t, 8>;

enum class Sampled : std::uint8_t { kUnknown, kYes, kNo };

struct Parent {
  bool has_ids = false;  // trace_id and span_id are the caller's (never all zeros)
  TraceId trace_id{};
  SpanId span_id{};
  Sampled sampled = Sampled::kUnknown;
  std::string trace_state;  // W3C tracestate, passed on as given; empty without a valid traceparent

  bool operator==(const Parent&) const = default;
};

inline constexpr std::size_t kMaxTraceState = 512;

// nullopt: absent. A present but empty value, or one of a header given more than once, is malformed.
using Lookup = std::function<std::optional<std::string_view>(std::string_view lower_case_name)>;

// The first of traceparent, b3, X-B3-* that is present and well formed; a default Parent when none is.
Parent read_parent(const Lookup& header);

// Each format alone (nullopt: malformed). W3C: `traceparent` as version 00 defines it (lower-case hex; a later
// version is read by its first four fields); `tracestate` kept when it is within bounds.
std::optional<Parent> parse_traceparent(std::string_view traceparent, std::optional<std::string_view> tracestate);
// "{trace id: 16 or 32 hex}-{span id: 16 hex}[-{1|0|d}[-{parent span id}]]", or "0", "1", "d" alone.
std::optional<Parent> parse_b3(std::string_view b3);
// X-B3-TraceId, X-B3-SpanId, X-B3-Sampled (1, 0, true, false), X-B3-Flags (1: debug, sampled).
std::optional<Parent> parse_b3_multi(std::optional<std::string_view> trace_id, std::optional<std::string_view> span_id,
                                     std::optional<std::string_view> sampled, std::optional<std::string_view> flags);

// Lower-case hex of an id ("4bf92f3577b34da6a3ce929d0e0e4736").
std::string to_hex(const std::uint8_t* bytes, std::size_t n);
template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& id) {
  return to_hex(id.data(), N);
}

}  // namespace rk::tracing
