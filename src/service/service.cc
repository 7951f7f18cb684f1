// service/service.cc: the decision path (service.h): a request's descriptors matched to their limits, each pass put
// to the store that holds them (in process, remote behind the circuit breaker, or batched), the domain's failure
// policy for what the store did not answer, then shadow mode, quotas and the overall code. Beside it: the request's
// caps (validate.cc), request overrides (overrides.cc), the admin's reset and peek (admin.cc) and the remote store's
// health (store_health.cc).
#include "service/service.h"
#include "service/wait_for.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/registry.h"
#include "http_fields/rate_limit_headers.h"
#include "service/overrides.h"

namespace rk::service {

namespace {

constexpr std::uint32_t kUnlimitedRemaining = std::numeric_limits<std::uint32_t>::max();

std::uint32_t clamp_remaining(double r) {
  if (!(r > 0)) return 0;
  if (r >= 4294967295.0) return kUnlimitedRemaining;
  return static_cast<std::uint32_t>(std::floor(r));
}

void describe(DescriptorStatus& st, const rules::RateLimit& limit, const std::string& name) {
  st.has_limit = true;
  st.name = name;
  st.requests_per_unit = limit.requests_per_unit;
  st.unit = limit.unit;
  st.window = limit.unit ? Nanos{rules::unit_length(*limit.unit).count() * limit.unit_multiplier} : limit.spec.window;
  st.algorithm = limit.spec.algorithm;
}

// duration_until_reset says the wait the rate-limit header fields say (http_fields/rate_limit_headers.h): "never" and
// every longer wait as http_fields::kMaxWait, so that Envoy, which turns it into its own X-RateLimit-Reset, tells the
// client the same as Retry-After.
Nanos said_wait(Nanos d) { return std::min(d, http_fields::kMaxWait); }

// A blocked limit (requests_per_unit 0) refuses everything, whatever the window: its wait is never (not the
// window's end, after which it refuses again).
void apply_blocked(DescriptorStatus& st) {
  st.code = Code::kOverLimit;
  st.limit_remaining = 0;
  st.retry_after = kNever;
  st.duration_until_reset = http_fields::kMaxWait;
}

void apply(DescriptorStatus& st, const Decision& d) {
  st.code = d.allowed ? Code::kOk : Code::kOverLimit;
  st.limit_remaining = clamp_remaining(d.remaining);
  st.retry_after = d.retry_after;
  st.duration_until_reset = said_wait(d.allowed ? d.reset_after : d.retry_after);  // never: kMaxWait
  st.estimate = d.estimate;
}

struct Pending {
  std::size_t index;
  std::shared_ptr<Limiter> limiter;  // null: blocked
  std::string key;
  std::uint64_t hits;
  bool shadow;
  std::string_view store_prefix;  // the key's prefix in a remote store: the rule's, or override_prefix()'s
  std::optional<std::uint32_t> override_limit;  // a request override: its limiter counts, this decides
  bool look_only = false;  // hits 0 where refused hits leave no trace: a peek of cost 1, charging nothing
};

// The key of pending p in the remote store.
std::string remote_key(const Pending& p) {
  std::string key;
  key.reserve(p.store_prefix.size() + p.key.size());
  return key.append(p.store_prefix).append(p.key);
}

// The in-process answers for the asked limits (positions in `pending`): a run of charges on one limiter goes to it
// as one check_many, so that the keys' fetches from memory overlap. Each limiter still sees its charges and peeks
// in the order asked (a run ends at a peek on its limiter); limiters are independent of one another.
template <class Peeks>
void ask_in_process(const std::vector<Pending>& pending, const std::vector<std::size_t>& asked, std::int64_t now,
                    Peeks&& peeks, std::vector<store::remote::RemoteResult>& results) {
  std::vector<bool> answered(asked.size());
  std::vector<std::size_t> run;
  std::vector<std::string_view> keys;
  std::vector<std::uint64_t> costs;
  std::vector<Decision> out;
  for (std::size_t i = 0; i < asked.size(); ++i) {
    if (answered[i]) continue;
    const Pending& p = pending[asked[i]];
    if (peeks(asked[i])) {
      results[i].status = store::remote::RemoteResult::Status::kOk;
      results[i].decision = p.limiter->peek_at(p.key, Nanos{now}, p.hits);
      continue;
    }
    run.clear();
    keys.clear();
    costs.clear();
    for (std::size_t m = i; m < asked.size(); ++m) {
      const Pending& q = pending[asked[m]];
      if (answered[m] || q.limiter != p.limiter) continue;
      if (peeks(asked[m])) break;
      run.push_back(m);
      keys.push_back(q.key);
      costs.push_back(q.hits);
      answered[m] = true;
    }
    out.resize(run.size());
    p.limiter->check_many_at(keys, costs, Nanos{now}, out);
    for (std::size_t r = 0; r < run.size(); ++r) {
      results[run[r]].status = store::remote::RemoteResult::Status::kOk;
      results[run[r]].decision = out[r];
    }
  }
}

Decision judged(const Pending& p, const Decision& d) {
  return p.override_limit ? judge_override(d, *p.override_limit, p.hits) : d;
}

}  // namespace

std::shared_ptr<DecisionObserver> observe_all(std::vector<std::shared_ptr<DecisionObserver>> observers) {
  struct All final : DecisionObserver {
    std::vector<std::shared_ptr<DecisionObserver>> each;
    void observe(const std::shared_ptr<const rules::RuleSet>& set, const rules::Rule& rule, std::string_view key,
                 const DescriptorStatus& status, Nanos now) override {
      for (const auto& o : each) o->observe(set, rule, key, status, now);
    }
  };
  auto all = std::make_shared<All>();
  for (auto& o : observers) {
    if (o) all->each.push_back(std::move(o));
  }
  return all;
}

std::string_view code_name(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kOverLimit: return "OVER_LIMIT";
    case Code::kUnknown: break;
  }
  return "UNKNOWN";
}

