// rules/config.h: a rules file as parsed and validated, before any limiter exists.
//
// The schema is envoyproxy/ratelimit's (domain; descriptors with key, value, rate_limit {unit, requests_per_unit,
// unlimited, name, replaces}, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata,
// nested descriptors), so its users can point ratekeeper at the files they already have. ratekeeper's extensions
// (docs/rules.md): `algorithm:` and its parameters on a rate_limit, `window:` / `unit_multiplier:` for windows of
// any length, `align: calendar`, file-level `defaults:`, `shadow_mode`, `all_or_nothing`, and `forward_auth:`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/source_position.h"
#include "ratekeeper/concurrency.h"
#include "ratekeeper/params.h"

namespace rk::rules {

// A place in a rules file, and a problem there (base/source_position.h: one type for every file ratekeeper reads).
using SourcePos = base::SourcePos;
using ConfigError = base::SourceError;  // to_string(): "file:line:column: message"

enum class Unit : std::uint8_t { kSecond, kMinute, kHour, kDay, kWeek, kMonth, kYear };

// Unit names as Envoy spells them in protos (SECOND..YEAR) and in rules files (lower case).
std::string_view unit_name(Unit u);
std::optional<Unit> parse_unit(std::string_view name);  // case-insensitive
Nanos unit_length(Unit u);  // MONTH = 30 days, YEAR = 365 days, as envoyproxy/ratelimit counts them

struct RateLimit {
  std::string name;  // optional; the target of other rules' `replaces`
  bool unlimited = false;
  std::optional<Unit> unit;  // as written (absent when unlimited or when `window:` is used)
  std::uint32_t requests_per_unit = 0;
  std::uint32_t unit_multiplier = 1;
  bool blocked = false;   // requests_per_unit 0: every request is over the limit
  bool calendar = false;  // `align: calendar`: week windows start on Monday (UTC)
  LimitSpec spec;         // the algorithm and its parameters, resolved (when not unlimited/blocked)
  // `algorithm: concurrency` (max_in_flight, lease_ttl): leases acquired and released (POST /v1/acquire and
  // /v1/release), never checked; `spec` is then unused.
  std::optional<ConcurrencySpec> concurrency;
  std::vector<std::string> replaces;
  SourcePos pos;
};

// What a limit runs, as every answer that names it says (/v1/check, /v1/rules, the dashboard): its algorithm's
// name, or "blocked" for a blocked limit, which runs none. Not for unlimited ones, which decide nothing.
std::string_view algorithm_shown(const RateLimit& limit);  // "concurrency" for a concurrency limit

struct Descriptor {
  std::string key;
  std::optional<std::string> value;  // absent: matches any value of the key
  bool wildcard = false;             // value contains '*'
  std::optional<RateLimit> rate_limit;
  bool shadow_mode = false;
  bool quota_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  bool share_threshold = false;
  // `metadata:` as JSON ("" for none): what gRPC answers put in dynamic_metadata when the descriptor passed
  // (--grpc-response-metadata). Scalars keep YAML's reading: true/false, null, numbers; quoted ones are strings.
  std::string metadata;
  std::vector<Descriptor> descriptors;
  SourcePos pos;
};

// Where forward-auth takes a descriptor entry's value from.
enum class Source : std::uint8_t { kClientIp, kHeader, kMethod, kPath, kPathPrefix, kHost, kQuery, kValue };

struct EntrySource {
  std::string key;
  Source source = Source::kClientIp;
  std::string name;            // header or query parameter name; the fixed value for kValue
  std::uint32_t segments = 1;  // kPathPrefix: how many path segments
};

struct Cidr {
  std::uint8_t bytes[16] = {};  // IPv4 as ::ffff:a.b.c.d
  int prefix = 0;               // over the 128 bits
};

struct ForwardAuth {
  bool enabled = false;
  int deny_status = 429;
  std::vector<Cidr> trusted_proxies;
  std::vector<std::vector<EntrySource>> descriptors;
};

// Where a domain's counters live, and what to answer when that store cannot be reached (docs/redis.md).
enum class StoreKind : std::uint8_t { kDefault, kMemory, kRedis };  // kDefault: Redis if the service has one
enum class FailurePolicy : std::uint8_t { kDefault, kFailOpen, kFailClosed, kLocal };  // kDefault: the service's
std::string_view failure_policy_name(FailurePolicy p);  // "fail_open", "fail_closed", "local"; "" for kDefault
std::optional<FailurePolicy> parse_failure_policy(std::string_view name);

// How servers share a domain's counters through Redis (docs/redis.md): each decision one round trip (kExact), or
// decided in process and the hits sent every --redis-batch-interval (kBatched). kDefault: exact.
enum class Sharing : std::uint8_t { kDefault, kExact, kBatched };

struct DomainConfig {
  std::string domain;
  std::vector<Descriptor> descriptors;
  bool shadow_mode = false;     // every rule of the domain counts but never refuses
  bool all_or_nothing = false;  // a request's descriptors are charged only if none is over the limit
  StoreKind store = StoreKind::kDefault;
  FailurePolicy redis_failure = FailurePolicy::kDefault;
  Sharing sharing = Sharing::kDefault;
  SourcePos sharing_pos;  // where `sharing:` was given, for the error when serve has no Redis
  ForwardAuth forward_auth;
  std::string file;
};

}  // namespace rk::rules
