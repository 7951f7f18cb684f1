#include "service/response_headers.h"

#include "headers/rate_limit_headers.h"

namespace rk::service {

// The statuses with a limit, as the library's one formatter (src/headers/rate_limit_headers.h) takes them.
std::vector<std::pair<std::string, std::string>> rate_limit_headers(const CheckResponse& r) {
  std::vector<headers::LimitState> limits;
  for (const auto& st : r.statuses) {
    if (!st.has_limit) continue;
    limits.push_back({.name = st.name,
                      .quota = static_cast<double>(st.requests_per_unit),
                      .window = st.window,
                      .refused = st.code == Code::kOverLimit,
                      .remaining = static_cast<double>(st.limit_remaining),
                      .reset = st.duration_until_reset,
                      .never = st.code == Code::kOverLimit && st.retry_after == kNever});
  }
  return headers::format(limits);
}

}  // namespace rk::service
