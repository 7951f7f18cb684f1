// Reserve and settle through the service (service/reservations.cc), in memory: a refund and an overdraw on the
// matched rule's key, settles that change nothing (unknown, another key's, twice, expired), bad amounts named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "service/service.h"

namespace rk::service {
namespace {

using namespace std::chrono_literals;

const char* kRules = R"(
domain: ai
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 10000, algorithm: fixed_window, name: tokens}
  - key: user
    rate_limit: {algorithm: concurrency, max_in_flight: 10}
)";

class ReservationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rk-reservations-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "ai.yaml") << kRules;
    reloader_ = std::make_unique<rules::Reloader>(dir_.string(), rules::BuildOptions{.clock = clock_});
    ASSERT_TRUE(reloader_->load_now().empty());
    service_ = std::make_unique<Service>(*reloader_, clock_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ReserveResult reserve(const std::string& key, std::uint64_t estimate, Nanos ttl = 60s) {
    return service_->reserve({.domain = "ai", .entries = {{"api_key", key}}, .amount = estimate, .ttl = ttl});
  }
  ReserveResult settle(const std::string& key, const std::string& id, std::uint64_t actual) {
    return service_->settle({.domain = "ai", .entries = {{"api_key", key}}, .amount = actual, .reservation = id});
  }
  static const ReserveAnswer& answer(const ReserveResult& r) {
    if (auto* e = std::get_if<RequestError>(&r)) ADD_FAILURE() << e->field << ": " << e->message;
    return std::get<ReserveAnswer>(r);
  }
  double remaining(const std::string& key) {
    auto r = service_->check({.domain = "ai", .descriptors = {{.entries = {{"api_key", key}}, .hits_addend = 0}}});
    return static_cast<double>(std::get<CheckResponse>(r).statuses.at(0).limit_remaining);
  }

  std::filesystem::path dir_;
  // The start of a minute: every test stays within it unless it says otherwise.
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'040'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<Service> service_;
};

TEST_F(ReservationsTest, ARefundGivesBackWhatWasNotUsedAndAnOverdrawIsOwed) {
  const ReserveResult r = reserve("k1", 4000);
  const ReserveAnswer& a = answer(r);
  ASSERT_TRUE(a.done);
  EXPECT_EQ(a.reservation.size(), 32u);
  EXPECT_EQ(a.name, "tokens");
  EXPECT_EQ(a.decision.remaining, 6000);
  const ReserveResult s = settle("k1", a.reservation, 1500);
  EXPECT_TRUE(answer(s).done);
  EXPECT_EQ(answer(s).reserved, 4000u);
  EXPECT_EQ(remaining("k1"), 8500);
  // An overdraw past what is left is recorded all the same: the key is refused for the rest of the window.
  const ReserveResult big = reserve("k1", 8000);
  ASSERT_TRUE(answer(big).done);
  const ReserveResult over = settle("k1", answer(big).reservation, 12000);
  EXPECT_TRUE(answer(over).done);
  EXPECT_FALSE(answer(over).decision.allowed) << "the settle overdrew";
  EXPECT_EQ(remaining("k1"), 0);
  EXPECT_FALSE(answer(reserve("k1", 0)).done) << "a debt is owed";
}

TEST_F(ReservationsTest, ASettleThatNamesNoReservationOfTheKeyChangesNothing) {
  const std::string id = answer(reserve("k1", 3000, 10s)).reservation;
  EXPECT_FALSE(answer(settle("k2", id, 0)).done) << "another key's reservation";
  EXPECT_FALSE(answer(settle("k1", "0123456789abcdef0123456789abcdef", 0)).done);
  EXPECT_FALSE(answer(settle("k1", "x", 0)).done);
  EXPECT_EQ(remaining("k1"), 7000);
  EXPECT_EQ(remaining("k2"), 10000);
  clock_->advance(10s);
  EXPECT_FALSE(answer(settle("k1", id, 0)).done) << "expired: settled as reserved";
  EXPECT_EQ(remaining("k1"), 7000);
}

TEST_F(ReservationsTest, BadRequestsAreNamedAndChangeNothing) {
  auto field = [](const ReserveResult& r) {
    const auto* e = std::get_if<RequestError>(&r);
    return e ? e->field : std::string("(no error)");
  };
  EXPECT_EQ(field(reserve("k1", kMaxReservationAmount + 1)), "estimate");
  EXPECT_EQ(field(reserve("k1", 1, 0s)), "ttl_seconds");
  const std::string id = answer(reserve("k1", 10)).reservation;
  EXPECT_EQ(field(settle("k1", id, kMaxReservationAmount + 1)), "actual");
  EXPECT_EQ(field(settle("k1", "", 1)), "reservation");
  EXPECT_EQ(field(service_->reserve({.domain = "ai", .entries = {{"user", "7"}}, .amount = 1})), "descriptor");
  EXPECT_EQ(field(service_->reserve({.domain = "nope", .entries = {{"api_key", "k"}}, .amount = 1})), "descriptor");
  EXPECT_EQ(remaining("k1"), 9990);
  EXPECT_TRUE(answer(settle("k1", id, 10)).done) << "a refused settle took the reservation";
}

// 50 clients reserving and settling through the service at once (the clock frozen within the minute): what they
// take is at most the limit plus the overdraws of the reservations in flight (each at most 1 here), and the key's
// count is exactly what they took.
TEST_F(ReservationsTest, FiftyConcurrentClientsNeverTakeMoreThanTheLimitPlusTheOverdrawsInFlight) {
  std::atomic<std::uint64_t> taken{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 50; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<unsigned>(c));
      for (int i = 0; i < 100; ++i) {
        const std::uint64_t estimate = 50 + rng() % 200;
        const ReserveResult r = reserve("k1", estimate);
        if (!answer(r).done) continue;
        const std::uint64_t actual = rng() % (estimate + 2);  // at most 1 more than reserved
        taken += actual;
        EXPECT_TRUE(answer(settle("k1", answer(r).reservation, actual)).done);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_LE(taken.load(), 10000u + 50u);
  EXPECT_GE(taken.load(), 5000u) << "the refunds were not given back";
  EXPECT_EQ(remaining("k1"), taken.load() >= 10000 ? 0.0 : static_cast<double>(10000 - taken.load()));
}

}  // namespace
}  // namespace rk::service
