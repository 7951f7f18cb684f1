// The service over a real redis-server (the plain Debian binary on a free loopback port) against the same service
// in memory: for every algorithm, the same trace on the same manual clock (`--redis-clock local`) gives the same
// decisions. Then the failure policies against a Redis that is killed, and the breaker that spares the timeouts.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "store/redis/remote.h"
#include "store/remote/remote_store.h"
#include "service/service.h"
#include "support/redis_process.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

struct Env {
  std::filesystem::path dir;
  std::unique_ptr<rules::Reloader> reloader;
  std::unique_ptr<Service> service;
};

class RemoteService : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& e : envs_) {
      e->service.reset();
      std::filesystem::remove_all(e->dir);
    }
    if (remote_) remote_->close();
  }

  Service& make(const std::string& rules, std::shared_ptr<store::remote::RemoteStore> remote,
                std::optional<rules::FailurePolicy> policy = {}) {
    auto e = std::make_unique<Env>();
    e->dir = std::filesystem::temp_directory_path() /
             ("rk-remote-" + std::to_string(::getpid()) + "-" + std::to_string(envs_.size()));
    std::filesystem::create_directories(e->dir);
    std::ofstream(e->dir / "r.yaml") << rules;
    e->reloader = std::make_unique<rules::Reloader>(e->dir.string(), rules::BuildOptions{.clock = clock_});
    EXPECT_TRUE(e->reloader->load_now().empty());
    ServiceOptions o{.remote = std::move(remote)};
    if (policy) o.redis_failure = *policy;
    o.breaker = {.failures_to_open = 3, .open_for = 1s, .max_open_for = 1s};
    e->service = std::make_unique<Service>(*e->reloader, clock_, o);
    envs_.push_back(std::move(e));
    return *envs_.back()->service;
  }

  std::shared_ptr<store::remote::RemoteStore> remote(const std::string& url, Nanos timeout = 200ms) {
    remote_ = store::redis::make_redis_remote({.url = url, .caller_clock = true, .timeout = timeout});
    return remote_;
  }

  static CheckRequest req(const std::string& value, std::uint64_t hits = 1, const std::string& domain = "d") {
    CheckRequest r;
    r.domain = domain;
    r.descriptors.push_back({.entries = {{"k", value}}, .hits_addend = hits});
    return r;
  }
  static DescriptorStatus status(const CheckResult& r) {
    if (auto* e = std::get_if<RequestError>(&r)) {
      ADD_FAILURE() << e->field << ": " << e->message;
      return {};
    }
    return std::get<CheckResponse>(r).statuses.at(0);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'123'456'789});
  std::shared_ptr<store::remote::RemoteStore> remote_;
  std::vector<std::unique_ptr<Env>> envs_;
};

const char* kRuleFor[] = {
    "{unit: second, requests_per_unit: 5, algorithm: earrrl, half_life: 2s}",
    "{unit: second, requests_per_unit: 5, algorithm: gcra, burst: 3}",
    "{unit: second, requests_per_unit: 5, algorithm: token_bucket, capacity: 8}",
    "{unit: second, requests_per_unit: 5, algorithm: leaky_bucket}",
    "{unit: second, requests_per_unit: 5, algorithm: leaky_queue, burst: 4}",
    "{unit: second, requests_per_unit: 5, algorithm: fixed_window}",
    "{unit: second, requests_per_unit: 5, algorithm: sliding_log}",
    "{unit: second, requests_per_unit: 5, algorithm: sliding_window}",
};