Service::Service(rules::Reloader& rules, std::shared_ptr<const Clock> clock, ServiceOptions options)
    : rules_(rules), clock_(std::move(clock)), options_(std::move(options)) {
  if (options_.remote && options_.remote->wants_breaker()) {
    breaker_ = std::make_unique<CircuitBreaker>(clock_, options_.breaker);
  }
}

struct Service::Job {
  CheckRequest request;
  CheckResponse resp;
  std::vector<Pending> pending;
  std::int64_t now = 0;
  bool charge = false;
  bool look = false;        // all_or_nothing: the limits were looked at before any was charged
  bool charge_all = false;  // all_or_nothing: false once a limit refused in the look
  bool looking = false;     // the pass in flight is all_or_nothing's look
  const rules::DomainConfig* domain = nullptr;
  rules::FailurePolicy policy = rules::FailurePolicy::kFailOpen;
  std::vector<Decision> looked;                      // all_or_nothing's look, per pending
  std::vector<rules::FailurePolicy> fell_back;       // per pending: the policy that decided, or kDefault
  std::vector<std::string> store_errors;             // per pending
  std::vector<std::size_t> asked;                    // the pass in flight's: the pending index of each limit asked
  std::vector<store::remote::RemoteResult> results;  // and the store's answers, in the same order
  std::vector<rules::Entry> entries;                 // a descriptor's, as the matcher takes them
  CheckDone done;

  // Whether pending k is charged in the final pass (after the look, if there was one).
  bool charged_in_final(std::size_t k) const {
    return charge && !pending[k].look_only && (charge_all || (!looked[k].allowed && !pending[k].shadow));
  }

  // Back to as made, the vectors' capacity kept: nothing of the last request stays (no rule set, limiter or
  // callback is held by a spare Job).
  void clear() noexcept {
    request = CheckRequest{};
    resp = CheckResponse{};
    pending.clear();
    now = 0;
    charge = look = charge_all = looking = false;
    domain = nullptr;
    policy = rules::FailurePolicy::kFailOpen;
    looked.clear();
    fell_back.clear();
    store_errors.clear();
    asked.clear();
    results.clear();
    entries.clear();
    done = nullptr;
  }
};

// The thread's spare Job. A Job holds nothing of a Service's once cleared, so the spare serves every Service on
// the thread.
std::unique_ptr<Service::Job>& Service::spare_job() {
  thread_local std::unique_ptr<Job> spare;
  return spare;
}

