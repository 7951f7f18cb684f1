// The differential test: random limits and random traces, decided by every store, compared field
// by field with the memory store (rk::Limiter), which is the reference:
//   - shared:      rk::SharedLimiter in anonymous shared memory (it refuses sliding_log: that refusal is checked);
//   - capi:        rk_limiter_check_at / rk_limiter_peek_at;
//   - capi_shared: rk_shared_check_at / rk_shared_peek_at in a region the test provides;
//   - redis:       the Lua scripts in a real redis-server, through make_redis_remote with the caller's clock, run as
//                  functions (FCALL);
//   - redis_packed: the same, with the states packed into hashes (--redis-packed-hashes; docs/redis.md): a field
//                  of a hash, or the key's own key for a sliding log too long for a field; as a user whose ACL
//                  forbids functions, so run as EVAL scripts (EVALSHA), the form Redis before 7.0 gets.
// Half the cases also reserve and settle (rk::Limiter's reserve_at and settle_at; rk_limiter_reserve_at and
// rk_limiter_settle_at; RemoteStore::reserve and settle in Redis, packed or not): settles for less, as much and more
// than the estimate, of another key's reserve, twice, and after the ttl. The shared-memory stores hold no
// reservations: a key that was reserved on is no longer compared there.
// And on the memory store, for every check: a refusal with retry_after r is allowed at now + r (no attempt made
// meanwhile, refused or not) and, but for earrrl, refused at now + r - 1ns; and a clock stepped back never admits
// what the latest time the key has seen would refuse.
//
// Replay: RK_DIFF_SEED=<seed> RK_DIFF_CASES=1 rk_differential_tests prints that one case step by step
// (RK_DIFF_VERBOSE=1). RK_DIFF_CASES sets how many cases (seeds RK_DIFF_SEED, RK_DIFF_SEED + 1, ...).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/registry.h"
#include "library/random_id.h"
#include "differential/cases.h"
#include "ratekeeper/limiter.h"
#include "ratekeeper/ratekeeper.h"
#include "ratekeeper/shared.h"
#include "support/redis_process.h"
#include "store/redis/remote.h"

#ifndef RK_DIFF_DEFAULT_CASES
#define RK_DIFF_DEFAULT_CASES 2000
#endif

