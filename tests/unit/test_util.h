// tests/unit/test_util.h: small helpers shared by the unit tests.
#pragma once

#include <chrono>
#include <cstdint>

#include "ratekeeper/units.h"

namespace rk::test {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t sec(double s) { return static_cast<std::int64_t>(s * 1e9); }
constexpr std::int64_t kSec = 1'000'000'000;

}  // namespace rk::test
