// server/app/service.h: the decision service every protocol shares: a request's descriptors matched against the
// active rules and charged to their limiters, with envoyproxy/ratelimit's semantics (hits_addend, replaces,
// unlimited, shadow_mode, quota_mode, per-descriptor statuses) plus all_or_nothing.
//
// Protocol adapters (HTTP JSON, forward-auth, Envoy gRPC) turn their wire format into a CheckRequest and a
// CheckResponse back into theirs; nothing here knows about a wire.
//
// Thread safety: check() may be called from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "ratekeeper/clock.h"
#include "rules/reloader.h"

namespace rk::app {

enum class Code : std::uint8_t { kUnknown = 0, kOk = 1, kOverLimit = 2 };  // Envoy's numbering
std::string_view code_name(Code c);                                       // "UNKNOWN", "OK", "OVER_LIMIT"

struct LimitOverride {
  std::uint32_t requests_per_unit = 0;
  rules::Unit unit = rules::Unit::kSecond;
};

struct CheckDescriptor {
  std::vector<std::pair<std::string, std::string>> entries;
  std::optional<std::uint64_t> hits_addend;
  std::optional<LimitOverride> limit;
};

struct CheckRequest {
  std::string domain;
  std::vector<CheckDescriptor> descriptors;
  std::uint64_t hits_addend = 0;  // 0: each descriptor counts 1
};

struct DescriptorStatus {
  Code code = Code::kOk;
  const rules::Rule* rule = nullptr;        // the matched rule; null for none and for request overrides
  bool has_limit = false;                   // Envoy's current_limit is set
  std::string name;                         // the rule's name (or path); "override" for request overrides
  std::uint32_t requests_per_unit = 0;
  std::optional<rules::Unit> unit;          // absent for `window:` rules
  Nanos window{0};
  Algorithm algorithm = Algorithm::kFixedWindow;
  std::uint32_t limit_remaining = 0;
  Nanos duration_until_reset{0};            // over the limit: until an attempt may pass; else until back to fresh
  Nanos retry_after{0};                     // 0 when OK; kNever when the hits can never pass
  std::optional<double> estimate;           // earrrl
  bool shadowed = false;                    // over the limit, let through by shadow mode
  bool unlimited = false;
  bool charged = false;                     // counted in the rule's state
};

struct CheckResponse {
  Code overall = Code::kOk;
  std::vector<DescriptorStatus> statuses;    // same length and order as the request's descriptors
  std::shared_ptr<const rules::RuleSet> rules;  // keeps the statuses' rule pointers valid
};

struct RequestError {
  std::string field;    // "domain", "descriptors[2].entries[0].value", ...
  std::string message;
};

// Documented in docs/service.md: bad requests beyond these get a RequestError and change nothing.
struct RequestLimits {
  std::size_t max_domain_bytes = 256;
  std::size_t max_descriptors = 64;
  std::size_t max_entries = 16;
  std::size_t max_key_bytes = 256;
  std::size_t max_value_bytes = 1024;
  std::uint64_t max_hits = 1'000'000'000;
};

struct ServiceOptions {
  bool shadow_mode = false;  // every rule counts, none refuses
  RequestLimits limits;
  StoreOptions store;        // for request overrides' limiters
  std::size_t max_overrides = 1000;
};

class Service {
 public:
  Service(rules::Reloader& rules, std::shared_ptr<const Clock> clock, ServiceOptions options = {});

  std::variant<CheckResponse, RequestError> check(const CheckRequest& request);

  // The matcher alone, for the admin dry run: which rule each descriptor would use, charging nothing.
  std::variant<CheckResponse, RequestError> dry_run(const CheckRequest& request);

  // Forgets the state of each descriptor's key under its matched rule (admin). One entry per descriptor: whether
  // a key was tracked.
  std::variant<std::vector<bool>, RequestError> reset(const CheckRequest& request);

  std::shared_ptr<const rules::RuleSet> rules() const { return rules_.current(); }
  const Clock& clock() const { return *clock_; }
  const ServiceOptions& options() const { return options_; }

 private:
  std::optional<RequestError> validate(const CheckRequest& request) const;
  std::shared_ptr<Limiter> override_limiter(const std::string& domain, const LimitOverride& o);
  std::variant<CheckResponse, RequestError> run(const CheckRequest& request, bool charge);

  rules::Reloader& rules_;
  std::shared_ptr<const Clock> clock_;
  ServiceOptions options_;
  std::mutex overrides_mu_;
  std::unordered_map<std::string, std::shared_ptr<Limiter>> overrides_;
};

}  // namespace rk::app