namespace rk::diff {
namespace {

constexpr std::int64_t kTwo53 = std::int64_t{1} << 53;  // 104 days in ns: beyond it a double skips nanoseconds
constexpr std::int64_t kTwo52 = std::int64_t{1} << 52;

using namespace std::chrono_literals;

enum class Store { kShared, kCApi, kCApiShared, kRedis, kRedisPacked };
constexpr Store kStores[] = {Store::kShared, Store::kCApi, Store::kCApiShared, Store::kRedis, Store::kRedisPacked};
constexpr const char* kStoreNames[] = {"shared", "capi", "capi_shared", "redis", "redis_packed"};
constexpr std::size_t kStoreCount = std::size(kStores);
bool is_redis(Store s) { return s == Store::kRedis || s == Store::kRedisPacked; }

// ---------------------------------------------------------------------------------------------------------------
// How far a store's decision may be from the memory store's, per field: THE ONE PLACE. Also in docs/redis.md
// ("Precision").
//   - shared, capi, capi_shared run the same src/core functions on the same state: every field equal, bit for bit.
//   - redis: the scripts keep times in doubles relative to the key's last write, so a duration is exact while it
//     is below 2^53 ns (104 days); past that it is the double nearest to it (durations_ulp: one ulp of a double,
//     2^(e-52)). earrrl's remaining and estimate come from exp() of the elapsed time and a subtraction
//     (n_saturate - N); Lua and C++ call the same libm, but the scripts keep times relative to the last write, so
//     the operands may differ in their last bit: value_ulps ulps of the larger operand. earrrl's retry_after and
//     reset_after are ceil(log(x) / lambda): x within value_ulps ulps moves them by value_ulps * eps / lambda ns,
//     and the 1 ns margin may fall either side (earrrl_ns).
//   allowed, limit and delay are always compared exactly (delay is integer gcra arithmetic in both).
struct Tolerance {
  int value_ulps = 0;          // remaining, estimate
  bool durations_ulp = false;  // retry_after, reset_after above 2^53 ns: one ulp of a double
  std::int64_t earrrl_ns = 0;  // earrrl retry_after, reset_after
};

Tolerance tolerance(Store store, Algorithm a) {
  if (!is_redis(store)) return {};
  return {.value_ulps = a == Algorithm::kEarrrl ? 16 : 0,
          .durations_ulp = true,
          .earrrl_ns = a == Algorithm::kEarrrl ? 1 : 0};
}
// ---------------------------------------------------------------------------------------------------------------

bool values_close(double a, double b, double scale, int ulps) {
  if (a == b) return true;
  return std::fabs(a - b) <=
         ulps * std::numeric_limits<double>::epsilon() * std::max({std::fabs(a), std::fabs(b), scale});
}

bool durations_close(Nanos a, Nanos b, const Tolerance& tol, std::int64_t extra_ns) {
  if (a == b) return true;
  if (a == kNever || b == kNever) return false;
  const std::int64_t big = std::max(a.count(), b.count());
  std::int64_t allowed = extra_ns;
  if (tol.durations_ulp && big >= (std::int64_t{1} << 53)) {
    allowed += static_cast<std::int64_t>(std::nextafter(static_cast<double>(big), 1e300) - static_cast<double>(big));
  }
  return std::llabs(a.count() - b.count()) <= allowed;
}

// The first field in which `got` differs from `want` beyond the tolerance, or "".
std::string differing_field(const LimitSpec& spec, const Decision& want, const Decision& got, const Tolerance& tol) {
  // earrrl's remaining is n_saturate - N: its rounding is that of n_saturate, the larger operand.
  const double n_saturate = spec.algorithm == Algorithm::kEarrrl
                                ? spec.limit / static_cast<double>(spec.window.count()) *
                                      static_cast<double>(spec.half_life->count()) / std::log(2.0)
                                : 0;
  std::int64_t extra = 0;
  if (spec.algorithm == Algorithm::kEarrrl && tol.earrrl_ns > 0) {
    const double lambda = std::log(2.0) / static_cast<double>(spec.half_life->count());
    extra = tol.earrrl_ns +
            static_cast<std::int64_t>(std::ceil(tol.value_ulps * std::numeric_limits<double>::epsilon() / lambda));
  }
  if (want.allowed != got.allowed) return "allowed";
  if (want.limit != got.limit) return "limit";
  if (!values_close(want.remaining, got.remaining, n_saturate, tol.value_ulps)) return "remaining";
  if (!durations_close(want.retry_after, got.retry_after, tol, extra)) return "retry_after";
  if (!durations_close(want.reset_after, got.reset_after, tol, extra)) return "reset_after";
  if (want.delay != got.delay) return "delay";
  if (want.estimate.has_value() != got.estimate.has_value()) return "estimate";
  if (want.estimate && !values_close(*want.estimate, *got.estimate, 0, tol.value_ulps)) return "estimate";
  return "";
}

// What one run found: a store that decided otherwise than the memory store, or a property the memory store broke.
struct Finding {
  std::string what;   // "redis", "shared", ..., or "property: <name>"
  std::string field;  // for a store: the first differing field, or "error"
  const Case* c = nullptr;
  int step = 0;
  bool went_back = false;  // the clock had stepped back on this key, at this step or before
  // A window or half-life, or the time since the key's last write, of 2^53 ns or more; or a sliding window whose
  // limit x window reaches 2^53 (docs/redis.md: where the scripts' doubles stop being exact).
  bool long_span = false;
  std::string report;  // everything needed to read and replay it
};

// ---------------------------------------------------------------------------------------------------------------
// Differences known today, each to be removed by a fix to come; the list empties as the fixes land: a class
// listed here that the run no longer meets fails the test, so the list can only shrink.
struct KnownDifference {
  const char* name;
  bool (*matches)(const Finding&);
};
bool is(const Finding& f, std::string_view what) { return f.what == what; }
[[maybe_unused]] bool fluid(const Finding& f) {
  return f.c->spec.algorithm == Algorithm::kTokenBucket || f.c->spec.algorithm == Algorithm::kLeakyBucket;
}
const std::vector<KnownDifference> kKnownDifferences = {
    // The documented precision bound of the scripts (docs/redis.md, "Precision"), not a fault to fix here: Lua's
    // numbers are doubles, exact to the nanosecond below 2^53 ns (104 days). Where a window, half-life, bucket or
    // burst, a state's life or the time since the key's last write reaches 2^52 ns, sums of them pass 2^53: the
    // scripts then skip a few nanoseconds (at most 4 at a year), so a duration may be a few ns off and a decision
    // within a few ns of a boundary may go the other way.
    {"redis: spans of 2^52 ns or more (a double's resolution)",
     [](const Finding& f) { return (is(f, "redis") || is(f, "redis_packed")) && f.long_span; }},
};
// ---------------------------------------------------------------------------------------------------------------

// What a finding is about, to group the findings of a run: the store or property, the field, the algorithm, and
// the features of the case that matter to the known differences.
std::string class_of(const Finding& f) {
  const LimitSpec& s = f.c->spec;
  std::string cls =
      f.what + (f.field.empty() ? "" : " / " + f.field) + " / " + std::string(algorithm_name(s.algorithm));
  if (s.align == Align::kCalendar) cls += " / calendar";
  if (s.window.count() % 1000 != 0) cls += " / window not whole us";
  if (f.long_span) cls += " / 2^52 ns or more";
  if (f.went_back) cls += " / clock went back";
  return cls;
}

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

Decision from_c(const rk_decision& d) {
  Decision out;
  out.allowed = d.allowed != 0;
  out.limit = d.limit;
  out.remaining = d.remaining;
  out.retry_after = Nanos{d.retry_after_ns};
  out.reset_after = Nanos{d.reset_after_ns};
  out.delay = Nanos{d.delay_ns};
  if (d.has_estimate) out.estimate = d.estimate;
  return out;
}

// The real redis-server and the remote store the service uses, with the caller's clock: unpacked, and packed into
// hashes (enough of them that none fills up here: a full hash's pruning is tests/store/redis/remote_packed_test.cc's).
// The scripts' two forms (src/store/redis/lua_script.h) are both compared: the unpacked store calls functions, the
// packed one, as a user who may not, EVAL scripts.
class Redis {
 public:
  Redis()
      : store_(store::redis::make_redis_remote({.url = process_.url(), .caller_clock = true, .timeout = 10s})),
        packed_(store::redis::make_redis_remote(
            {.url = no_functions_url(), .caller_clock = true, .timeout = 10s, .packed_hashes = 4096})) {}
  ~Redis() {
    store_->close();
    packed_->close();
  }
  store::remote::RemoteResult decide(const LimitSpec& spec, const std::string& key, Nanos now, std::uint64_t cost,
                                     bool peek, bool packed) {
    std::promise<store::remote::RemoteResult> p;
    auto f = p.get_future();
    (packed ? packed_ : store_)
        ->decide({{&spec, key, cost, peek}}, now,
                 [&p](std::vector<store::remote::RemoteResult> r) { p.set_value(std::move(r.at(0))); });
    return f.get();
  }
  store::remote::ReservationResult reserve(const LimitSpec& spec, const std::string& key, const std::string& id,
                                           std::uint64_t estimate, Nanos ttl, Nanos now, bool packed) {
    std::promise<store::remote::ReservationResult> p;
    auto f = p.get_future();
    (packed ? packed_ : store_)->reserve(&spec, key, id, estimate, ttl, now, [&p](auto r) {
      p.set_value(std::move(r));
    });
    return f.get();
  }
  store::remote::ReservationResult settle(const LimitSpec& spec, const std::string& key, const std::string& id,
                                          std::uint64_t actual, Nanos now, bool packed) {
    std::promise<store::remote::ReservationResult> p;
    auto f = p.get_future();
    (packed ? packed_ : store_)->settle(&spec, key, id, actual, now, [&p](auto r) { p.set_value(std::move(r)); });
    return f.get();
  }
  // How many times Redis ran `command` ("fcall", "evalsha").
  long calls(const std::string& command) { return redis_test::command_calls(process_.port(), command); }