TEST_F(RemoteService, EveryAlgorithmDecidesInRedisAsInMemory) {
  RedisProcess redis;
  auto store = remote(redis.url());
  for (std::size_t a = 0; a < std::size(kRuleFor); ++a) {
    const std::string rules = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + std::string(kRuleFor[a]) + "\n";
    Service& memory = make(rules, nullptr);
    Service& shared = make(rules, store);
    std::mt19937_64 rng(42 + a);
    int refused = 0;
    for (int i = 0; i < 400; ++i) {
      const auto gap = std::uniform_int_distribution<std::int64_t>(0, 19)(rng) == 0
                           ? std::uniform_int_distribution<std::int64_t>(0, 3'000'000'000)(rng)
                           : std::uniform_int_distribution<std::int64_t>(0, 50'000'000)(rng);
      clock_->advance(Nanos{gap});
      const std::string value = "user" + std::to_string(rng() % 3);
      const std::uint64_t hits = rng() % 10 == 0 ? rng() % 4 : 1;  // sometimes 0, sometimes several
      const DescriptorStatus m = status(memory.check(req(value, hits)));
      const DescriptorStatus r = status(shared.check(req(value, hits)));
      ASSERT_EQ(r.fallback, rules::FailurePolicy::kDefault) << r.store_error;
      ASSERT_EQ(m.code, r.code) << kRuleFor[a] << " at step " << i;
      ASSERT_EQ(m.limit_remaining, r.limit_remaining) << kRuleFor[a] << " at step " << i;
      ASSERT_NEAR(static_cast<double>(m.duration_until_reset.count()),
                  static_cast<double>(r.duration_until_reset.count()), 1000.0)
          << kRuleFor[a] << " at step " << i;
      refused += m.code == Code::kOverLimit;
    }
    EXPECT_GT(refused, 10) << kRuleFor[a] << ": the trace must reach the limit to compare refusals";
  }
}

// Calendar quotas and windows that are not whole microseconds used to fail open in Redis, on every decision. Now the
// scripts find the same windows (UTC, from the pairs of microseconds and nanoseconds): the same answers, to the
// nanosecond, across month ends, a leap day, week and year boundaries.
TEST_F(RemoteService, CalendarQuotasAndOddWindowsLimitInRedisExactlyAsInMemory) {
  RedisProcess redis;
  auto store = remote(redis.url());
  const char* rules_for[] = {
      "{unit: month, requests_per_unit: 3, algorithm: fixed_window, align: calendar}",
      "{unit: week, requests_per_unit: 3, algorithm: fixed_window, align: calendar, count_refused: false}",
      "{unit: year, requests_per_unit: 3, algorithm: fixed_window, align: calendar}",
      "{window: 1000000001ns, requests_per_unit: 2, algorithm: fixed_window}",
      "{window: 1000000001ns, requests_per_unit: 2, algorithm: sliding_window}",
      "{window: 1000000001ns, requests_per_unit: 2, algorithm: sliding_log}",
      "{window: 3h, requests_per_unit: 2, algorithm: sliding_window}",
  };
  const std::int64_t kDay = 86'400'000'000'000;
  const std::int64_t jan_30_2024 = 19'752 * kDay;  // a Tuesday; 2024 is a leap year
  for (const char* rule : rules_for) {
    const std::string rules = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + std::string(rule) + "\n";
    Service& memory = make(rules, nullptr);
    Service& shared = make(rules, store);
    const bool long_windows = std::string(rule).find("ns") == std::string::npos;
    // Redis expires a key by its own clock, after reset_after: the manual clock must run well ahead of the real one.
    const std::int64_t step = long_windows ? kDay / 2 : 130'000'000;
    clock_->set(Nanos{jan_30_2024 - 5});
    std::mt19937_64 rng(11);
    int refused = 0;
    for (int i = 0; i < 800; ++i) {
      // Often the last or first nanoseconds of a window, where an off-by-one shows.
      clock_->advance(Nanos{rng() % 4 == 0 ? 1 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(step))});
      const DescriptorStatus m = status(memory.check(req("q")));
      const DescriptorStatus r = status(shared.check(req("q")));
      ASSERT_EQ(r.fallback, rules::FailurePolicy::kDefault) << rule << ": " << r.store_error;
      ASSERT_TRUE(r.store_error.empty()) << rule << ": " << r.store_error;
      ASSERT_EQ(m.code, r.code) << rule << " at step " << i;
      ASSERT_EQ(m.limit_remaining, r.limit_remaining) << rule << " at step " << i;
      ASSERT_EQ(m.duration_until_reset, r.duration_until_reset) << rule << " at step " << i;
      ASSERT_EQ(m.retry_after, r.retry_after) << rule << " at step " << i;
      refused += m.code == Code::kOverLimit;
    }
    EXPECT_GT(refused, 50) << rule << ": the trace must reach the limit to compare refusals";
  }
}

