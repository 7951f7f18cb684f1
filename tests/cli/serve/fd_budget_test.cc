// The descriptor budget (cli/serve/fd_budget.h): what each listener may hold under an open files limit, and what
// a cap that does not fit gets: an error naming it when given, a warning and a lower cap when a default.
#include "cli/serve/fd_budget.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

namespace rk::cli::serve {
namespace {

constexpr std::size_t kDefault = 10000;

FdBudgetAsk ask(std::uint64_t open_files, Cap http = {kDefault, false}, bool grpc = false,
                Cap grpc_max = {kDefault, false}) {
  return {.open_files = open_files, .threads = 2, .http = http, .grpc = grpc, .grpc_threads = 2, .grpc_max = grpc_max};
}

// Every descriptor is accounted for: the reserve, the admin listener's, the transient files, and the connections
// (two for each gRPC one) fill no more than the limit; the ceiling leaves the admin listener's and the transients'.
void expect_fits(const FdBudget& b, std::uint64_t limit) {
  EXPECT_LE(b.reserve + b.admin_max + kTransientFiles + b.http_max + 2 * b.grpc_max, limit);
  EXPECT_EQ(static_cast<std::uint64_t>(b.fd_ceiling), limit - b.admin_max - kTransientFiles);
  EXPECT_LE(b.reserve + b.http_max + 2 * b.grpc_max, static_cast<std::size_t>(b.fd_ceiling));
}

TEST(FdBudget, DefaultsFitAUsualLimitUntouched) {
  for (const bool grpc : {false, true}) {
    const FdBudget b = plan_fd_budget(ask(524288, {kDefault, false}, grpc));
    EXPECT_EQ(b.error, "");
    EXPECT_TRUE(b.warnings.empty());
    EXPECT_EQ(b.http_max, kDefault);
    EXPECT_EQ(b.grpc_max, grpc ? kDefault : 0);
    EXPECT_EQ(b.admin_max, 128u);
    expect_fits(b, 524288);
  }
}

TEST(FdBudget, TheArithmeticAt1024) {
  // reserve 64 + 4 x (2 public threads + 1 admin + 2 gRPC) + 1024/16 = 148; admin 1024/32 = 32; transients 32:
  // 812 left, shared half and half by default (each gRPC connection takes two).
  const FdBudget b = plan_fd_budget(ask(1024, {kDefault, false}, true));
  EXPECT_EQ(b.reserve, 148u);
  EXPECT_EQ(b.admin_max, 32u);
  EXPECT_EQ(b.http_max, 406u);
  EXPECT_EQ(b.grpc_max, 203u);
  EXPECT_EQ(b.fd_ceiling, 1024 - 32 - 32);
  expect_fits(b, 1024);
  ASSERT_EQ(b.warnings.size(), 2u);
  EXPECT_EQ(b.warnings[0],
            "--max-connections lowered from its default 10000 to 406: the process may open 1024 files (RLIMIT_NOFILE), "
            "of which 212 are kept for the process, the admin listener and connections on their way in or out; 812 "
            "are left for connections (each gRPC connection takes 2); raise the limit (ulimit -n; systemd's "
            "LimitNOFILE=) for more");
  EXPECT_TRUE(b.warnings[1].starts_with("--grpc-max-connections lowered from its default 10000 to 203: "));
}

TEST(FdBudget, ADefaultTakesWhatTheOtherCapLeaves) {
  // --max-connections 100 given: gRPC gets the rest, (812 - 100) / 2.
  FdBudget b = plan_fd_budget(ask(1024, {100, true}, true));
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.http_max, 100u);
  EXPECT_EQ(b.grpc_max, 356u);
  ASSERT_EQ(b.warnings.size(), 1u);
  EXPECT_TRUE(b.warnings[0].starts_with("--grpc-max-connections lowered from its default 10000 to 356: "));
  // Both defaults, one small enough for its half: the other takes the rest.
  b = plan_fd_budget(ask(1024, {100, false}, true));
  EXPECT_EQ(b.http_max, 100u);
  EXPECT_EQ(b.grpc_max, 356u);
  b = plan_fd_budget(ask(1024, {kDefault, false}, true, {50, false}));
  EXPECT_EQ(b.grpc_max, 50u);
  EXPECT_EQ(b.http_max, 712u);
  // Without gRPC, HTTP has it all.
  b = plan_fd_budget(ask(1024));
  EXPECT_EQ(b.http_max, 1024u - (64 + 4 * 3 + 64) - 32 - 32);
  expect_fits(b, 1024);
}

TEST(FdBudget, ACapGivenThatDoesNotFitIsAnErrorNamingIt) {
  FdBudget b = plan_fd_budget(ask(1024, {10000, true}, true));
  EXPECT_EQ(b.error,
            "--max-connections 10000: more connections than there are file descriptors for: the process may open "
            "1024 files (RLIMIT_NOFILE), of which 212 are kept for the process, the admin listener and connections on "
            "their way in or out; 812 are left for connections (each gRPC connection takes 2), and gRPC needs 2: give "
            "810 or fewer, or raise the limit (ulimit -n; systemd's LimitNOFILE=)");
  b = plan_fd_budget(ask(1024, {kDefault, false}, true, {406, true}));
  EXPECT_TRUE(
      b.error.starts_with("--grpc-max-connections 406: more connections than there are file descriptors "
                          "for: "))
      << b.error;
  EXPECT_TRUE(b.error.find("and HTTP needs 1: give 405 or fewer") != std::string::npos) << b.error;
  b = plan_fd_budget(ask(1024, {500, true}, true, {200, true}));
  EXPECT_TRUE(b.error.starts_with("--max-connections 500 with --grpc-max-connections 200: ")) << b.error;
  EXPECT_TRUE(b.error.find("--max-connections plus twice --grpc-max-connections at most 812") != std::string::npos);
  b = plan_fd_budget(ask(1024, {821, true}));  // without gRPC's threads, 8 more are left: 820
  EXPECT_TRUE(b.error.find("give 820 or fewer") != std::string::npos) << b.error;
  // Exactly what fits is no error.
  for (const auto& fits :
       {ask(1024, {820, true}), ask(1024, {810, true}, true), ask(1024, {400, true}, true, {206, true})}) {
    b = plan_fd_budget(fits);
    EXPECT_EQ(b.error, "");
    EXPECT_TRUE(b.warnings.empty() || !fits.grpc_max.given);
    expect_fits(b, 1024);
  }
}

TEST(FdBudget, ALimitTooSmallForAnyConnection) {
  const FdBudget b = plan_fd_budget(ask(128, {kDefault, false}, true));
  EXPECT_EQ(b.error,
            "the process may open only 128 files (RLIMIT_NOFILE, its hard limit), and serve needs at "
            "least 135: raise the limit (ulimit -n; systemd's LimitNOFILE=)");
}

TEST(FdBudget, TheSoftLimitIsRaisedToTheHardOne) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit lowered = before;
  lowered.rlim_cur = std::min<rlim_t>(before.rlim_max, 256);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const OpenFiles files = raise_open_files_limit();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(files.was, lowered.rlim_cur);
  EXPECT_EQ(files.soft, now.rlim_cur);
  EXPECT_EQ(now.rlim_cur, before.rlim_max == RLIM_INFINITY ? now.rlim_cur : before.rlim_max);
  EXPECT_EQ(files.hard, before.rlim_max);
  setrlimit(RLIMIT_NOFILE, &before);
}

}  // namespace
}  // namespace rk::cli::serve