void Service::Recycle::operator()(Job* job) const noexcept {
  job->clear();
  std::unique_ptr<Job>& spare = spare_job();
  if (!spare) return spare.reset(job);
  delete job;  // the thread has a spare already (a Job begun on one thread, finished on the store's)
}

// The thread's spare if it has one; else a new Job. A decision made while another is finishing on the same thread
// (a callback that decides again) finds no spare and makes its own.
Service::JobPtr Service::take_job() {
  if (std::unique_ptr<Job>& spare = spare_job()) return JobPtr(spare.release());
  return JobPtr(new Job);
}

void Service::check_async(CheckRequest request, CheckDone done) {
  if (options_.tracer || options_.access_log) done = recorded(request, std::move(done));
  run(std::move(request), true, std::move(done));
}
void Service::dry_run_async(CheckRequest request, CheckDone done) { run(std::move(request), false, std::move(done)); }
CheckResult Service::check(const CheckRequest& request) {
  return wait_for<CheckResult>([&](CheckDone done) { check_async(request, std::move(done)); });
}
CheckResult Service::dry_run(const CheckRequest& request) {
  return wait_for<CheckResult>([&](CheckDone done) { dry_run_async(request, std::move(done)); });
}

bool Service::uses_remote(const rules::DomainConfig* domain) const {
  if (!options_.remote) return false;
  return domain && domain->store != rules::StoreKind::kMemory;  // an unknown domain has nothing to decide
}

bool Service::uses_batcher(const rules::DomainConfig* domain) const {
  return options_.batcher && uses_remote(domain) && domain->sharing == rules::Sharing::kBatched;
}