TEST_F(RemoteService, AllOrNothingChargesNothingWhenOneLimitRefuses) {
  RedisProcess redis;
  Service& s = make(R"(
domain: d
all_or_nothing: true
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 5}
)",
                    remote(redis.url()));
  auto both = [] {
    CheckRequest r;
    r.domain = "d";
    r.descriptors.push_back({.entries = {{"a", "x"}}});
    r.descriptors.push_back({.entries = {{"b", "x"}}});
    return r;
  };
  auto first = std::get<CheckResponse>(s.check(both()));
  EXPECT_EQ(first.overall, Code::kOk);
  auto second = std::get<CheckResponse>(s.check(both()));
  EXPECT_EQ(second.overall, Code::kOverLimit);
  EXPECT_EQ(second.statuses[1].limit_remaining, 3u);  // b was looked at (what a charge would leave), not charged
  EXPECT_FALSE(second.statuses[1].charged);
}

TEST_F(RemoteService, PoliciesDecideWhenRedisIsDeadAndTheBreakerSparesTheTimeouts) {
  RedisProcess redis;
  const std::string rule =
      "descriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}\n";
  auto store = remote(redis.url(), 300ms);
  Service& open = make("domain: d\n" + rule, store, rules::FailurePolicy::kFailOpen);
  Service& closed = make("domain: d\nredis_failure: fail_closed\n" + rule, store);
  Service& local = make("domain: d\nredis_failure: local\n" + rule, store);
  ASSERT_EQ(status(open.check(req("u"))).fallback, rules::FailurePolicy::kDefault);
  redis.kill();

  for (int i = 0; i < 3; ++i) {
    const auto o = status(open.check(req("u")));
    EXPECT_EQ(o.code, Code::kOk);
    EXPECT_EQ(o.fallback, rules::FailurePolicy::kFailOpen);
    EXPECT_FALSE(o.store_error.empty());
    const auto c = status(closed.check(req("u")));
    EXPECT_EQ(c.code, Code::kOverLimit);
    EXPECT_EQ(c.fallback, rules::FailurePolicy::kFailClosed);
    EXPECT_EQ(c.retry_after, Nanos(1s));
    const auto l = status(local.check(req("u")));
    EXPECT_EQ(l.fallback, rules::FailurePolicy::kLocal);
    EXPECT_EQ(l.code, i < 2 ? Code::kOk : Code::kOverLimit) << i;  // the in-process limit of 2
  }
  // Three unanswered batches opened each service's breaker: the next decisions do not try Redis at all.
  EXPECT_EQ(open.breaker()->state(), CircuitBreaker::State::kOpen);
  const auto calls = open.remote_stats().calls.load();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(status(open.check(req("u"))).fallback, rules::FailurePolicy::kFailOpen);
  EXPECT_EQ(open.remote_stats().calls.load(), calls);

  redis.start();        // back, and empty
  clock_->advance(1s);  // the breaker's wait: the next decision probes
  bool back = false;
  for (int i = 0; i < 500 && !back; ++i) {  // the client reconnects to a real process: poll, bounded
    back = status(open.check(req("v"))).fallback == rules::FailurePolicy::kDefault;
    if (!back) {
      std::this_thread::sleep_for(10ms);
      clock_->advance(1s);
    }
  }
  EXPECT_TRUE(back);
  EXPECT_EQ(open.breaker()->state(), CircuitBreaker::State::kClosed);
}

// Scripts Redis has run: each decision is one, by FCALL, or by EVAL before the function is loaded.
long script_calls(const std::string& url) {
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  long calls = 0;
  for (const std::string command : {"fcall", "evalsha", "eval"}) calls += redis_test::command_calls(port, command);
  return calls;
}

