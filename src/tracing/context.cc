// tracing/context.cc: W3C Trace Context and B3 read strictly (see context.h).
#include "tracing/context.h"

#include <algorithm>

#include "base/hex.h"

namespace rk::tracing {

namespace {

// Each byte's hex value: 0-15 for 0-9 and a-f, 16 + value for A-F (upper case, which W3C refuses), 0xff for the
// rest. A table, not base::hex_value's comparisons: ids are read on every traced request, 48 to 64 digits each.
struct HexTable {
  std::uint8_t v[256];
  constexpr HexTable() : v() {
    for (int c = 0; c < 256; ++c) {
      const int h = base::hex_value(static_cast<char>(c));
      v[c] = static_cast<std::uint8_t>(h < 0 ? 0xff : (c >= 'A' && c <= 'F') ? 16 + h : h);
    }
  }
};
constexpr HexTable kHex;

// `text` as exactly out.size() bytes of hex (lower case only when `lower_only`); false if it is not.
template <std::size_t N>
bool read_hex(std::string_view text, std::array<std::uint8_t, N>& out, bool lower_only) {
  if (text.size() != 2 * N) return false;
  const std::uint8_t limit = lower_only ? 16 : 32;  // past it: not a digit, or upper case where refused
  for (std::size_t i = 0; i < N; ++i) {
    const std::uint8_t hi = kHex.v[static_cast<unsigned char>(text[2 * i])];
    const std::uint8_t lo = kHex.v[static_cast<unsigned char>(text[2 * i + 1])];
    if (hi >= limit || lo >= limit) return false;
    out[i] = static_cast<std::uint8_t>(((hi & 15) << 4) | (lo & 15));
  }
  return true;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& id) {
  return std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; });
}

// A B3 trace id: 32 hex digits, or 16 (the upper half then zero).
bool read_b3_trace_id(std::string_view text, TraceId& out) {
  out = {};
  if (text.size() == 16) {
    std::array<std::uint8_t, 8> low{};
    if (!read_hex(text, low, false)) return false;
    std::copy(low.begin(), low.end(), out.begin() + 8);
  } else if (!read_hex(text, out, false)) {
    return false;
  }
  return !all_zero(out);
}

bool printable_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

std::string to_hex(const std::uint8_t* bytes, std::size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) base::append_hex(out, bytes[i]);
  return out;
}

std::optional<Parent> parse_traceparent(std::string_view tp, std::optional<std::string_view> tracestate) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 bytes.
  constexpr std::size_t kSize = 55;
  if (tp.size() < kSize || tp[2] != '-' || tp[35] != '-' || tp[52] != '-') return std::nullopt;
  std::array<std::uint8_t, 1> version{}, flags{};
  if (!read_hex(tp.substr(0, 2), version, true) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly 55 bytes; a later version may add fields after a '-', which are not ours to read.
  if (tp.size() > kSize && (version[0] == 0 || tp[kSize] != '-' || tp.size() > 256)) return std::nullopt;
  Parent p;
  if (!read_hex(tp.substr(3, 32), p.trace_id, true) || !read_hex(tp.substr(36, 16), p.span_id, true) ||
      !read_hex(tp.substr(53, 2), flags, true) || all_zero(p.trace_id) || all_zero(p.span_id)) {
    return std::nullopt;
  }
  p.has_ids = true;
  p.sampled = (flags[0] & 1) ? Sampled::kYes : Sampled::kNo;
  if (tracestate && tracestate->size() <= kMaxTraceState && printable_ascii(*tracestate)) {
    p.trace_state = std::string(*tracestate);
  }
  return p;
}

std::optional<Parent> parse_b3(std::string_view b3) {
  Parent p;
  if (b3.size() == 1) {  // a sampling decision alone
    if (b3 == "0") p.sampled = Sampled::kNo;
    else if (b3 == "1" || b3 == "d") p.sampled = Sampled::kYes;
    else return std::nullopt;
    return p;
  }
  if (b3.size() > 32 + 1 + 16 + 2 + 1 + 16) return std::nullopt;
  const std::size_t dash = b3.find('-');
  if (dash == std::string_view::npos || !read_b3_trace_id(b3.substr(0, dash), p.trace_id)) return std::nullopt;
  std::string_view rest = b3.substr(dash + 1);
  const std::size_t dash2 = rest.find('-');
  if (!read_hex(rest.substr(0, dash2), p.span_id, false) || all_zero(p.span_id)) return std::nullopt;
  p.has_ids = true;
  if (dash2 == std::string_view::npos) return p;
  rest = rest.substr(dash2 + 1);
  const std::size_t dash3 = rest.find('-');
  const std::string_view state = rest.substr(0, dash3);
  if (state == "1" || state == "d") p.sampled = Sampled::kYes;
  else if (state == "0") p.sampled = Sampled::kNo;
  else return std::nullopt;
  if (dash3 != std::string_view::npos) {
    SpanId parent_of_parent{};  // checked, not kept: the caller's span is our parent
    if (!read_hex(rest.substr(dash3 + 1), parent_of_parent, false)) return std::nullopt;
  }
  return p;
}

std::optional<Parent> parse_b3_multi(std::optional<std::string_view> trace_id, std::optional<std::string_view> span_id,
                                     std::optional<std::string_view> sampled, std::optional<std::string_view> flags) {
  Parent p;
  if (flags) {
    if (*flags == "1") p.sampled = Sampled::kYes;
    else if (*flags != "0") return std::nullopt;
  }
  if (sampled && p.sampled == Sampled::kUnknown) {
    if (*sampled == "1" || *sampled == "true") p.sampled = Sampled::kYes;
    else if (*sampled == "0" || *sampled == "false") p.sampled = Sampled::kNo;
    else return std::nullopt;
  }
  if (trace_id || span_id) {
    if (!trace_id || !span_id || !read_b3_trace_id(*trace_id, p.trace_id) || !read_hex(*span_id, p.span_id, false) ||
        all_zero(p.span_id)) {
      return std::nullopt;
    }
    p.has_ids = true;
  }
  if (!p.has_ids && p.sampled == Sampled::kUnknown) return std::nullopt;
  return p;
}

Parent read_parent(const Lookup& header) {
  if (const auto tp = header("traceparent")) {
    if (auto p = parse_traceparent(*tp, header("tracestate"))) return std::move(*p);
  }
  if (const auto b3 = header("b3")) {
    if (auto p = parse_b3(*b3)) return std::move(*p);
  }
  const auto trace_id = header("x-b3-traceid");
  const auto span_id = header("x-b3-spanid");
  const auto sampled = header("x-b3-sampled");
  const auto flags = header("x-b3-flags");
  if (trace_id || span_id || sampled || flags) {
    if (auto p = parse_b3_multi(trace_id, span_id, sampled, flags)) return std::move(*p);
  }
  return {};
}

}  // namespace rk::tracing
