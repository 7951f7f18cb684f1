#include "http_fields/rate_limit_headers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>

namespace rk::http_fields {

namespace {

// Structured Fields integers have at most 15 digits (RFC 9651 §3.3.1).
constexpr double kSfMax = 999'999'999'999'999.0;

// Rounded up without overflow (chrono::ceil adds a whole second after dividing, where (ns + 999'999'999) / 1e9
// would overflow for a saturated Nanos::max()).
std::int64_t ceil_seconds(Nanos d) {
  if (d <= Nanos{0}) return 0;
  return std::chrono::ceil<std::chrono::seconds>(d).count();
}

// A Structured Fields string: printable ASCII only, with '"' and '\' escaped.
void append_sf_string(std::string& out, std::string_view s) {
  const bool plain =
      std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {  // the usual name: appended whole rather than a byte at a time
    out += '"';
    out.append(s);
    out += '"';
    return;
  }
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  out += '"';
}

void append_int(std::string& out, std::int64_t v) {
  // One digit (a window of 1 s, a reset in 0 or 1 s: three of an answer's seven integers) needs no conversion.
  if (v >= 0 && v < 10) {
    out += static_cast<char>('0' + v);
    return;
  }
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  out.append(digits, static_cast<std::size_t>(end - digits));  // (pointer, count): not the iterator pair's replace()
}

std::int64_t whole(double x) {
  if (!(x > 0)) return 0;  // NaN too
  return static_cast<std::int64_t>(std::floor(std::min(x, kSfMax)));
}

bool waits_longer(const LimitState& a, const LimitState& b) {
  if (a.never != b.never) return a.never;
  return a.reset > b.reset;
}

}  // namespace

LimitState from_decision(std::string_view name, double quota, Nanos window, const Decision& d) {
  const bool never = !d.allowed && d.retry_after == kNever;
  return {.name = name,
          .quota = quota,
          .window = window,
          .refused = !d.allowed,
          .remaining = d.remaining,
          .reset = d.allowed ? d.reset_after
                   : never   ? kMaxWait
                             : d.retry_after,
          .never = never};
}

Policy policy(double quota, Nanos window) {
  Policy p{.q = 0, .w = std::max<std::int64_t>(1, ceil_seconds(window))};
  if (!(quota > 0) || window <= Nanos{0}) return p;  // blocked: nothing in any window
  const double window_s = to_seconds(window);
  // The relative nudge keeps 10 per 60 s from becoming 9.999... and then 9.
  const double q = quota * static_cast<double>(p.w) / window_s * (1 + 1e-12);
  if (q < 1) return {.q = 1, .w = std::max<std::int64_t>(1, whole(std::ceil(window_s / quota * (1 - 1e-12))))};
  p.q = whole(q);
  return p;
}

std::int64_t header_seconds(Nanos d) { return std::min(ceil_seconds(d), kMaxSeconds); }

std::size_t binding(std::span<const LimitState> limits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < limits.size(); ++i) {
    const LimitState &a = limits[i], &b = limits[best];
    if (a.refused != b.refused) {
      if (a.refused) best = i;
    } else if (a.refused ? waits_longer(a, b) : a.remaining < b.remaining) {
      best = i;
    }
  }
  return best;
}

void format_to(std::span<const LimitState> limits, FieldSink& out) {
  if (limits.empty()) return;
  std::string* v = &out.value_of(kRateLimitPolicy);
  const std::size_t start = v->size();
  for (const LimitState& l : limits) {
    const Policy p = policy(l.quota, l.window);
    if (v->size() != start) *v += ", ";
    append_sf_string(*v, l.name);
    *v += ";q=";
    append_int(*v, p.q);
    *v += ";w=";
    append_int(*v, p.w);
  }
  out.end_field();
  const LimitState& b = limits[binding(limits)];
  // "Never" is one wait in every field: t, X-RateLimit-Reset and Retry-After (not t the window's end, which a client
  // reading X-RateLimit-Reset would take for "retry then", and be refused again, for ever).
  const std::int64_t r = whole(b.remaining), t = b.never ? kMaxSeconds : header_seconds(b.reset);
  v = &out.value_of(kRateLimit);
  append_sf_string(*v, b.name);
  *v += ";r=";
  append_int(*v, r);
  *v += ";t=";
  append_int(*v, t);
  out.end_field();
  append_int(out.value_of(kXRateLimitLimit), policy(b.quota, b.window).q);
  out.end_field();
  append_int(out.value_of(kXRateLimitRemaining), r);
  out.end_field();
  append_int(out.value_of(kXRateLimitReset), t);
  out.end_field();
  if (b.refused) {
    append_int(out.value_of(kRetryAfter), std::max<std::int64_t>(1, t));
    out.end_field();
  }
}

std::vector<std::pair<std::string, std::string>> format(std::span<const LimitState> limits) {
  FieldPairs pairs;
  if (!limits.empty()) pairs.fields.reserve(std::size(kFieldNames));
  format_to(limits, pairs);
  return std::move(pairs.fields);
}

}  // namespace rk::http_fields