// redis-cli's answer to one command, trimmed.
std::string cli(const std::string& url, const std::string& args) {
  return redis_test::redis_cli(std::stoi(url.substr(url.rfind(':') + 1)), args);
}

store::remote::RemoteResult decide_one(store::remote::RemoteStore& remote, const LimitSpec& spec,
                                       const std::string& key, Nanos now) {
  std::promise<store::remote::RemoteResult> p;
  auto f = p.get_future();
  remote.decide({{&spec, key, 1, false}}, now,
                [&p](std::vector<store::remote::RemoteResult> r) { p.set_value(r.at(0)); });
  return f.get();
}

// Issue 17: every fixed-size state is at most 28 bytes (one 48-byte allocation in Redis with its object), a
// one-entry sliding log too, and a fixed window on whole seconds an integer; a state in the MessagePack layout of
// before is read once as a fresh key; a value that is not ratekeeper's is refused and left as it is.
TEST_F(RemoteService, StatesAreCompactAndAnOlderLayoutIsReadOnceAsFresh) {
  RedisProcess redis;
  auto store = remote(redis.url());
  const Nanos now = clock_->now();
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec spec{.algorithm = a, .limit = 10, .window = 60s};  // every state lives for seconds
    if (a == Algorithm::kEarrrl) spec.half_life = 10s;
    const std::string key = "rk:size:" + std::string(algorithm_name(a));
    ASSERT_EQ(decide_one(*store, spec, key, now).status, store::remote::RemoteResult::Status::kOk) << algorithm_name(a);
    const std::string length = cli(redis.url(), "STRLEN '" + store::redis::redis_key(key) + "'");
    EXPECT_LE(std::stoi(length), 28) << algorithm_name(a);
    EXPECT_GE(std::stoi(length), 9) << algorithm_name(a);
  }
  // A fixed window that starts on a whole second is an integer to Redis (held in its object: 16 bytes less), one
  // that does not is the binary state; both read back.
  const std::string minute = store::redis::redis_key("rk:size:fixed_window");
  EXPECT_EQ(cli(redis.url(), "OBJECT ENCODING '" + minute + "'"), "int");
  const LimitSpec odd{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 1500ms + Nanos(1)};
  for (int i = 0; i < 2; ++i) {
    auto d = decide_one(*store, odd, "rk:odd", now);
    ASSERT_EQ(d.status, store::remote::RemoteResult::Status::kOk) << d.error;
    EXPECT_EQ(d.decision.remaining, 9 - i);
  }
  EXPECT_EQ(cli(redis.url(), "OBJECT ENCODING '" + store::redis::redis_key("rk:odd") + "'"), "embstr");
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(decide_one(*store, LimitSpec{.algorithm = Algorithm::kFixedWindow, .limit = 10, .window = 60s},
                         "rk:size:fixed_window", now)
                  .decision.remaining,
              8 - i);

  // A full fixed window as the layout before issue 17 wrote it: {tag, base_us, start_us, start_r, count}.
  const LimitSpec two{.algorithm = Algorithm::kFixedWindow, .limit = 2, .window = 3600s};
  const std::string key = store::redis::redis_key("rk:old");
  const std::int64_t us = now.count() / 1000;
  const std::string start = std::to_string(us - us % 3'600'000'000);
  ASSERT_EQ(cli(redis.url(), "EVAL \"redis.call('SET', KEYS[1], cmsgpack.pack({'fixed_window.2', " +
                                 std::to_string(us) + ", " + start + ", 0, 2}), 'PX', 3600000)\" 1 '" + key + "'"),
            "");
  auto fresh = decide_one(*store, two, "rk:old", now);
  ASSERT_EQ(fresh.status, store::remote::RemoteResult::Status::kOk) << fresh.error;
  EXPECT_TRUE(fresh.decision.allowed);
  EXPECT_EQ(fresh.decision.remaining, 1);                                   // counted from nothing, not from the old 2
  EXPECT_EQ(decide_one(*store, two, "rk:old", now).decision.remaining, 0);  // and from then on in the new layout
  EXPECT_FALSE(decide_one(*store, two, "rk:old", now).decision.allowed);

  // Some other algorithm's old state, and a value that is nobody's state: refused, left as they were.
  for (const std::string value :
       {"\"redis.call('SET', KEYS[1], cmsgpack.pack({'gcra', 1, 2}))\"", "\"redis.call('SET', KEYS[1], 'hello')\""}) {
    ASSERT_EQ(cli(redis.url(), "EVAL " + value + " 1 '" + store::redis::redis_key("rk:foreign") + "'"), "");
    const std::string before = cli(redis.url(), "GET '" + store::redis::redis_key("rk:foreign") + "'");
    auto r = decide_one(*store, two, "rk:foreign", now);
    EXPECT_EQ(r.status, store::remote::RemoteResult::Status::kError) << value;
    EXPECT_NE(r.error.find("holds something other than fixed_window state"), std::string::npos) << r.error;
    EXPECT_EQ(cli(redis.url(), "GET '" + store::redis::redis_key("rk:foreign") + "'"), before);
  }
}

