// What is stored in Redis as a compatibility promise (docs/upgrading.md, docs/redis.md "What is stored"): after a
// known sequence of decisions on a fixed clock, every algorithm's keys are named, and hold the bytes, that a released
// version wrote from the same decisions (tests/testdata/compat/redis_state.txt). Two minor versions share one Redis
// during a rolling upgrade only while this holds; tests/integration/upgrade_test.py runs the two versions at once.
// Plain keys and packed hashes (--redis-packed-hashes), a rule's keys and a request's own limit (an override).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "service/service.h"
#include "store/redis/remote.h"
#include "support/compat_data.h"
#include "support/redis_process.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;
using redis_test::RedisProcess;

// One rule per algorithm (the concurrency algorithm's leases hold random ids: its keys are held by
// remote_leases_test.cc), windows of an hour, so nothing expires while the test looks.
const char* kRules = R"(domain: compat
descriptors:
  - key: earrrl
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: earrrl, half_life: 10m}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: gcra, burst: 1}
  - key: token_bucket
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket, capacity: 3}
  - key: leaky_bucket
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: leaky_bucket}
  - key: leaky_queue
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: leaky_queue, burst: 2}
  - key: fixed_window
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: fixed_window}
  - key: fixed_odd
    rate_limit: {window: 1500ms, requests_per_unit: 3, algorithm: fixed_window}
  - key: sliding_log
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_log}
  - key: sliding_window
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_window}
)";
const char* kKeys[] = {"earrrl",       "gcra",      "token_bucket", "leaky_bucket",  "leaky_queue",
                       "fixed_window", "fixed_odd", "sliding_log",  "sliding_window"};

// Every `rk:*` key of the Redis on `port`, a line each, sorted: name, type, and the value in hex (a hash's fields
// and values as field=value in hex, sorted).
std::string dump(int port) {
  const std::string lua =
      "local function hex(s) return (s:gsub(\".\", function(c) return string.format(\"%02x\", string.byte(c)) end)) "
      "end local out = {} for _, k in ipairs(redis.call(\"KEYS\", \"rk:*\")) do "
      "local t = redis.call(\"TYPE\", k).ok local v = \"?\" "
      "if t == \"string\" then v = hex(redis.call(\"GET\", k)) "
      "elseif t == \"hash\" then local h = redis.call(\"HGETALL\", k) local p = {} "
      "for i = 1, #h, 2 do p[#p + 1] = hex(h[i]) .. \"=\" .. hex(h[i + 1]) end table.sort(p) "
      "v = table.concat(p, \",\") end out[#out + 1] = k .. \" \" .. t .. \" \" .. v end "
      "table.sort(out) return out";
  return redis_test::redis_cli(port, "EVAL '" + lua + "' 0") + "\n";
}

class RedisCompat : public ::testing::Test {
 protected:
  void TearDown() override {
    service_.reset();
    reloader_.reset();
    if (remote_) remote_->close();
    std::filesystem::remove_all(dir_);
  }

  // Each rule's key "full" charged until refused (at most 6 times), 100 ms apart, its key "one" once; a request's
  // own limit (3 a minute) twice: through a service on the Redis at `url`, packing states into `packed` hashes.
  void decide(const std::string& url, std::uint32_t packed) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "compat.yaml") << kRules;
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    ASSERT_TRUE(reloader_->load_now().empty());
    remote_ =
        store::redis::make_redis_remote({.url = url, .caller_clock = true, .timeout = 2s, .packed_hashes = packed});
    service_ = std::make_unique<Service>(*reloader_, clock_, ServiceOptions{.remote = remote_});
    for (const char* key : kKeys) {
      for (int i = 0; i < 6; ++i) {
        clock_->advance(100ms);
        if (!ok(check(key, "full", {}))) break;
      }
      ASSERT_TRUE(ok(check(key, "one", {})));
    }
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(ok(check("override", "o", LimitOverride{3, rules::Unit::kMinute})));
  }

  CheckResult check(const std::string& key, const std::string& value, std::optional<LimitOverride> limit) {
    CheckRequest r;
    r.domain = "compat";
    r.descriptors.push_back({.entries = {{key, value}}, .limit = limit});
    return service_->check(r);
  }

  static bool ok(const CheckResult& r) {
    if (auto* e = std::get_if<RequestError>(&r)) {
      ADD_FAILURE() << e->field << ": " << e->message;
      return false;
    }
    const DescriptorStatus& s = std::get<CheckResponse>(r).statuses.at(0);
    EXPECT_EQ(s.fallback, rules::FailurePolicy::kDefault) << s.store_error;
    return s.code == Code::kOk;
  }

  void expect_recorded(const std::string& name, const std::string& dumped) {
    ASSERT_EQ(dumped.rfind("rk:", 0), 0u) << dumped;  // keys were written
    if (compat::recording()) return compat::record(name, dumped);
    EXPECT_EQ(dumped, compat::read(name))
        << "the keys or stored states differ from those recorded in " << name << ": a minor version must read and "
        << "write what the earlier ones did, or a fleet in a rolling upgrade stops sharing its limits "
        << "(docs/upgrading.md)";
  }

  // 2023-11-14 22:13:20.5 UTC: inside an hour, and off a whole second (fixed_odd's window is not on one).
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'500'000'000});
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("rk-compat-" + std::to_string(::getpid()));
  std::unique_ptr<rules::Reloader> reloader_;
  std::shared_ptr<store::remote::RemoteStore> remote_;
  std::unique_ptr<Service> service_;
};

TEST_F(RedisCompat, EveryAlgorithmsKeysAndStatesAreThoseRecorded) {
  RedisProcess redis;
  decide(redis.url(), 0);
  expect_recorded("redis_state.txt", dump(redis.port()));
}

TEST_F(RedisCompat, PackedHashesKeysAndStatesAreThoseRecorded) {
  RedisProcess redis;
  decide(redis.url(), 4);
  expect_recorded("redis_state_packed.txt", dump(redis.port()));
}

}  // namespace
}  // namespace rk::service
