// fuzz/trace_context_fuzz.cc: a caller's trace context (src/tracing/context.h), every header the client's. The input
// is split at newlines into traceparent, tracestate, b3, and the X-B3-* headers; a header that is well formed must
// give ids that are not all zeros and a tracestate within its bound; nothing may crash whatever the bytes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tracing/context.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  static constexpr std::string_view kNames[] = {"traceparent", "tracestate",   "b3",        "x-b3-traceid",
                                                "x-b3-spanid", "x-b3-sampled", "x-b3-flags"};
  std::optional<std::string_view> values[7];
  for (auto& v : values) {
    if (rest.empty()) break;
    const std::size_t nl = rest.find('\n');
    v = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  const rk::tracing::Parent p = rk::tracing::read_parent([&](std::string_view name) -> std::optional<std::string_view> {
    for (std::size_t i = 0; i < 7; ++i) {
      if (name == kNames[i]) return values[i];
    }
    return std::nullopt;
  });
  if (p.has_ids) {
    bool zero_trace = true, zero_span = true;
    for (auto b : p.trace_id) zero_trace = zero_trace && b == 0;
    for (auto b : p.span_id) zero_span = zero_span && b == 0;
    if (zero_trace || zero_span) __builtin_trap();
  }
  if (p.trace_state.size() > rk::tracing::kMaxTraceState) __builtin_trap();
  return 0;
}