// By Redis's clock, a fixed window counted again within its window is added to its digits in place (INCRBY): the
// count goes on from the stored one, the value stays an integer, the TTL the first write gave is kept, and a
// decision that counts nothing (cost 0, or refused) leaves the value as it was.
TEST_F(RemoteService, AFixedWindowCountedAgainInItsWindowByRedisClockKeepsItsDigitsAndTtl) {
  RedisProcess redis;
  auto store = store::redis::make_redis_remote({.url = redis.url(), .timeout = 500ms});
  // 30 days: the window's end (a multiple of 30 days since the epoch) is not crossed while the test runs.
  const LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 5, .window = 720h};
  const std::string key = store::redis::redis_key("rk:incr");
  const Nanos now = clock_->now();  // not read: Redis's clock decides
  auto first = decide_one(*store, spec, "rk:incr", now);
  ASSERT_EQ(first.status, store::remote::RemoteResult::Status::kOk) << first.error;
  EXPECT_EQ(first.decision.remaining, 4);
  const long ttl = std::stol(cli(redis.url(), "PTTL '" + key + "'"));
  const std::string one = cli(redis.url(), "GET '" + key + "'");
  ASSERT_EQ(one.size(), 18u);
  EXPECT_EQ(one.substr(1, 7), "0000001");
  std::promise<store::remote::RemoteResult> p;
  store->decide({{&spec, "rk:incr", 0, false}}, now,
                [&p](std::vector<store::remote::RemoteResult> v) { p.set_value(v.at(0)); });
  EXPECT_EQ(p.get_future().get().decision.remaining, 4);  // cost 0: nothing counted, nothing written
  EXPECT_EQ(cli(redis.url(), "GET '" + key + "'"), one);
  for (int i = 3; i >= 0; --i) EXPECT_EQ(decide_one(*store, spec, "rk:incr", now).decision.remaining, i);
  const auto refused = decide_one(*store, spec, "rk:incr", now);
  EXPECT_FALSE(refused.decision.allowed);
  EXPECT_GT(refused.decision.retry_after, 0s);
  EXPECT_EQ(refused.decision.retry_after, refused.decision.reset_after);  // the window's end
  const std::string five = cli(redis.url(), "GET '" + key + "'");
  EXPECT_EQ(five.substr(1, 7), "0000005");
  EXPECT_EQ(five.substr(8), one.substr(8));  // the same window's start
  EXPECT_EQ(cli(redis.url(), "OBJECT ENCODING '" + key + "'"), "int");
  EXPECT_LE(std::stol(cli(redis.url(), "PTTL '" + key + "'")), ttl);  // kept, not given again
  EXPECT_GT(std::stol(cli(redis.url(), "PTTL '" + key + "'")), 0);
  store->close();
}

