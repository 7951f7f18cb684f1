#include "rules/config.h"

#include "base/ascii.h"

namespace rk::rules {

namespace {
constexpr std::string_view kUnitNames[] = {"second", "minute", "hour", "day", "week", "month", "year"};
constexpr std::int64_t kUnitSeconds[] = {1, 60, 3600, 86400, 604800, 2592000, 31536000};
}  // namespace

std::string_view unit_name(Unit u) { return kUnitNames[static_cast<int>(u)]; }

std::optional<Unit> parse_unit(std::string_view name) {
  const std::string lower = base::ascii_lower(name);
  for (int i = 0; i < 7; ++i) {
    if (kUnitNames[i] == lower) return static_cast<Unit>(i);
  }
  return std::nullopt;
}

Nanos unit_length(Unit u) { return std::chrono::seconds(kUnitSeconds[static_cast<int>(u)]); }

std::string_view algorithm_shown(const RateLimit& limit) {
  if (limit.concurrency) return "concurrency";
  return limit.blocked ? "blocked" : algorithm_name(limit.spec.algorithm);
}

std::string_view failure_policy_name(FailurePolicy p) {
  switch (p) {
    case FailurePolicy::kFailOpen: return "fail_open";
    case FailurePolicy::kFailClosed: return "fail_closed";
    case FailurePolicy::kLocal: return "local";
    case FailurePolicy::kDefault: break;
  }
  return "";
}

std::optional<FailurePolicy> parse_failure_policy(std::string_view name) {
  if (name == "fail_open") return FailurePolicy::kFailOpen;
  if (name == "fail_closed") return FailurePolicy::kFailClosed;
  if (name == "local") return FailurePolicy::kLocal;
  return std::nullopt;
}

}  // namespace rk::rules
