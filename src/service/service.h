// service/service.h: the decision service every protocol shares: a request's descriptors matched against the
// active rules and charged to their limiters, with envoyproxy/ratelimit's semantics (hits_addend, replaces,
// unlimited, shadow_mode, quota_mode, per-descriptor statuses) plus all_or_nothing.
//
// Protocol adapters (HTTP JSON, forward-auth, Envoy gRPC) turn their wire format into a CheckRequest and a
// CheckResponse back into theirs; nothing here knows about a wire.
//
// Thread safety: check() may be called from any number of threads at once.
#pragma once

#include <array>
#include <atomic>
#include <limits>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "ratekeeper/clock.h"
#include "ratekeeper/limiter.h"
#include "rules/reloader.h"
#include "service/breaker.h"
#include "store/batched/batcher.h"
#include "store/remote/remote_store.h"
#include "tracing/context.h"

namespace rk::logging {
class AccessLog;
}
namespace rk::tracing {
class Tracer;
}

namespace rk::service {

enum class Code : std::uint8_t { kUnknown = 0, kOk = 1, kOverLimit = 2 };  // Envoy's numbering
std::string_view code_name(Code c);                                        // "UNKNOWN", "OK", "OVER_LIMIT"

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
  // The rule set to decide by, when the caller has one already (forward-auth built the descriptors from it): one
  // read of the active set a request, not two. Null: the active set.
  std::shared_ptr<const rules::RuleSet> rules;
  // With `rules`, the caller may name `domain`'s config in it, which it has looked up already (no second lookup).
  const rules::DomainConfig* domain_config = nullptr;
  // The caller's trace context (tracing/context.h), which the adapter reads only when the service traces
  // (wants_trace_context()); and which adapter asked ("http", "auth", "grpc"), for the span and the access log.
  tracing::Parent trace;
  std::string_view protocol;
};

struct DescriptorStatus {
  Code code = Code::kOk;
  const rules::Rule* rule = nullptr;  // the matched rule; null for none and for request overrides
  bool has_limit = false;             // Envoy's current_limit is set
  std::string name;                   // the rule's name (or path); "override" for request overrides
  std::uint32_t requests_per_unit = 0;
  std::optional<rules::Unit> unit;  // absent for `window:` rules
  Nanos window{0};
  Algorithm algorithm = Algorithm::kFixedWindow;
  std::uint32_t limit_remaining = 0;
  // Over the limit: until an attempt may pass; else until back to fresh. At most http_fields::kMaxWait, which is also
  // "never" (a blocked rule, hits above what the limit admits): the wait the header fields say.
  Nanos duration_until_reset{0};
  Nanos retry_after{0};            // 0 when OK; kNever when the hits can never pass
  std::optional<double> estimate;  // earrrl
  bool shadowed = false;           // over the limit, let through by shadow mode
  bool unlimited = false;
  bool charged = false;    // counted in the rule's state
  std::uint64_t hits = 0;  // what the request asked this descriptor to count (0: a look)
  // The remote store did not answer for this descriptor (or the breaker is open): the domain's policy decided.
  rules::FailurePolicy fallback = rules::FailurePolicy::kDefault;  // kDefault: no fallback
  std::string store_error;                                         // why, when fallback is set
};

struct CheckResponse {
  Code overall = Code::kOk;
  std::vector<DescriptorStatus> statuses;       // same length and order as the request's descriptors
  std::shared_ptr<const rules::RuleSet> rules;  // keeps the statuses' rule pointers valid
};

struct RequestError {
  std::string field;  // "domain", "descriptors[2].entries[0].value", ...
  std::string message;
};

// Told of every charged decision under a rule (not dry runs, not request overrides), after shadow mode has been
// applied: what the dashboard's hot keys and rates are made of. Called on the deciding thread (a server thread, or
// the remote store's), so it must be cheap and thread-safe.
class DecisionObserver {
 public:
  virtual ~DecisionObserver() = default;
  virtual void observe(const std::shared_ptr<const rules::RuleSet>& set, const rules::Rule& rule, std::string_view key,
                       const DescriptorStatus& status, Nanos now) = 0;
};

// Tells each of `observers` (nulls skipped) of every decision, in order: the dashboard and the metrics both watch.
std::shared_ptr<DecisionObserver> observe_all(std::vector<std::shared_ptr<DecisionObserver>> observers);

// Documented in docs/service.md: bad requests beyond these get a RequestError and change nothing.
struct RequestLimits {
  std::size_t max_domain_bytes = 256;
  std::size_t max_descriptors = 64;
  std::size_t max_entries = 16;
  std::size_t max_key_bytes = 256;
  std::size_t max_value_bytes = 1024;
  // A descriptor's keys and values together (its counter key is about as long), and all of a request's: what one
  // request can make the server hold, whatever the per-entry limits above allow (16 x 1,280 bytes, 64 times over).
  std::size_t max_descriptor_bytes = 4096;
  std::size_t max_request_bytes = 65536;
  std::uint64_t max_hits = 1'000'000'000;
};