void Service::run(CheckRequest request, bool charge, CheckDone done) {
  if (auto e = validate(request)) return done(std::move(*e));
  JobPtr job = take_job();
  job->request = std::move(request);
  job->charge = job->charge_all = charge;
  job->done = std::move(done);
  const CheckRequest& req = job->request;
  CheckResponse& resp = job->resp;
  const bool given = job->request.rules != nullptr;
  resp.rules = given ? std::move(job->request.rules) : rules_.current();
  resp.statuses.resize(req.descriptors.size());
  job->now = clock_->now().count();
  const rules::RuleSet* set = resp.rules.get();
  const rules::DomainConfig* domain = given && req.domain_config ? req.domain_config
                                      : set                      ? set->domain(req.domain)
                                                                 : nullptr;
  job->domain = domain;
  job->policy = domain && domain->redis_failure != rules::FailurePolicy::kDefault ? domain->redis_failure
                                                                                  : options_.redis_failure;
  std::vector<Pending>& pending = job->pending;

  // 1. Match every descriptor to its limit.
  std::vector<rules::Entry>& entries = job->entries;
  for (std::size_t i = 0; i < req.descriptors.size(); ++i) {
    const CheckDescriptor& d = req.descriptors[i];
    DescriptorStatus& st = resp.statuses[i];
    const std::uint64_t hits = d.hits_addend ? *d.hits_addend : std::max<std::uint64_t>(1, req.hits_addend);
    st.hits = hits;
    if (!domain) continue;  // envoyproxy/ratelimit: an unknown domain has no limits, a request's own neither
    if (d.limit) {
      st.has_limit = true;
      st.name = "override";
      st.requests_per_unit = d.limit->requests_per_unit;
      st.unit = d.limit->unit;
      st.window = rules::unit_length(d.limit->unit);
      std::string key;
      rules::append_key_part(key, req.domain);
      for (const auto& [k, v] : d.entries) {
        rules::append_key_part(key, k);
        rules::append_key_part(key, v);
      }
      auto limiter = d.limit->requests_per_unit ? override_limiter(set, req.domain, d.limit->unit) : nullptr;
      pending.push_back({i, std::move(limiter), std::move(key), hits, false, override_prefix(d.limit->unit),
                         d.limit->requests_per_unit});
      continue;
    }
    entries.clear();
    for (const auto& [k, v] : d.entries) entries.push_back({k, v});
    rules::Match m = set->match(req.domain, entries);
    if (!m.rule) continue;
    if (m.rule->limit->concurrency) {
      // No release call comes through a check (nor through Envoy's gRPC API): a slot taken here would be held until
      // its lease expired. Refused rather than let through unlimited.
      CheckDone finish = std::move(job->done);
      return finish(RequestError{"descriptors[" + std::to_string(i) + "]",
                                 "matches '" + m.rule->name +
                                     "', a concurrency limit: acquire and release its "
                                     "leases at /v1/acquire and /v1/release (a check has no release)"});
    }
    st.rule = m.rule;
    if (m.rule->limit->unlimited) {
      st.unlimited = true;
      st.name = m.rule->name;
      st.limit_remaining = kUnlimitedRemaining;
      continue;
    }
    describe(st, *m.rule->limit, m.rule->name);
    pending.push_back({i, m.rule->limiter, std::move(m.counter_key), hits, m.rule->shadow_mode || options_.shadow_mode,
                       m.rule->store_prefix});
  }

  // 2. A limit named in another matched limit's `replaces` is dropped.
  std::set<std::string_view> replaced;
  for (const Pending& p : pending) {
    if (const rules::Rule* r = resp.statuses[p.index].rule)
      replaced.insert(r->limit->replaces.begin(), r->limit->replaces.end());
  }
  if (!replaced.empty()) {
    std::erase_if(pending, [&](const Pending& p) {
      const rules::Rule* r = resp.statuses[p.index].rule;
      if (!r || r->limit->name.empty() || !replaced.count(r->limit->name)) return false;
      DescriptorStatus& st = resp.statuses[p.index];
      st = DescriptorStatus{};
      st.rule = r;
      st.name = r->name;
      return true;
    });
  }
  // hits_addend 0 (Envoy's token-quota check) charges nothing and says whether the key is over its limit. Where
  // refused hits count, the algorithm answers cost 0 itself (past the limit: refused, as envoyproxy/ratelimit's
  // fixed window); elsewhere a debit that did not fit left no trace, so the look is "would one more be refused".
  for (Pending& p : pending) {
    if (p.hits == 0 && p.limiter && !core::counts_refused(p.limiter->spec())) {
      p.hits = 1;
      p.look_only = true;
    }
  }
  job->looked.resize(pending.size());
  job->fell_back.resize(pending.size(), rules::FailurePolicy::kDefault);
  job->store_errors.resize(pending.size());

  // 3. Decide. all_or_nothing: look first, and charge nothing but the refusing limits if any limit refuses.
  const bool look = job->look = charge && domain && domain->all_or_nothing && pending.size() > 1;
  decide(std::move(job), look);
}

// The domain's policy decides for a descriptor the store did not answer.
Decision Service::fallback(Job& job, std::size_t k, const store::remote::RemoteResult& r, bool looking) {
  const Pending& p = job.pending[k];
  job.fell_back[k] = job.policy;
  job.store_errors[k] = r.error;
  remote_stats_.fallbacks[static_cast<int>(job.policy)].fetch_add(1, std::memory_order_relaxed);
  const double limit = p.override_limit ? *p.override_limit : p.limiter->spec().limit;
  switch (job.policy) {
    case rules::FailurePolicy::kFailClosed:
      return Decision{.allowed = false,
                      .limit = limit,
                      .retry_after = options_.fail_closed_retry_after,
                      .reset_after = options_.fail_closed_retry_after};
    case rules::FailurePolicy::kLocal:
      if (looking || !job.charged_in_final(k)) return judged(p, p.limiter->peek_at(p.key, Nanos{job.now}, p.hits));
      return judged(p, p.limiter->check_at(p.key, Nanos{job.now}, p.hits));
    case rules::FailurePolicy::kFailOpen:
    case rules::FailurePolicy::kDefault: break;
  }
  return Decision{.allowed = true, .limit = limit};
}

// One pass over the job's limits: the look of all_or_nothing (`looking`), or the final one. Which limits it asks,
// what it makes of the answers and what follows are the same whichever store answers; only ask() differs.
void Service::decide(JobPtr job, bool looking) {
  job->looking = looking;
  job->asked.clear();
  for (std::size_t k = 0; k < job->pending.size(); ++k) {
    if (!job->pending[k].limiter) continue;
    if (!looking && job->look && !job->charged_in_final(k)) continue;  // the look's decision stands
    job->asked.push_back(k);
  }
  ask(std::move(job));
}