 private:
  std::string no_functions_url() {
    EXPECT_EQ(redis_test::redis_cli(process_.port(),
                                    "ACL SETUSER nofn on '>pw' '~*' '&*' +@all -function -fcall "
                                    "-fcall_ro"),
              "OK");
    return "redis://nofn:pw@127.0.0.1:" + std::to_string(process_.port());
  }
  redis_test::RedisProcess process_;
  std::shared_ptr<store::remote::RemoteStore> store_, packed_;
};

// One case's stores, made from its spec. A store that cannot hold the spec is absent (and why is checked).
struct Stores {
  Limiter memory;
  std::optional<SharedLimiter> shared;
  std::string c_algorithm;
  rk_limiter* capi = nullptr;
  std::vector<std::uint64_t> region;
  rk_shared* capi_shared = nullptr;

  explicit Stores(const LimitSpec& spec) : memory(spec) {
    const SharedOptions so{.max_keys = 8, .max_key_bytes = 48, .shards = 1};
    static const std::string kNoLog =
        "algorithm: sliding_log cannot run in the shared memory store: sliding_log keeps a log per key that grows "
        "with its limit, and shared memory has fixed-size slots; use sliding_window";
    if (spec.algorithm == Algorithm::kSlidingLog) {
      try {
        SharedLimiter::anonymous(spec, so);
        ADD_FAILURE() << "the shared store took sliding_log";
      } catch (const InvalidArgument& e) {
        EXPECT_EQ(e.what(), kNoLog);
      }
    } else {
      shared.emplace(SharedLimiter::anonymous(spec, so));
    }
    // The C API's rk_spec has no alignment: calendar windows cannot be asked of it.
    if (spec.align == Align::kCalendar) return;
    rk_spec cs;
    rk_spec_init(&cs);
    c_algorithm = std::string(algorithm_name(spec.algorithm));
    cs.algorithm = c_algorithm.c_str();
    cs.limit = spec.limit;
    cs.window_ns = spec.window.count();
    if (spec.half_life) cs.half_life_ns = spec.half_life->count();
    if (spec.burst) cs.burst = *spec.burst;
    if (spec.capacity) cs.capacity = *spec.capacity;
    if (spec.count_refused) cs.count_refused = *spec.count_refused ? 1 : 0;
    // The C API's limiter holds as many reservations as keys: room for every reserve of a trace, as the memory
    // store has.
    cs.max_keys = 1024;
    cs.max_key_bytes = so.max_key_bytes;
    EXPECT_EQ(rk_limiter_new(&cs, &capi), RK_OK) << rk_last_error();
    cs.max_keys = so.max_keys;
    const std::size_t bytes = rk_shared_region_bytes(so.max_keys, so.max_key_bytes, so.shards);
    region.assign(bytes / 8 + 1, 0);
    const rk_status st = rk_shared_in_region(region.data(), bytes, 1, &cs, so.shards, &capi_shared);
    if (spec.algorithm == Algorithm::kSlidingLog) {
      EXPECT_EQ(st, RK_INVALID_ARGUMENT);
      EXPECT_EQ(rk_last_error(), kNoLog);
    } else {
      EXPECT_EQ(st, RK_OK) << rk_last_error();
    }
  }
  ~Stores() {
    rk_limiter_free(capi);
    rk_shared_free(capi_shared);
  }
  Stores(const Stores&) = delete;
  Stores& operator=(const Stores&) = delete;
};

struct Tally {
  std::map<std::string, int> cases_per_algorithm;
  long steps = 0, refused = 0, behind = 0, compared[kStoreCount] = {};
  long reserves = 0, settles = 0, settled = 0, overdrawn = 0;  // the memory store's
  int forgotten = 0;  // cases where Redis forgot a fresh state the clock then went back behind: not counted
  int redis_cut = 0;  // cases whose Redis difference may be Redis's wall clock expiring a key: not counted
  int forgotten_reservations = 0;  // cases where the memory store forgot an expired reservation a settle went back to
};

class Runner {
 public:
  Runner(Redis* redis, bool verbose) : redis_(redis), verbose_(verbose) {}
  std::vector<Finding> run(const Case& c, Tally& tally);