TEST_F(RemoteService, TheNearCacheRefusesLocallyAndStillCountsTheRefusedHits) {
  RedisProcess redis;
  const std::string rules =
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5, "
      "algorithm: earrrl, half_life: 2s}\n";
  auto near_store = store::redis::make_redis_remote(
      {.url = redis.url(), .caller_clock = true, .timeout = 500ms, .near_cache = true, .near_cache_flush = 1h});
  Service& near = make(rules, near_store);
  Service& plain = make(rules, remote(redis.url(), 500ms));
  long near_calls = 0, plain_calls = 0;
  int differ = 0;
  for (int i = 0; i < 100; ++i) {  // 50 attempts a second against 5: mostly refused
    clock_->advance(20ms);
    long before = script_calls(redis.url());
    const auto n = status(near.check(req("near")));
    near_calls += script_calls(redis.url()) - before;
    before = script_calls(redis.url());
    const auto p = status(plain.check(req("plain")));
    plain_calls += script_calls(redis.url()) - before;
    // The near cache can only refuse more: its batched hits count a little more than the exact ones.
    if (n.code != p.code) {
      ++differ;
      EXPECT_EQ(n.code, Code::kOverLimit) << "attempt " << i;
    }
  }
  EXPECT_LE(differ, 2);
  EXPECT_EQ(plain_calls, 100);
  EXPECT_LT(near_calls, 40) << "the near cache must spare most round trips to Redis";
  near_store->flush();
  for (int i = 0; i < 200 && script_calls(redis.url()) < 100 + near_calls + 1; ++i) std::this_thread::sleep_for(5ms);
  // The refused hits reached Redis, batched at the last one's time: the estimate is at least the exact one, and
  // over by no more than the decay the batching skipped (under 1 s of a 2 s half-life).
  const auto n = status(near.dry_run(req("near")));
  const auto p = status(plain.dry_run(req("plain")));
  ASSERT_TRUE(n.estimate && p.estimate);
  EXPECT_GE(*n.estimate, *p.estimate * 0.999);
  EXPECT_LE(*n.estimate, *p.estimate * 1.42);
  near_store->close();
}

// Envoy's token-quota pattern (envoyproxy/ratelimit's integration-test/scripts/token-quota.sh): a check with
// hits_addend 0, then a debit of 1 for each request let through. Every algorithm answers it in Redis, with and
// without the near cache, as in memory: the zero-cost check charges nothing and refuses once the key is exhausted.
TEST_F(RemoteService, TheTokenQuotaCheckAnswersInRedisAndTheNearCacheAsInMemory) {
  RedisProcess redis;
  auto plain_store = remote(redis.url(), 500ms);
  auto near_store = store::redis::make_redis_remote(
      {.url = redis.url(), .caller_clock = true, .timeout = 500ms, .near_cache = true, .near_cache_flush = 1h});
  for (std::size_t a = 0; a < std::size(kRuleFor); ++a) {
    const std::string rules = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + std::string(kRuleFor[a]) + "\n";
    Service* services[] = {&make(rules, nullptr), &make(rules, plain_store), &make(rules, near_store)};
    const std::string kKeys[] = {"memory", "plain", "near"};
    int refused = 0;
    for (int i = 0; i < 60; ++i) {
      clock_->advance(37ms);
      Code codes[3];
      for (int s = 0; s < 3; ++s) {
        const std::string key = kKeys[s] + std::to_string(a);  // the two Redis services share one Redis
        const DescriptorStatus look = status(services[s]->check(req(key, 0)));
        ASSERT_EQ(look.fallback, rules::FailurePolicy::kDefault) << look.store_error;
        codes[s] = look.code;
        if (look.code == Code::kOk) status(services[s]->check(req(key, 1)));  // the debit when the stream is done
      }
      ASSERT_EQ(codes[0], codes[1]) << kRuleFor[a] << " at step " << i << ": Redis";
      ASSERT_EQ(codes[0], codes[2]) << kRuleFor[a] << " at step " << i << ": Redis with the near cache";
      refused += codes[0] == Code::kOverLimit;
    }
    EXPECT_GT(refused, 5) << kRuleFor[a] << ": 27 checks a second against 5 must be refused at times";
  }
  near_store->close();
}

}  // namespace
}  // namespace rk::service
