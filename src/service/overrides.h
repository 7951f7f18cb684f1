// service/overrides.h: request overrides (a descriptor's own `limit`, as Envoy sends it), for the decision path:
// where their counters live in a remote store, and how an override limiter's count is judged against the request's
// own limit. Their limiters are Service::override_limiter()'s (overrides.cc).
#pragma once

#include <cstdint>
#include <string_view>

#include "ratekeeper/decision.h"
#include "rules/config.h"

namespace rk::service {

// The remote store's key prefix of request overrides of `unit` (one string per unit, made once).
std::string_view override_prefix(rules::Unit unit);

// An override limiter's decision judged against the request's own `limit` (overrides.cc says how).
Decision judge_override(const Decision& d, std::uint32_t limit, std::uint64_t hits);

}  // namespace rk::service