struct ServiceOptions {
  bool shadow_mode = false;  // every rule counts, none refuses
  RequestLimits limits;
  // For request overrides' limiters (one per configured domain and unit; unknown domains get none); its
  // max_memory_bytes is theirs together, shared equally among as many as can exist.
  StoreOptions store;
  // Shared state (Redis): domains use it unless their rules say `store: memory`. Null: every domain in memory.
  std::shared_ptr<store::remote::RemoteStore> remote;
  rules::FailurePolicy redis_failure = rules::FailurePolicy::kFailOpen;  // for domains that name none
  BreakerOptions breaker;
  Nanos fail_closed_retry_after = std::chrono::seconds(1);  // what a fail_closed refusal tells the client
  std::shared_ptr<DecisionObserver> observer;               // may be null
  // `sharing: batched` domains decide here and share through it (store/batched/batcher.h); null: they share exactly.
  std::shared_ptr<store::batched::Batcher> batcher;
  // Each checked decision a span (service/record.cc: when the tracer samples it) and an access log line; null: none.
  std::shared_ptr<tracing::Tracer> tracer;
  std::shared_ptr<logging::AccessLog> access_log;
};

// Counters of the remote store's use, for metrics.
struct RemoteStats {
  std::atomic<std::uint64_t> calls{0};        // batches sent to the store
  std::atomic<std::uint64_t> unavailable{0};  // descriptors the store did not answer (incl. breaker open)
  std::atomic<std::uint64_t> errors{0};       // descriptors the store refused with an error
  std::atomic<std::uint64_t> fallbacks[4]{};  // by FailurePolicy: [kFailOpen], [kFailClosed], [kLocal]
  // For the log: whether the store answered last time (a change is logged once), and when a store error was last
  // logged (at most one line every 10 s).
  std::atomic<bool> reachable{true};
  std::atomic<std::int64_t> unavailable_ns{0};  // the last time the store did not answer
  std::atomic<std::int64_t> error_logged_ns{std::numeric_limits<std::int64_t>::min()};
};

// Request overrides' limiters (at most 7 per configured domain) and their stores, summed.
struct OverrideStats {
  std::size_t limiters = 0;
  StoreStats store;
};

// The `concurrency` algorithm (docs/algorithms.md): one descriptor's lease, acquired under the concurrency limit it
// matches and released by its id (service/leases.cc).
struct LeaseRequest {
  std::string domain;
  std::vector<std::pair<std::string, std::string>> entries;
  std::string lease;  // release: the id the acquire answered
};

struct LeaseAnswer {
  bool done = false;  // acquired; released (false: unknown, expired or released: nothing changed)
  std::string lease;  // acquired: its id, 32 hex digits
  std::string name;   // the rule's name (or path)
  std::uint32_t max_in_flight = 0;
  std::uint32_t in_flight = 0;  // acquire: the key's leases after it
  Nanos lease_ttl{0};
  Nanos retry_after{0};     // refused: until the first held lease expires (a release may come sooner)
  std::string store_error;  // not empty: the store did not answer (or refused): nothing is known
};

using LeaseResult = std::variant<LeaseAnswer, RequestError>;
using LeaseDone = std::function<void(LeaseResult)>;

// Reserve and settle (docs/algorithms.md): one descriptor's estimate reserved under the rate limit it matches, and
// the reservation settled at what was used (service/reservations.cc), where the domain's counts are: the rule's
// limiter in process, or the remote store.
struct ReserveRequest {
  std::string domain;
  std::vector<std::pair<std::string, std::string>> entries;
  std::uint64_t amount = 0;            // reserve: the estimate; settle: the actual (at most kMaxReservationAmount)
  std::string reservation;             // settle: the id the reserve answered
  Nanos ttl = kDefaultReservationTtl;  // reserve: how long the reservation is held
};

struct ReserveAnswer {
  bool done = false;           // reserved (allowed); settled (false: unknown, expired, settled or another key's)
  std::string reservation;     // reserved: its id, 32 hex digits
  std::string name;            // the rule's name (or path)
  std::uint64_t reserved = 0;  // settle: the reservation's estimate
  Decision decision;           // the reserve's check; the settle's overdraw (refused if it overdrew) or look
  Nanos ttl{0};
  std::string store_error;  // not empty: the remote store did not answer (or refused): nothing is known
};

using ReserveResult = std::variant<ReserveAnswer, RequestError>;
using ReserveDone = std::function<void(ReserveResult)>;

using CheckResult = std::variant<CheckResponse, RequestError>;
using CheckDone = std::function<void(CheckResult)>;

class Service {
 public:
  Service(rules::Reloader& rules, std::shared_ptr<const Clock> clock, ServiceOptions options = {});

  // Decides and charges. `done` runs exactly once: at once (in-process domains, bad requests), or later on the
  // remote store's thread. check() waits for it: for tests and tools, not for a server's event loop.
  void check_async(CheckRequest request, CheckDone done);
  CheckResult check(const CheckRequest& request);