// The store's answers to a pass, in job->results: the look's kept for the final pass, or the final one's applied.
void Service::answered(JobPtr job) {
  const bool looking = job->looking;
  const std::vector<std::size_t>& asked = job->asked;
  job->results.resize(asked.size());  // a store answering short: the missing ones are unavailable
  for (std::size_t i = 0; i < asked.size(); ++i) {
    const std::size_t k = asked[i];
    const store::remote::RemoteResult& r = job->results[i];
    const Decision d = r.status == store::remote::RemoteResult::Status::kOk ? judged(job->pending[k], r.decision)
                                                                            : fallback(*job, k, r, looking);
    if (looking) {
      job->looked[k] = d;
      continue;
    }
    DescriptorStatus& st = job->resp.statuses[job->pending[k].index];
    apply(st, d);
    const auto fb = job->fell_back[k];
    st.charged = job->charged_in_final(k) && fb != rules::FailurePolicy::kFailOpen &&
                 fb != rules::FailurePolicy::kFailClosed;
  }
  if (looking) {
    bool refused = false;
    for (std::size_t k = 0; k < job->pending.size(); ++k) {
      const Pending& p = job->pending[k];
      refused |= !p.shadow && (!p.limiter || !job->looked[k].allowed);
    }
    job->charge_all = !refused;
    return decide(std::move(job), false);
  }
  for (std::size_t k = 0; k < job->pending.size(); ++k) {
    const Pending& p = job->pending[k];
    DescriptorStatus& st = job->resp.statuses[p.index];
    if (!p.limiter) {
      apply_blocked(st);
    } else if (job->look && !job->charged_in_final(k)) {
      apply(st, job->looked[k]);
    }
  }
  finish(std::move(job));
}

// The store's answers for the asked limits, in order: each charged (check) when the final pass charges it, else
// looked at (peek). The in-process store answers at once, on this thread; the remote one later, on its own, behind
// the circuit breaker. The Job waits for a later answer in a shared holder, so that a callback dropped unrun (it
// must not be) would still let it go.
void Service::ask(JobPtr job) {
  Job& j = *job;
  const std::vector<std::size_t>& asked = j.asked;
  const auto peeks = [&](std::size_t k) { return j.looking || !j.charged_in_final(k); };
  if (uses_batcher(j.domain)) return ask_batcher(std::move(job));
  if (!uses_remote(j.domain)) {
    j.results.assign(asked.size(), store::remote::RemoteResult{});
    if (asked.size() > 1) {
      ask_in_process(j.pending, asked, j.now, peeks, j.results);
      return answered(std::move(job));
    }
    for (std::size_t i = 0; i < asked.size(); ++i) {
      const Pending& p = j.pending[asked[i]];
      j.results[i].status = store::remote::RemoteResult::Status::kOk;
      j.results[i].decision = peeks(asked[i]) ? p.limiter->peek_at(p.key, Nanos{j.now}, p.hits)
                                              : p.limiter->check_at(p.key, Nanos{j.now}, p.hits);
    }
    return answered(std::move(job));
  }
  std::vector<store::remote::RemoteOp> ops;
  ops.reserve(asked.size());
  for (std::size_t k : asked) {
    const Pending& p = j.pending[k];
    ops.push_back({&p.limiter->spec(), remote_key(p), p.hits, peeks(k)});
  }
  const Nanos now{j.now};
  auto counted = [this,
                  held = std::make_shared<JobPtr>(std::move(job))](std::vector<store::remote::RemoteResult> results) {
    count_remote(results);
    (*held)->results = std::move(results);
    answered(std::move(*held));
  };
  if (ops.empty()) return counted({});
  if (breaker_ && !breaker_->allow()) {
    std::vector<store::remote::RemoteResult> open(ops.size());
    for (auto& r : open) r.error = "the circuit breaker is open: the store failed recently";
    return counted(std::move(open));
  }
  remote_stats_.calls.fetch_add(1, std::memory_order_relaxed);
  CircuitBreaker* breaker = breaker_.get();
  options_.remote->decide(std::move(ops), now,
                          [breaker, counted = std::move(counted)](std::vector<store::remote::RemoteResult> results) {
                            bool available = !results.empty();
                            for (const auto& r : results)
                              available &= r.status != store::remote::RemoteResult::Status::kUnavailable;
                            if (breaker) breaker->record(available);
                            counted(std::move(results));
                          });
}

