// http_fields/rate_limit_headers.h: the one formatter of the rate-limit HTTP header fields, for every front end:
// forward-auth and the JSON API (src/server/api), Envoy's gRPC response_headers_to_add (src/server/grpc), and the
// nginx module through the C API (rk_format_headers in include/ratekeeper/ratekeeper.h).
//
//   std::vector<http_fields::LimitState> limits = {{.name = "per_ip", .quota = 10, .window = std::chrono::minutes(1),
//                                               .refused = true, .remaining = 0, .reset = Nanos{2'100'000'000}}};
//   for (auto& [name, value] : http_fields::format(limits)) reply.add(name, value);
//   // RateLimit-Policy: "per_ip";q=10;w=60     RateLimit: "per_ip";r=0;t=3     Retry-After: 3 (and X-RateLimit-*)
//   http_fields::format_to(limits, sink);  // the same fields into a FieldSink: an HTTP answer's buffer, no allocation
//
// The format and the reasons for it are in docs/service.md ("Rate-limit header fields"): the IETF draft's
// RateLimit-Policy (every limit) and RateLimit (the binding one), the legacy X-RateLimit-Limit/-Remaining/-Reset
// of the binding limit, and Retry-After when it refuses. Every number is a whole, non-negative count that a client
// parsing into 32 bits can hold; "never" is said as the largest of them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratekeeper/decision.h"
#include "ratekeeper/units.h"

namespace rk::http_fields {

// The largest number of seconds written (INT32_MAX, RFC 9111 §1.2.2's bound for delta-seconds): longer waits and
// "never" are said as this, which no 32-bit client turns negative.
inline constexpr std::int64_t kMaxSeconds = 2'147'483'647;
// The same as a duration: what the service answers as gRPC's and the JSON API's duration_until_reset for "never".
inline constexpr Nanos kMaxWait = std::chrono::seconds(kMaxSeconds);

// The fields format() may write, each by name, and all in their order (static, NUL-terminated: the C API hands
// these pointers out).
inline constexpr const char* kRateLimitPolicy = "RateLimit-Policy";
inline constexpr const char* kRateLimit = "RateLimit";
inline constexpr const char* kXRateLimitLimit = "X-RateLimit-Limit";
inline constexpr const char* kXRateLimitRemaining = "X-RateLimit-Remaining";
inline constexpr const char* kXRateLimitReset = "X-RateLimit-Reset";
inline constexpr const char* kRetryAfter = "Retry-After";
inline constexpr const char* kFieldNames[] = {kRateLimitPolicy,     kRateLimit,       kXRateLimitLimit,
                                              kXRateLimitRemaining, kXRateLimitReset, kRetryAfter};

// One limit's part in the answer.
struct LimitState {
  std::string_view name;  // the policy's name, quoted as a Structured Fields string
  double quota = 0;       // as configured: requests per window
  Nanos window{0};
  bool refused = false;  // as applied: a dry run's or shadow rule's refusal is not one
  double remaining = 0;  // what the key may still spend; floored
  Nanos reset{0};        // RateLimit's t: refused, until an attempt may pass; else until the key is fresh again
  bool never = false;    // refused, and no attempt of this cost can ever pass: every field says kMaxSeconds
};

// A Decision as a LimitState: t is the retry time when refused (kMaxWait when that is never), else reset_after.
LimitState from_decision(std::string_view name, double quota, Nanos window, const Decision& d);

// The policy's q and w: whole numbers with q/w no more than quota/window (rounded down, so a client pacing itself
// by them stays within the limit); below one request per second's window, q=1 over the time one request takes.
struct Policy {
  std::int64_t q = 0;
  std::int64_t w = 1;
};
Policy policy(double quota, Nanos window);

// Whole seconds, rounded up, capped at kMaxSeconds.
std::int64_t header_seconds(Nanos d);

// The index of the limit that binds: the refusing one with the longest wait, else the one with the least left.
// limits must not be empty.
std::size_t binding(std::span<const LimitState> limits);

// Where format_to() writes each field: its value is appended to the string value_of(name) returns, and
// end_field() follows. A sink that appends into a buffer it keeps (an HTTP answer's own field lines) formats with
// no allocation per field.
class FieldSink {
 public:
  virtual std::string& value_of(std::string_view name) = 0;  // name is one of kFieldNames
  virtual void end_field() {}

 protected:
  ~FieldSink() = default;
};

// The fields as (name, value) pairs: what format() returns.
class FieldPairs final : public FieldSink {
 public:
  std::string& value_of(std::string_view name) override { return fields.emplace_back(name, std::string()).second; }
  std::vector<std::pair<std::string, std::string>> fields;
};

// The header fields, in a fixed order; none for no limits.
void format_to(std::span<const LimitState> limits, FieldSink& out);
std::vector<std::pair<std::string, std::string>> format(std::span<const LimitState> limits);

}  // namespace rk::http_fields