 private:
  Redis* redis_;
  bool verbose_;
};

// The report of a finding: the seed, the spec, the trace so far with the memory store's answers, both decisions.
std::string report(const Case& c, const std::vector<Step>& steps, const std::vector<Decision>& ref,
                   const std::string& headline, const std::string& details) {
  std::string r = headline + "\n  seed " + std::to_string(c.seed) + " (replay: RK_DIFF_SEED=" + std::to_string(c.seed) +
                  " RK_DIFF_CASES=1 RK_DIFF_VERBOSE=1)\n  spec " + describe(c.spec) +
                  "\n  trace (memory store's answers):\n";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    r += "    " + std::to_string(i) + ": " + describe(steps[i]) + (i < ref.size() ? " -> " + describe(ref[i]) : "") +
         "\n";
  }
  return r + details;
}

std::vector<Finding> Runner::run(const Case& c, Tally& tally) {
  std::vector<Finding> found;
  Stores stores(c.spec);
  TraceMaker maker(c);
  std::vector<Step> steps;
  std::vector<Decision> ref;
  std::vector<std::int64_t> latest(static_cast<std::size_t>(c.keys), std::numeric_limits<std::int64_t>::min());
  bool live[kStoreCount] = {stores.shared.has_value(), stores.capi != nullptr, stores.capi_shared != nullptr,
                            redis_ != nullptr, redis_ != nullptr};
  std::map<std::string, bool> property_seen;
  // Redis expires a key PX ms of its own wall time after the write; tracked to tell that apart from a difference.
  struct Written {
    std::chrono::steady_clock::time_point sent;
    std::int64_t px_ms = 0;
    std::int64_t fresh_at_ns = 0;
  };
  // Per Redis store (each writes at its own moment): [0] unpacked, [1] packed.
  const auto nkeys = static_cast<std::size_t>(c.keys);
  std::vector<std::optional<Written>> written_in[2] = {std::vector<std::optional<Written>>(nkeys),
                                                       std::vector<std::optional<Written>>(nkeys)};
  std::vector<char> maybe_expired_in[2] = {std::vector<char>(nkeys, 0), std::vector<char>(nkeys, 0)};
  // Whether the key's state was back to a fresh key's at the latest time it has seen: left so by a decision
  // (reset_after 0), or already so when a decision came (at or past the previous one's time + reset_after, which
  // Redis's TTL may have reached by its own clock: that decision's state then lacks what the old one held). Either
  // store may forget a fresh state (Redis at once, the memory store at a sweep), and an attempt timed before that
  // moment is decided as on a fresh key by the one that did: docs/algorithms.md, "A clock that goes backwards".
  std::vector<char> fresh_at_latest(static_cast<std::size_t>(c.keys), 0);
  // When the state the memory store holds for the key is a fresh key's: its latest write's time + reset_after.
  std::vector<std::int64_t> fresh_from(static_cast<std::size_t>(c.keys), std::numeric_limits<std::int64_t>::max());
  std::vector<char> forgotten(static_cast<std::size_t>(c.keys), 0);
  std::vector<std::int64_t> key_lives(static_cast<std::size_t>(c.keys), 0);
  std::vector<char> long_key(static_cast<std::size_t>(c.keys), 0);  // the longest reset_after it has had
  std::vector<char> went_back(static_cast<std::size_t>(c.keys), 0);
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> last_write(static_cast<std::size_t>(c.keys), kNone);
  // Every reserve step, with each store's id (refused: none); and the keys reserved on, which the shared stores skip.
  struct Held {
    std::uint64_t estimate = 0;
    std::int64_t expires_ns = 0;
    std::string id[kStoreCount + 1];  // per store; [kStoreCount]: the memory store's
  };
  std::vector<Held> held;
  std::optional<Decision> last_decided;
  std::vector<char> reserved_on(static_cast<std::size_t>(c.keys), 0);
  // The latest time a reserve or settle has seen: the memory store forgets a reservation it finds expired then (any
  // key's settle or reserve may), while Redis's record stays for its ttl on Redis's clock; a settle behind that time
  // may then find it in Redis alone.
  std::int64_t reservations_latest = std::numeric_limits<std::int64_t>::min();
  static const std::string kUnknownId(32, '0');
  ++tally.cases_per_algorithm[std::string(algorithm_name(c.spec.algorithm))];

  for (int i = 0; i < c.steps; ++i) {
    const Step s = maker.next(ref.empty() ? nullptr : &ref.back());
    steps.push_back(s);
    const std::string key = "k" + std::to_string(s.key);
    const Nanos now{s.t_ns};
    std::int64_t& last = latest[static_cast<std::size_t>(s.key)];
    const bool behind = last != std::numeric_limits<std::int64_t>::min() && s.t_ns < last;
    if (behind) went_back[static_cast<std::size_t>(s.key)] = 1;
    std::int64_t& written_at = last_write[static_cast<std::size_t>(s.key)];
    // Every span the scripts' doubles hold (docs/redis.md, "Precision"): the window or half-life, a bucket's or a
    // burst's length in time, the time since the key's last write, how long the key's state lives. From 2^52 ns
    // on, a sum of two of them can pass 2^53, where a double skips nanoseconds.
    const double per_request = static_cast<double>(c.spec.window.count()) / c.spec.limit;
    // With count_refused a debt of one limit more: a bucket a window longer (gcra.h, fluid.h).
    const double bucket = std::max(c.spec.capacity.value_or(c.spec.limit), c.spec.burst.value_or(0) + 1) * per_request +
                          (core::counts_refused(c.spec) ? static_cast<double>(c.spec.window.count()) : 0);
    // The latest decision's (a settle that found nothing decided nothing).
    const std::int64_t lives =
        !last_decided ? 0
                      : std::max(last_decided->reset_after.count(),
                                 last_decided->retry_after == kNever ? 0 : last_decided->retry_after.count());
    const bool long_span_now =
        std::max(c.spec.window, c.spec.half_life.value_or(Nanos{0})).count() >= kTwo52 || bucket >= 0x1p52 ||
        lives >= kTwo52 || key_lives[static_cast<std::size_t>(s.key)] >= kTwo52 ||
        (c.spec.algorithm == Algorithm::kSlidingWindow &&
         c.spec.limit * static_cast<double>(c.spec.window.count()) >= 0x1p53) ||
        (written_at != kNone && (s.t_ns - written_at >= kTwo52 || written_at - s.t_ns >= kTwo52));
    // A state written at such a step may carry the rounding into later ones.
    if (long_span_now) long_key[static_cast<std::size_t>(s.key)] = 1;
    const bool long_span = long_key[static_cast<std::size_t>(s.key)] != 0;
    const bool checking = s.op == Step::Op::kCheck;
    const std::optional<Decision> at_latest =
        behind && checking ? std::optional<Decision>(stores.memory.peek_at(key, Nanos{last}, s.cost)) : std::nullopt;
    Decision d;
    // A reserve's, or a settle's: which of the case's reserves, and what it settles for.
    Held* target = nullptr;
    std::uint64_t actual = 0;
    bool settled = false;
    switch (s.op) {
      case Step::Op::kCheck:
        d = s.peek ? stores.memory.peek_at(key, now, s.cost) : stores.memory.check_at(key, now, s.cost);
        break;
      case Step::Op::kReserve: {
        reserved_on[static_cast<std::size_t>(s.key)] = 1;
        ++tally.reserves;
        Reservation r = stores.memory.reserve_at(key, now, s.cost, Nanos{s.ttl_ns});
        d = r.decision;
        target = &held.emplace_back();
        target->estimate = s.cost;
        target->expires_ns = s.t_ns > std::numeric_limits<std::int64_t>::max() - s.ttl_ns
                                 ? std::numeric_limits<std::int64_t>::max()
                                 : s.t_ns + s.ttl_ns;
        target->id[kStoreCount] = std::move(r.id);
        break;
      }
      case Step::Op::kSettle: {
        if (s.reservation >= 0 && static_cast<std::size_t>(s.reservation) < held.size()) {
          target = &held[held.size() - 1 - static_cast<std::size_t>(s.reservation)];
        }
        const std::int64_t a = static_cast<std::int64_t>(target ? target->estimate : 0) + s.delta;
        actual = static_cast<std::uint64_t>(
            std::clamp<std::int64_t>(a, 0, static_cast<std::int64_t>(kMaxReservationAmount)));
        const std::string& id = target && !target->id[kStoreCount].empty() ? target->id[kStoreCount] : kUnknownId;
        const Settlement st = stores.memory.settle_at(key, id, now, actual);
        settled = st.settled;
        d = st.decision;
        ++tally.settles;
        tally.settled += settled;
        tally.overdrawn += settled && actual > target->estimate;
        break;
      }
    }
    const bool writes = !s.peek && (s.op != Step::Op::kSettle || settled);
    if (s.op != Step::Op::kSettle || settled) last_decided = d;
    // A settle behind a time at which the memory store may have forgotten its reservation, expired.
    const bool forgotten_reservation = s.op == Step::Op::kSettle && target && s.t_ns < target->expires_ns &&
                                       reservations_latest >= target->expires_ns;
    if (!checking) reservations_latest = std::max(reservations_latest, s.t_ns);
    if (writes) written_at = s.t_ns;
    ref.push_back(d);
    // Once a state was fresh at the latest time, a store may have forgotten it then; what it held can show again
    // only through a clock that goes back behind that moment, so from then on the key's differences are excused.
    std::int64_t& fresh = fresh_from[static_cast<std::size_t>(s.key)];
    if (behind && fresh_at_latest[static_cast<std::size_t>(s.key)]) forgotten[static_cast<std::size_t>(s.key)] = 1;
    // A refund may leave a fresh state behind the latest time too (a fixed window's count, back to 0).
    if (writes && (!behind || s.op == Step::Op::kSettle) && (d.reset_after == Nanos{0} || s.t_ns >= fresh)) {
      fresh_at_latest[static_cast<std::size_t>(s.key)] = 1;
    }
    if (writes) {
      fresh = d.reset_after <= Nanos{0} || s.t_ns > std::numeric_limits<std::int64_t>::max() - d.reset_after.count()
                  ? std::numeric_limits<std::int64_t>::max()
                  : s.t_ns + d.reset_after.count();
    }
    key_lives[static_cast<std::size_t>(s.key)] =
        std::max(key_lives[static_cast<std::size_t>(s.key)], d.reset_after.count());
    if (writes) last = std::max(last, s.t_ns);
    ++tally.steps;
    tally.refused += !d.allowed;
    tally.behind += behind;
    if (verbose_) std::cerr << i << ": " << describe(s) << " -> " << describe(d) << "\n";

    auto property = [&](const std::string& name, const std::string& details) {
      if (property_seen[name]) return;  // the first breach per case is enough to read
      property_seen[name] = true;
      found.push_back({"property: " + name, "", &c, i, went_back[static_cast<std::size_t>(s.key)] != 0, long_span,
                       report(c, steps, ref, "property: " + name, details)});
    };
    if (at_latest && !at_latest->allowed && d.allowed) {
      property("a clock stepped back admits what the latest time refuses",
               "  at the latest time " + std::to_string(last) + ": " + describe(*at_latest) + "\n");
    }
    if (checking && !d.allowed && d.retry_after != kNever) {
      const std::int64_t r = d.retry_after.count();
      if (r < 1) {
        property("refused with retry_after 0", "");
      } else if (s.t_ns <= std::numeric_limits<std::int64_t>::max() - r) {
        const Decision then = stores.memory.peek_at(key, now + d.retry_after, s.cost);
        if (!then.allowed) {
          property("refused at now + retry_after", "  at now + retry_after: " + describe(then) + "\n");
        }
        const Decision before = stores.memory.peek_at(key, now + d.retry_after - 1ns, s.cost);
        // With count_refused a peek answers for the check it stands for, which would have been owed: its wait is
        // that check's, a bound for the state the peek left (docs/algorithms.md, "Debts").
        const bool owed_peek = s.peek && core::counts_refused(c.spec);
        if (c.spec.algorithm != Algorithm::kEarrrl && !owed_peek && before.allowed) {
          property("allowed at now + retry_after - 1ns", "  at now + retry_after - 1ns: " + describe(before) + "\n");
        }
      }
    }

    for (Store store : kStores) {
      const auto k = static_cast<std::size_t>(store);
      if (!live[k]) continue;
      Decision got;
      std::string error;
      bool got_settled = false;
      const bool shared_memory = store == Store::kShared || store == Store::kCApiShared;
      // No reservations there: a key reserved on is no longer compared, nor are the steps that reserve or settle.
      if (shared_memory && (!checking || reserved_on[static_cast<std::size_t>(s.key)])) continue;
      // This store's id for the settle's target (none: an unknown id).
      const std::string& their_id = target && !target->id[k].empty() ? target->id[k] : kUnknownId;
      switch (store) {
        case Store::kShared:
          got = s.peek ? stores.shared->peek_at(key, now, s.cost) : stores.shared->check_at(key, now, s.cost);
          break;
        case Store::kCApi:
        case Store::kCApiShared: {
          rk_decision cd{};
          if (!checking) {
            rk_status st;
            if (s.op == Step::Op::kReserve) {
              char id[RK_RESERVATION_ID_SIZE] = {};
              st = rk_limiter_reserve_at(stores.capi, key.data(), key.size(), s.t_ns, s.cost, s.ttl_ns, id, &cd);
              target->id[k] = id;
            } else {
              int done = 0;
              st = rk_limiter_settle_at(stores.capi, key.data(), key.size(), s.t_ns, their_id.c_str(), actual, &done,
                                        &cd);
              got_settled = done != 0;
            }
            if (st != RK_OK) error = std::string("status ") + std::to_string(st) + ": " + rk_last_error();
            got = from_c(cd);
            break;
          }
          const rk_status st =
              store == Store::kCApi
                  ? (s.peek ? rk_limiter_peek_at(stores.capi, key.data(), key.size(), s.t_ns, s.cost, &cd)
                            : rk_limiter_check_at(stores.capi, key.data(), key.size(), s.t_ns, s.cost, &cd))
                  : (s.peek ? rk_shared_peek_at(stores.capi_shared, key.data(), key.size(), s.t_ns, s.cost, &cd)
                            : rk_shared_check_at(stores.capi_shared, key.data(), key.size(), s.t_ns, s.cost, &cd));
          if (st != RK_OK) error = std::string("status ") + std::to_string(st) + ": " + rk_last_error();
          got = from_c(cd);
          break;
        }
        case Store::kRedis:
        case Store::kRedisPacked: {
          const bool packed = store == Store::kRedisPacked;
          auto& written = written_in[packed];
          auto& maybe_expired = maybe_expired_in[packed];
          auto& w = written[static_cast<std::size_t>(s.key)];
          const std::string rkey = "rk:diff:" + std::to_string(c.seed) + ":" + key;
          const auto sent = std::chrono::steady_clock::now();
          store::remote::RemoteResult r;
          if (s.op == Step::Op::kCheck) {
            r = redis_->decide(c.spec, rkey, now, s.cost, s.peek, packed);
          } else {
            // Each store's own id, as a client would hold it: a fresh one for each reserve.
            const std::string id = s.op == Step::Op::kReserve ? library::random_id() : their_id;
            const store::remote::ReservationResult rr =
                s.op == Step::Op::kReserve ? redis_->reserve(c.spec, rkey, id, s.cost, Nanos{s.ttl_ns}, now, packed)
                                           : redis_->settle(c.spec, rkey, id, actual, now, packed);
            if (s.op == Step::Op::kReserve && rr.done) target->id[k] = id;
            r = {rr.status, rr.decision, rr.error};
            got_settled = rr.done && s.op == Step::Op::kSettle;
          }
          const auto got_at = std::chrono::steady_clock::now();
          // Redis expires a key px ms after the write by its own clock, which does not follow the trace's: when
          // that may have come before the trace reached the state's reset, a difference on this key is the test's.
          if (w && s.t_ns < w->fresh_at_ns && got_at - w->sent >= std::chrono::milliseconds(w->px_ms)) {
            maybe_expired[static_cast<std::size_t>(s.key)] = true;
          }
          if (r.status != store::remote::RemoteResult::Status::kOk) {
            error = std::string(r.status == store::remote::RemoteResult::Status::kError ? "error: " : "unavailable: ") +
                    r.error;
          }
          got = r.decision;
          if (error.empty() && writes) {
            if (got.reset_after > Nanos{0}) {
              w = Written{
                  sent,
                  std::max<std::int64_t>(
                      1, (std::min<std::int64_t>(got.reset_after.count(), 9'200'000'000'000'000'000) + 999'999) /
                             1'000'000),
                  s.t_ns > std::numeric_limits<std::int64_t>::max() - got.reset_after.count()
                      ? std::numeric_limits<std::int64_t>::max()
                      : s.t_ns + got.reset_after.count()};
            } else {
              w.reset();
            }
          }
          break;
        }
      }
      ++tally.compared[k];
      std::string field = !error.empty()                                        ? "error"
                          : s.op == Step::Op::kSettle && got_settled != settled ? "settled"
                          : s.op == Step::Op::kSettle && !settled
                              ? ""
                              : differing_field(c.spec, d, got, tolerance(store, c.spec.algorithm));
      if (field.empty()) continue;
      live[k] = false;  // the states part here: later steps would only repeat this difference
      if (is_redis(store) && maybe_expired_in[store == Store::kRedisPacked][static_cast<std::size_t>(s.key)]) {
        ++tally.redis_cut;
        continue;
      }
      if (is_redis(store) && forgotten_reservation) {
        ++tally.forgotten_reservations;
        continue;
      }
      if (is_redis(store) && forgotten[static_cast<std::size_t>(s.key)]) {
        ++tally.forgotten;
        continue;
      }
      const std::string name = kStoreNames[k];
      found.push_back(
          {name, field, &c, i, went_back[static_cast<std::size_t>(s.key)] != 0, long_span,
           report(c, steps, ref, name + " differs from memory in " + field + " at step " + std::to_string(i),
                  "  memory: " + describe(d) + "\n  " + name + ": " + (error.empty() ? describe(got) : error) + "\n")});
    }
  }
  return found;
}

TEST(Differential, EveryStoreDecidesAsTheMemoryStoreAndTheMemoryStoreKeepsItsPromises) {
  const std::uint64_t first = env_u64("RK_DIFF_SEED", 1);
  const std::uint64_t cases = env_u64("RK_DIFF_CASES", RK_DIFF_DEFAULT_CASES);
  const bool verbose = env_u64("RK_DIFF_VERBOSE", 0) != 0;
  Redis redis;
  Runner runner(&redis, verbose);
  Tally tally;
  std::map<std::string, std::vector<Finding>> unknown;  // by class: what + field
  std::map<std::string, std::vector<Finding>> known;    // by known difference
  std::vector<Case> kept;                               // findings point into these
  kept.reserve(cases);
  const auto started = std::chrono::steady_clock::now();
  for (std::uint64_t n = 0; n < cases; ++n) {
    kept.push_back(make_case(first + n));
    for (Finding& f : runner.run(kept.back(), tally)) {
      const KnownDifference* k = nullptr;
      for (const auto& kd : kKnownDifferences) {
        if (kd.matches(f)) {
          k = &kd;  // the first that matches: the list goes from the most to the least specific
          break;
        }
      }
      const std::string cls = class_of(f);
      (k ? known[k->name] : unknown[cls]).push_back(std::move(f));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::cerr << cases << " cases from seed " << first << " in " << seconds << " s: " << tally.steps << " steps, "
            << tally.refused << " refused, " << tally.behind << " behind the key's latest time, " << tally.reserves
            << " reserves, " << tally.settles << " settles (" << tally.settled << " settled, " << tally.overdrawn
            << " of them for more); compared:";
  for (Store s : kStores)
    std::cerr << " " << kStoreNames[static_cast<int>(s)] << " " << tally.compared[static_cast<int>(s)];
  std::cerr << "; Redis comparisons cut short by its wall clock: " << tally.redis_cut
            << " cases, by a fresh state forgotten before the clock went back: " << tally.forgotten
            << " cases, by an expired reservation forgotten before the clock went back: "
            << tally.forgotten_reservations << " cases\n";
  for (const auto& [alg, n] : tally.cases_per_algorithm) std::cerr << "  " << alg << ": " << n << " cases\n";
  for (const auto& [name, fs] : known) {
    std::cerr << "known difference \"" << name << "\": " << fs.size() << " cases, e.g.\n" << fs.front().report;
  }
  for (const auto& [cls, fs] : unknown) {
    ADD_FAILURE() << cls << ": " << fs.size() << " cases; the first:\n" << fs.front().report;
  }
  for (const auto& kd : kKnownDifferences) {
    if (!known.count(kd.name)) std::cerr << "known difference \"" << kd.name << "\" not met in this run: fixed?\n";
  }
  // The comparison must not be vacuous: every algorithm met, refusals and clocks stepped back, Redis compared.
  if (cases >= 200) {
    EXPECT_EQ(tally.cases_per_algorithm.size(), std::size(kAllAlgorithms));
    EXPECT_GT(tally.refused, tally.steps / 20);
    EXPECT_GT(tally.behind, tally.steps / 100);
    EXPECT_GT(tally.settled, tally.steps / 200);
    EXPECT_GT(tally.overdrawn, tally.settled / 10);
    // A difference on a key Redis may have expired by its own clock is not counted; while the scripts still differ
    // (kKnownDifferences) many are, so the bound is loose; what must hold is that Redis was really compared.
    EXPECT_LT(tally.redis_cut, static_cast<int>(cases / 4)) << "the machine is too slow for Redis's 1 ms expiry";
    EXPECT_GT(tally.compared[static_cast<int>(Store::kRedis)], tally.steps / 3);
    EXPECT_GT(tally.compared[static_cast<int>(Store::kRedisPacked)], tally.steps / 3);
    EXPECT_GT(redis.calls("fcall"), tally.steps / 3);
    EXPECT_GT(redis.calls("evalsha"), tally.steps / 3);
  }
}

}  // namespace
}  // namespace rk::diff
