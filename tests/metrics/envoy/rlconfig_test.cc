// The rules as upstream's /rlconfig prints them (metrics/envoy/rlconfig.h): a line per limit, upstream's stats key,
// unit and requests per unit, shadow mode.
#include "metrics/envoy/rlconfig.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rules/reloader.h"

namespace rk::metrics::envoy {
namespace {

TEST(RlConfig, ALinePerLimitInUpstreamsText) {
  const auto dir = std::filesystem::temp_directory_path() / ("rk-rlconfig-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "rules.yaml") << R"(domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unlimited: true}
  - key: path
    value: /login
    descriptors:
      - key: client
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 5}
)";
  rules::Reloader reloader(dir.string(), rules::BuildOptions{.clock = std::make_shared<SystemClock>()});
  for (const auto& e : reloader.load_now()) ADD_FAILURE() << e.to_string();
  EXPECT_EQ(rlconfig_text(*reloader.current()),
            "edge.user: unit=HOUR requests_per_unit=2, shadow_mode: false\n"
            "edge.remote_address_10.0.0.1: unit=UNKNOWN requests_per_unit=0, shadow_mode: false\n"
            "edge.path_/login.client: unit=SECOND requests_per_unit=5, shadow_mode: true\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rk::metrics::envoy