  // A lease on the concurrency limit the request's descriptor matches, and its release. `done` runs exactly once, as
  // check_async's. A descriptor that matches no concurrency limit is a RequestError.
  void acquire_async(LeaseRequest request, LeaseDone done);
  void release_async(LeaseRequest request, LeaseDone done);
  LeaseResult acquire(const LeaseRequest& request);
  LeaseResult release(const LeaseRequest& request);

  // A reservation of an estimate on the rate limit the request's descriptor matches, and its settlement at the
  // actual amount. `done` runs exactly once, as check_async's. A descriptor that matches no rate limit is a
  // RequestError.
  void reserve_async(ReserveRequest request, ReserveDone done);
  void settle_async(ReserveRequest request, ReserveDone done);
  ReserveResult reserve(const ReserveRequest& request);
  ReserveResult settle(const ReserveRequest& request);

  // The matcher alone, for the admin dry run: which rule each descriptor would use, charging nothing.
  void dry_run_async(CheckRequest request, CheckDone done);
  CheckResult dry_run(const CheckRequest& request);

  // Forgets the state of each descriptor's key under its matched rule (admin). One entry per descriptor: whether
  // a key was tracked. Waits for the remote store.
  std::variant<std::vector<bool>, RequestError> reset(const CheckRequest& request);

  // What an attempt of cost 1 would be told now for each counter key of `rule`, recording nothing: from the remote
  // store when the rule's domain uses it (waits for it; nullopt where it did not answer), else from the rule's own
  // limiter. For the admin listener's hot keys.
  std::vector<std::optional<Decision>> peek_keys(const rules::RuleSet& set, const rules::Rule& rule,
                                                 const std::vector<std::string>& keys);

  // Whether the domain's decisions are the remote store's (its rules' limiters then hold nothing worth keeping).
  bool uses_remote(const rules::DomainConfig* domain) const;

  const RemoteStats& remote_stats() const { return remote_stats_; }
  const CircuitBreaker* breaker() const { return breaker_.get(); }
  const store::batched::Batcher* batcher() const { return options_.batcher.get(); }

  std::shared_ptr<const rules::RuleSet> rules() const { return rules_.current(); }
  const Clock& clock() const { return *clock_; }
  const ServiceOptions& options() const { return options_; }
  // Whether adapters are to read the caller's trace context (CheckRequest::trace): for the tracer, and for the
  // access log, whose lines name the caller's trace. Neither: nothing is read.
  bool wants_trace_context() const { return options_.tracer || options_.access_log; }
  OverrideStats override_stats() const;

 private:
  std::optional<RequestError> validate(const CheckRequest& request) const;
  void lease(LeaseRequest request, bool acquire, LeaseDone done);
  void reservation(ReserveRequest request, bool reserve, ReserveDone done);
  std::shared_ptr<Limiter> override_limiter(const rules::RuleSet* set, const std::string& domain, rules::Unit unit);
  void run(CheckRequest request, bool charge, CheckDone done);
  // `done` wrapped to record the decision as a span and an access log line (record.cc).
  CheckDone recorded(const CheckRequest& request, CheckDone done);
  // One request's decision, owned by the pass in flight: run() makes it, ask() hands it to the store's answer,
  // answered() to the next pass or to finish(), which lets it go. A Job let go becomes its thread's spare, which
  // the next run() on that thread takes, vectors and all (their capacity kept): a request decided in process
  // allocates nothing for its Job.
  struct Job;
  struct Recycle {
    void operator()(Job* job) const noexcept;
  };
  using JobPtr = std::unique_ptr<Job, Recycle>;
  static std::unique_ptr<Job>& spare_job();
  static JobPtr take_job();
  void decide(JobPtr job, bool looking);
  void ask(JobPtr job);
  void answered(JobPtr job);
  void count_remote(const std::vector<store::remote::RemoteResult>& results);
  void finish(JobPtr job);
  Decision fallback(Job& job, std::size_t k, const store::remote::RemoteResult& r, bool looking);
  bool uses_batcher(const rules::DomainConfig* domain) const;
  void ask_batcher(JobPtr job);

  rules::Reloader& rules_;
  std::shared_ptr<const Clock> clock_;
  ServiceOptions options_;
  mutable std::mutex overrides_mu_;
  // Request overrides' limiters by configured domain ("" for every other domain) and unit: see override_limiter().
  std::unordered_map<std::string, std::array<std::shared_ptr<Limiter>, 7>> overrides_;
  std::string overrides_version_;            // the rules' version overrides_ was last pruned for
  std::unique_ptr<CircuitBreaker> breaker_;  // with a remote store
  RemoteStats remote_stats_;
  void log_store_health(const store::remote::RemoteResult* unavailable, const store::remote::RemoteResult* error,
                        bool answered);
};

}  // namespace rk::service
