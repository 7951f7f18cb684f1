// The C API against the C++ Limiter it wraps: the same decisions, every bad argument refused with a message and no
// state changed, no exception escaping.
#include "ratekeeper/ratekeeper.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ratekeeper/limiter.h"

namespace rk {
namespace {

using namespace std::chrono_literals;

struct Handle {
  rk_limiter* p = nullptr;
  ~Handle() { rk_limiter_free(p); }
};

rk_spec spec_for(const char* algorithm, double limit) {
  rk_spec s;
  rk_spec_init(&s);
  s.algorithm = algorithm;
  s.limit = limit;
  return s;
}

rk_status make(const rk_spec& s, Handle& h) { return rk_limiter_new(&s, &h.p); }

TEST(CApi, SpecInitLeavesOptionalParametersUnset) {
  rk_spec s;
  rk_spec_init(&s);
  EXPECT_STREQ(s.algorithm, "earrrl");
  EXPECT_EQ(s.window_ns, 1'000'000'000);
  EXPECT_EQ(s.half_life_ns, -1);
  EXPECT_TRUE(std::isnan(s.burst));
  EXPECT_TRUE(std::isnan(s.capacity));
  EXPECT_EQ(s.count_refused, -1);
  EXPECT_EQ(s.max_keys, 1'000'000u);
  EXPECT_EQ(s.max_key_bytes, 4096u);
  EXPECT_STREQ(rk_version(), RK_PROJECT_VERSION);
}

// Every algorithm, through both APIs, on one random trace: every field of every decision equal.
TEST(CApi, DecidesExactlyAsTheCppLimiterForEveryAlgorithm) {
  for (Algorithm a : kAllAlgorithms) {
    const std::string name(algorithm_name(a));
    SCOPED_TRACE(name);
    rk_spec s = spec_for(name.c_str(), 5);
    LimitSpec cpp{.algorithm = a, .limit = 5};
    if (a == Algorithm::kEarrrl) {
      s.half_life_ns = 2'000'000'000;
      cpp.half_life = 2s;
    }
    if (a == Algorithm::kGcra || a == Algorithm::kLeakyQueue) {
      s.burst = 3;
      cpp.burst = 3;
    }
    Handle h;
    ASSERT_EQ(make(s, h), RK_OK) << rk_last_error();
    Limiter reference(cpp);
    std::mt19937_64 rng(7);
    std::int64_t now = 1'000'000'000;
    for (int i = 0; i < 500; ++i) {
      now += static_cast<std::int64_t>(rng() % 400'000'000);
      const std::string key = "k" + std::to_string(rng() % 3);
      const std::uint64_t cost = rng() % 3;
      rk_decision d;
      ASSERT_EQ(rk_limiter_check_at(h.p, key.data(), key.size(), now, cost, &d), RK_OK);
      const Decision r = reference.check_at(key, Nanos{now}, cost);
      ASSERT_EQ(d.allowed, r.allowed ? 1 : 0) << i;
      ASSERT_EQ(d.limit, r.limit);
      ASSERT_EQ(d.remaining, r.remaining);
      ASSERT_EQ(d.retry_after_ns, r.retry_after.count());
      ASSERT_EQ(d.reset_after_ns, r.reset_after.count());
      ASSERT_EQ(d.delay_ns, r.delay.count());
      ASSERT_EQ(d.has_estimate, r.estimate.has_value() ? 1 : 0);
      if (r.estimate) {
        ASSERT_EQ(d.estimate, *r.estimate);
      }
    }
  }
}

TEST(CApi, TheSeedsFigureThroughC) {
  rk_spec s = spec_for("earrrl", 0.5);
  s.half_life_ns = 10'000'000'000;
  Handle h;
  ASSERT_EQ(make(s, h), RK_OK);
  int first_refused = 0;
  rk_decision d{};
  for (int i = 0; i <= 20 && !first_refused; ++i) {  // the seed's request #i at t = i s
    ASSERT_EQ(rk_limiter_check_at(h.p, "u", 1, std::int64_t{i} * 1'000'000'000, 1, &d), RK_OK);
    if (!d.allowed) first_refused = i;
  }
  EXPECT_EQ(first_refused, 11);
  EXPECT_NEAR(d.estimate, 0.515, 0.001);
}

TEST(CApi, EachBadSpecIsRefusedNamingTheParameter) {
  struct Case {
    rk_spec spec;
    const char* says;
  };
  rk_spec earrrl_no_half_life = spec_for("earrrl", 1);
  rk_spec unknown = spec_for("magic", 1);
  rk_spec negative = spec_for("gcra", -1);
  rk_spec nan_limit = spec_for("gcra", NAN);
  rk_spec zero_window = spec_for("fixed_window", 1);
  zero_window.window_ns = 0;
  rk_spec count_refused = spec_for("fixed_window", 1);
  count_refused.count_refused = 2;
  rk_spec no_keys = spec_for("gcra", 1);
  no_keys.max_keys = 0;
  rk_spec no_key_bytes = spec_for("gcra", 1);
  no_key_bytes.max_key_bytes = 0;
  rk_spec burst_on_bucket = spec_for("token_bucket", 1);
  burst_on_bucket.burst = 2;
  rk_spec null_algorithm = spec_for("gcra", 1);
  null_algorithm.algorithm = nullptr;
  for (const Case& c :
       {Case{earrrl_no_half_life, "half_life"}, Case{unknown, "algorithm: 'magic'"}, Case{negative, "limit"},
        Case{nan_limit, "limit"}, Case{zero_window, "window"}, Case{count_refused, "count_refused: 2"},
        Case{no_keys, "max_keys"}, Case{no_key_bytes, "max_key_bytes"}, Case{burst_on_bucket, "burst"},
        Case{null_algorithm, "algorithm is NULL"}}) {
    SCOPED_TRACE(c.says);
    rk_limiter* out = reinterpret_cast<rk_limiter*>(0x1);  // overwritten with NULL on failure
    EXPECT_EQ(rk_limiter_new(&c.spec, &out), RK_INVALID_ARGUMENT);
    EXPECT_EQ(out, nullptr);
    EXPECT_NE(std::string(rk_last_error()).find(c.says), std::string::npos) << rk_last_error();
  }
  rk_spec good = spec_for("gcra", 1);
  EXPECT_EQ(rk_limiter_new(nullptr, nullptr), RK_INVALID_ARGUMENT);
  rk_limiter* out = nullptr;
  EXPECT_EQ(rk_limiter_new(nullptr, &out), RK_INVALID_ARGUMENT);
  EXPECT_STREQ(rk_last_error(), "spec is NULL");
  EXPECT_EQ(rk_limiter_new(&good, nullptr), RK_INVALID_ARGUMENT);
}

TEST(CApi, BadCallsAreRefusedAndChangeNothing) {
  rk_spec s = spec_for("fixed_window", 2);
  s.max_key_bytes = 64;
  Handle h;
  ASSERT_EQ(make(s, h), RK_OK);
  rk_decision d;
  ASSERT_EQ(rk_limiter_check_at(h.p, "k", 1, 0, 1, &d), RK_OK);
  const std::string huge(65, 'x');
  EXPECT_EQ(rk_limiter_check_at(h.p, huge.data(), huge.size(), 0, 1, &d), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("65 bytes"), std::string::npos) << rk_last_error();
  EXPECT_EQ(rk_limiter_check_at(h.p, nullptr, 3, 0, 1, &d), RK_INVALID_ARGUMENT);
  EXPECT_STREQ(rk_last_error(), "key is NULL but key_len is 3");
  EXPECT_EQ(rk_limiter_check_at(h.p, "k", 1, 0, 1, nullptr), RK_INVALID_ARGUMENT);
  EXPECT_EQ(rk_limiter_check_at(nullptr, "k", 1, 0, 1, &d), RK_INVALID_ARGUMENT);
  EXPECT_STREQ(rk_last_error(), "limiter is NULL");
  EXPECT_EQ(rk_limiter_peek(nullptr, "k", 1, 1, &d), RK_INVALID_ARGUMENT);
  EXPECT_EQ(rk_limiter_reset(nullptr, "k", 1, nullptr), RK_INVALID_ARGUMENT);
  EXPECT_EQ(rk_limiter_stats(h.p, nullptr), RK_INVALID_ARGUMENT);
  rk_stats st;
  ASSERT_EQ(rk_limiter_stats(h.p, &st), RK_OK);
  EXPECT_EQ(st.keys, 1u);  // only "k": nothing above was recorded
  ASSERT_EQ(rk_limiter_peek_at(h.p, "k", 1, 0, 1, &d), RK_OK);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);  // one of two spent: the refused calls spent nothing
  // The empty key is a key like any other, and NULL with length 0 is the empty key.
  EXPECT_EQ(rk_limiter_check_at(h.p, nullptr, 0, 0, 1, &d), RK_OK);
  EXPECT_EQ(rk_limiter_check_at(h.p, "", 0, 0, 1, &d), RK_OK);
  EXPECT_EQ(rk_limiter_check_at(h.p, "", 0, 0, 1, &d), RK_OK);
  EXPECT_FALSE(d.allowed);
  rk_limiter_free(nullptr);  // fine
}

TEST(CApi, NeverPeekResetSweepAndStats) {
  rk_spec s = spec_for("token_bucket", 1);
  s.capacity = 3;
  Handle h;
  ASSERT_EQ(make(s, h), RK_OK);
  rk_decision d;
  ASSERT_EQ(rk_limiter_check_at(h.p, "k", 1, 0, 4, &d), RK_OK);  // more than the bucket holds: never
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ns, RK_NEVER);
  ASSERT_EQ(rk_limiter_peek_at(h.p, "p", 1, 0, 1, &d), RK_OK);
  rk_stats st;
  ASSERT_EQ(rk_limiter_stats(h.p, &st), RK_OK);
  EXPECT_EQ(st.keys, 1u);  // "k", refused but tracked; the peek left nothing
  ASSERT_EQ(rk_limiter_check_at(h.p, "k", 1, 0, 2, &d), RK_OK);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.reset_after_ns, 2'000'000'000);
  int tracked = -1;
  ASSERT_EQ(rk_limiter_reset(h.p, "k", 1, &tracked), RK_OK);
  EXPECT_EQ(tracked, 1);
  ASSERT_EQ(rk_limiter_reset(h.p, "k", 1, &tracked), RK_OK);
  EXPECT_EQ(tracked, 0);
  ASSERT_EQ(rk_limiter_check_at(h.p, "k", 1, 0, 3, &d), RK_OK);
  uint64_t forgotten = 99;
  ASSERT_EQ(rk_limiter_sweep_at(h.p, 2'900'000'000, &forgotten), RK_OK);
  EXPECT_EQ(forgotten, 0u);  // not yet refilled
  ASSERT_EQ(rk_limiter_sweep_at(h.p, 3'000'000'000, &forgotten), RK_OK);
  EXPECT_EQ(forgotten, 1u);
  ASSERT_EQ(rk_limiter_stats(h.p, &st), RK_OK);
  EXPECT_EQ(st.keys, 0u);
  EXPECT_EQ(st.forgotten, 1u);
}

TEST(CApi, TheLastErrorBelongsToTheThread) {
  rk_spec bad = spec_for("gcra", -1);
  rk_limiter* out = nullptr;
  ASSERT_EQ(rk_limiter_new(&bad, &out), RK_INVALID_ARGUMENT);
  const std::string mine = rk_last_error();
  std::thread([] {
    rk_limiter* o = nullptr;
    EXPECT_EQ(rk_limiter_new(nullptr, &o), RK_INVALID_ARGUMENT);
    EXPECT_STREQ(rk_last_error(), "spec is NULL");
  }).join();
  EXPECT_EQ(rk_last_error(), mine);
}

TEST(CApi, ManyThreadsShareOneLimiterExactly) {
  rk_spec s = spec_for("fixed_window", 1000);
  s.window_ns = 3'600'000'000'000;
  Handle h;
  ASSERT_EQ(make(s, h), RK_OK);
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      rk_decision d;
      for (int i = 0; i < 10'000; ++i) {
        if (rk_limiter_check_at(h.p, "one", 3, 0, 1, &d) == RK_OK && d.allowed) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1000);
}

TEST(CApi, SpecCheckNamesTheProblemAndMakesNothing) {
  rk_spec s = spec_for("gcra", 10);
  EXPECT_EQ(rk_spec_check(&s), RK_OK);
  s.burst = -2;
  EXPECT_EQ(rk_spec_check(&s), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("burst"), std::string::npos) << rk_last_error();
  EXPECT_EQ(rk_spec_check(nullptr), RK_INVALID_ARGUMENT);
}

// The shared-memory store through C, in memory the caller provides, as the nginx module uses it.
TEST(CApi, SharedRegionFormattedOnceAndAttachedByAnother) {
  rk_spec s = spec_for("fixed_window", 3);
  s.max_keys = 100;
  s.max_key_bytes = 16;
  const size_t bytes = rk_shared_region_bytes(100, 16, 4);
  ASSERT_GT(bytes, 0u);
  EXPECT_GE(rk_shared_keys_that_fit(bytes, 16, 4), 100u);
  EXPECT_EQ(rk_shared_region_bytes(0, 16, 4), 0u);  // nonsense sizes: 0, never a crash
  std::vector<std::uint64_t> memory(bytes / 8 + 1);
  rk_shared* first = nullptr;
  rk_shared* second = nullptr;
  ASSERT_EQ(rk_shared_in_region(memory.data(), bytes, 1, &s, 4, &first), RK_OK) << rk_last_error();
  ASSERT_EQ(rk_shared_in_region(memory.data(), bytes, 0, &s, 4, &second), RK_OK) << rk_last_error();
  rk_decision d;
  ASSERT_EQ(rk_shared_check_at(first, "ip", 2, 0, 2, &d), RK_OK);
  EXPECT_TRUE(d.allowed);
  ASSERT_EQ(rk_shared_check_at(second, "ip", 2, 0, 1, &d), RK_OK);
  EXPECT_TRUE(d.allowed);
  ASSERT_EQ(rk_shared_peek_at(second, "ip", 2, 0, 1, &d), RK_OK);
  EXPECT_FALSE(d.allowed);
  ASSERT_EQ(rk_shared_check_at(first, std::string(17, 'k').data(), 17, 0, 1, &d), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("17 bytes"), std::string::npos) << rk_last_error();
  rk_stats st;
  ASSERT_EQ(rk_shared_stats(first, &st), RK_OK);
  EXPECT_EQ(st.keys, 1u);
  EXPECT_EQ(st.memory_bytes, bytes);
  rk_spec other = s;
  other.limit = 4;
  rk_shared* third = nullptr;
  EXPECT_EQ(rk_shared_in_region(memory.data(), bytes, 0, &other, 4, &third), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("a different limit"), std::string::npos) << rk_last_error();
  EXPECT_EQ(third, nullptr);
  rk_spec log = spec_for("sliding_log", 3);
  EXPECT_EQ(rk_shared_in_region(memory.data(), bytes, 1, &log, 4, &third), RK_INVALID_ARGUMENT);
  rk_shared_free(second);
  rk_shared_free(first);
}

// The header fields through C are the C++ formatter's, byte for byte, from a real decision (the nginx module's
// path): gcra 5 a minute with burst 4, refused after 5, said as q=5 (its rate), not burst + 1.
TEST(CApi, FormatHeadersGivesTheOneFormattersFields) {
  rk_spec s = spec_for("gcra", 5);
  s.window_ns = 60'000'000'000;
  s.burst = 4;
  Handle h;
  ASSERT_EQ(make(s, h), RK_OK) << rk_last_error();
  rk_header_limit l{"login", 5, s.limit, s.window_ns, {}};
  for (int i = 0; i < 6; ++i) ASSERT_EQ(rk_limiter_check_at(h.p, "k", 1, 0, 1, &l.decision), RK_OK);
  ASSERT_FALSE(l.decision.allowed);
  std::vector<char> buf(rk_headers_bytes(&l, 1));
  rk_header_field fields[RK_HEADER_FIELDS_MAX];
  size_t n = 0;
  ASSERT_EQ(rk_format_headers(&l, 1, buf.data(), buf.size(), fields, &n), RK_OK) << rk_last_error();
  std::vector<std::pair<std::string, std::string>> got;
  for (size_t i = 0; i < n; ++i) got.emplace_back(fields[i].name, std::string(fields[i].value, fields[i].value_len));
  const std::vector<std::pair<std::string, std::string>> expected = {{"RateLimit-Policy", R"("login";q=5;w=60)"},
                                                                     {"RateLimit", R"("login";r=0;t=12)"},
                                                                     {"X-RateLimit-Limit", "5"},
                                                                     {"X-RateLimit-Remaining", "0"},
                                                                     {"X-RateLimit-Reset", "12"},
                                                                     {"Retry-After", "12"}};
  EXPECT_EQ(got, expected);

  // A dry run passes the refusal on as allowed: the fields without Retry-After.
  l.decision.allowed = 1;
  ASSERT_EQ(rk_format_headers(&l, 1, buf.data(), buf.size(), fields, &n), RK_OK);
  EXPECT_EQ(n, 5u);
  // No limits, no fields.
  ASSERT_EQ(rk_format_headers(nullptr, 0, nullptr, 0, fields, &n), RK_OK);
  EXPECT_EQ(n, 0u);
}

TEST(CApi, FormatHeadersRefusesBadArgumentsWithAMessage) {
  rk_header_limit l{"a-long-policy-name", 18, 10, 1'000'000'000, {}};
  l.decision.allowed = 1;
  rk_header_field fields[RK_HEADER_FIELDS_MAX];
  size_t n = 99;
  char small[16];
  EXPECT_EQ(rk_format_headers(&l, 1, small, sizeof small, fields, &n), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("buf_len: 16 bytes"), std::string::npos) << rk_last_error();
  EXPECT_EQ(rk_format_headers(nullptr, 1, small, sizeof small, fields, &n), RK_INVALID_ARGUMENT);
  EXPECT_EQ(rk_format_headers(&l, 1, small, sizeof small, nullptr, &n), RK_INVALID_ARGUMENT);
  rk_header_limit unnamed{nullptr, 3, 10, 1'000'000'000, {}};
  EXPECT_EQ(rk_format_headers(&unnamed, 1, small, sizeof small, fields, &n), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("limits[0].name is NULL"), std::string::npos) << rk_last_error();
  // The bound holds for the worst name: every byte escaped, the longest numbers.
  std::string worst(300, '"');
  rk_header_limit w[2] = {{worst.data(), worst.size(), 1e300, INT64_MAX, {}}, {"b", 1, 1e-300, 1, {}}};
  w[0].decision.remaining = 1e300;
  w[0].decision.retry_after_ns = INT64_MAX;
  w[0].decision.reset_after_ns = INT64_MAX;
  std::vector<char> buf(rk_headers_bytes(w, 2));
  EXPECT_EQ(rk_format_headers(w, 2, buf.data(), buf.size(), fields, &n), RK_OK) << rk_last_error();
  EXPECT_EQ(n, 6u);
}

// SipHash-2-4-128; expected digests computed apart, by OpenSSL 3's SIPHASH MAC with size:16.
TEST(CApi, KeyDigestIsSipHash128) {
  const uint8_t seed[RK_KEY_DIGEST_BYTES] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  auto hex = [&](const std::string& key) {
    uint8_t out[RK_KEY_DIGEST_BYTES];
    EXPECT_EQ(rk_key_digest(seed, key.data(), key.size(), out), RK_OK) << rk_last_error();
    std::string s;
    for (uint8_t b : out) s += "0123456789ABCDEF"[b >> 4], s += "0123456789ABCDEF"[b & 15];
    return s;
  };
  std::string counting;
  for (char c = 0; c < 63; ++c) counting += c;
  EXPECT_EQ(hex(""), "A3817F04BA25A8E66DF67214C7550293");
  EXPECT_EQ(hex(counting.substr(0, 15)), "5493E99933B0A8117E08EC0F97CFC3D9");
  EXPECT_EQ(hex(counting), "5150D1772F50834A503E069A973FBD7C");
  EXPECT_EQ(hex(std::string(200, 'k')), "9C8D7660471032540C55D727419A9593");
  uint8_t out[RK_KEY_DIGEST_BYTES];
  EXPECT_EQ(rk_key_digest(seed, nullptr, 3, out), RK_INVALID_ARGUMENT);
  EXPECT_EQ(rk_key_digest(nullptr, "k", 1, out), RK_INVALID_ARGUMENT);
  uint8_t a[RK_KEY_DIGEST_BYTES], b[RK_KEY_DIGEST_BYTES];
  ASSERT_EQ(rk_key_digest_seed(a), RK_OK);
  ASSERT_EQ(rk_key_digest_seed(b), RK_OK);
  EXPECT_NE(std::memcmp(a, b, sizeof a), 0);  // random: equal once in 2^128
  EXPECT_EQ(rk_key_digest_seed(nullptr), RK_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace rk

namespace rk {
namespace {

TEST(CApiConcurrency, AcquiresReleasesAndExpiresLeases) {
  rk_concurrency* c = nullptr;
  ASSERT_EQ(rk_concurrency_new(1, 5'000'000'000, &c), RK_OK);
  char id[RK_LEASE_ID_SIZE];
  int acquired = 0;
  int64_t retry = 0;
  ASSERT_EQ(rk_concurrency_acquire_at(c, "k", 1, 100, id, &acquired, &retry), RK_OK);
  ASSERT_EQ(acquired, 1);
  EXPECT_EQ(std::strlen(id), 32u);
  char other[RK_LEASE_ID_SIZE];
  ASSERT_EQ(rk_concurrency_acquire_at(c, "k", 1, 200, other, &acquired, &retry), RK_OK);
  EXPECT_EQ(acquired, 0);
  EXPECT_EQ(retry, 5'000'000'000 + 100 - 200);
  int released = 1;
  EXPECT_EQ(rk_concurrency_release_at(c, "k", 1, "0123456789abcdef0123456789abcdef", 300, &released), RK_OK);
  EXPECT_EQ(released, 0);
  uint32_t n = 0;
  ASSERT_EQ(rk_concurrency_in_flight(c, "k", 1, &n), RK_OK);
  ASSERT_EQ(rk_concurrency_release_at(c, "k", 1, id, 300, &released), RK_OK);
  EXPECT_EQ(released, 1);
  ASSERT_EQ(rk_concurrency_acquire_at(c, "k", 1, 400, id, &acquired, nullptr), RK_OK);
  EXPECT_EQ(acquired, 1);
  // Expired: the slot is free again after the TTL, and the old id releases nothing.
  ASSERT_EQ(rk_concurrency_acquire_at(c, "k", 1, 400 + 5'000'000'000, other, &acquired, nullptr), RK_OK);
  EXPECT_EQ(acquired, 1);
  ASSERT_EQ(rk_concurrency_release_at(c, "k", 1, id, 400 + 5'000'000'000, &released), RK_OK);
  EXPECT_EQ(released, 0);
  rk_concurrency_free(c);
}

TEST(CApiConcurrency, BadArgumentsAreRefusedByName) {
  rk_concurrency* c = nullptr;
  EXPECT_EQ(rk_concurrency_new(0, 0, &c), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("max_in_flight"), std::string::npos);
  EXPECT_EQ(rk_concurrency_new(1, -5, &c), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("lease_ttl"), std::string::npos);
  EXPECT_EQ(c, nullptr);
  ASSERT_EQ(rk_concurrency_new(1, 0, &c), RK_OK);
  int acquired = 0;
  EXPECT_EQ(rk_concurrency_acquire(c, "k", 1, nullptr, &acquired, nullptr), RK_INVALID_ARGUMENT);
  uint32_t n = 7;
  ASSERT_EQ(rk_concurrency_in_flight(c, "k", 1, &n), RK_OK);
  EXPECT_EQ(n, 0u);
  rk_concurrency_free(c);
}

}  // namespace
// Reserve and settle through C: a refund gives back what was not used; a bad id or absurd amount changes nothing.
TEST(CApi, ReservesAndSettles) {
  rk_spec s = spec_for("fixed_window", 10);
  Handle h;
  ASSERT_EQ(make(s, h), RK_OK);
  char id[RK_RESERVATION_ID_SIZE];
  rk_decision d;
  ASSERT_EQ(rk_limiter_reserve_at(h.p, "k", 1, 0, 8, 0, id, &d), RK_OK);
  ASSERT_TRUE(d.allowed);
  EXPECT_EQ(std::string(id).size(), 32u);
  EXPECT_EQ(rk_limiter_reserve_at(h.p, "k", 1, 0, (uint64_t{1} << 53) + 1, 0, id + 0, &d), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("estimate"), std::string::npos) << rk_last_error();
  int settled = -1;
  EXPECT_EQ(rk_limiter_settle_at(h.p, "other", 5, 0, id, 0, &settled, &d), RK_OK);
  EXPECT_EQ(settled, 0);
  EXPECT_EQ(rk_limiter_settle_at(h.p, "k", 1, 0, id, (uint64_t{1} << 53) + 1, &settled, &d), RK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(rk_last_error()).find("actual"), std::string::npos) << rk_last_error();
  ASSERT_EQ(rk_limiter_settle_at(h.p, "k", 1, 0, id, 3, &settled, &d), RK_OK);
  EXPECT_EQ(settled, 1);
  EXPECT_EQ(d.remaining, 7);  // 8 reserved, 3 used
  ASSERT_EQ(rk_limiter_settle_at(h.p, "k", 1, 0, id, 3, &settled, &d), RK_OK);
  EXPECT_EQ(settled, 0);  // settled once only
  EXPECT_EQ(rk_limiter_settle_at(h.p, "k", 1, 0, nullptr, 3, &settled, &d), RK_INVALID_ARGUMENT);
}

}  // namespace rk