// A batched domain: each key decided here by the batcher, at once (no allocation) or, for a key not yet joined,
// once its fetch is back.
void Service::ask_batcher(JobPtr job) {
  Job& j = *job;
  const std::vector<std::size_t>& asked = j.asked;
  j.results.assign(asked.size(), store::remote::RemoteResult{});
  std::vector<std::size_t> waiting;  // indexes into `asked` whose keys wait for a fetch
  thread_local std::string key;      // the store key, built in a buffer that keeps its capacity
  for (std::size_t i = 0; i < asked.size(); ++i) {
    const Pending& p = j.pending[asked[i]];
    const bool peek = j.looking || !j.charged_in_final(asked[i]);
    key.assign(p.store_prefix).append(p.key);
    if (options_.batcher->try_decide(p.limiter->spec(), key, p.hits, peek, Nanos{j.now}, j.results[i].decision)) {
      j.results[i].status = store::remote::RemoteResult::Status::kOk;
    } else {
      waiting.push_back(i);
    }
  }
  if (waiting.empty()) return answered(std::move(job));
  // Each fetch's answer fills its own result; the last one to come goes on with the job.
  struct Batch {
    JobPtr job;
    std::atomic<std::size_t> left;
  };
  auto batch = std::make_shared<Batch>();
  batch->job = std::move(job);
  batch->left = waiting.size() + 1;  // + 1: this loop's own, so that answers given at once cannot finish it early
  const auto one_done = [this, batch] {
    if (batch->left.fetch_sub(1, std::memory_order_acq_rel) == 1) answered(std::move(batch->job));
  };
  for (const std::size_t i : waiting) {
    const Pending& p = j.pending[asked[i]];
    const bool peek = j.looking || !j.charged_in_final(asked[i]);
    options_.batcher->decide(p.limiter->spec(), remote_key(p), p.hits, peek, Nanos{j.now},
                             [results = &j.results, i, one_done](Decision d) {
                               (*results)[i].status = store::remote::RemoteResult::Status::kOk;
                               (*results)[i].decision = d;
                               one_done();
                             });
  }
  one_done();
}

void Service::finish(JobPtr j) {
  Job& job = *j;
  CheckResponse& resp = job.resp;
  for (std::size_t k = 0; k < job.pending.size(); ++k) {
    DescriptorStatus& st = resp.statuses[job.pending[k].index];
    st.fallback = job.fell_back[k];
    st.store_error = std::move(job.store_errors[k]);
    if (st.code == Code::kOverLimit && job.pending[k].shadow) {
      st.code = Code::kOk;
      st.shadowed = true;
    }
  }

  if (options_.observer && job.charge) {
    for (const Pending& p : job.pending) {
      const DescriptorStatus& st = resp.statuses[p.index];
      if (st.rule && !p.look_only) options_.observer->observe(resp.rules, *st.rule, p.key, st, Nanos{job.now});
    }
  }

  // 4. Overall: over if any descriptor is; quota_mode descriptors only if all of them are.
  std::size_t quota = 0, quota_over = 0;
  bool over = false;
  for (const DescriptorStatus& st : resp.statuses) {
    const bool is_over = st.code == Code::kOverLimit;
    if (st.rule && st.rule->quota_mode) {
      ++quota;
      quota_over += is_over;
    } else {
      over |= is_over;
    }
  }
  resp.overall = over || (quota > 0 && quota_over == quota) ? Code::kOverLimit : Code::kOk;
  CheckDone done = std::move(job.done);
  CheckResponse out = std::move(resp);
  j.reset();  // the spare again, before `done` runs: a callback that decides again on this thread may take it
  done(std::move(out));
}

}  // namespace rk::service
