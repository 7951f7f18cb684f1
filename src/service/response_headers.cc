#include "service/response_headers.h"

#include <array>

namespace rk::service {

namespace {

// The statuses with a limit, as the library's one formatter (src/http_fields/rate_limit_headers.h) takes them, handed
// to `use`: on the stack for up to kOnStack of them (a request's usual few), so that the common case allocates
// nothing.
template <class Use>
void with_limits(const CheckResponse& r, Use use) {
  constexpr std::size_t kOnStack = 8;
  std::array<http_fields::LimitState, kOnStack> few;
  std::vector<http_fields::LimitState> many;
  std::size_t n = 0;
  for (const auto& st : r.statuses) {
    if (!st.has_limit) continue;
    const http_fields::LimitState l{.name = st.name,
                                    .quota = static_cast<double>(st.requests_per_unit),
                                    .window = st.window,
                                    .refused = st.code == Code::kOverLimit,
                                    .remaining = static_cast<double>(st.limit_remaining),
                                    .reset = st.duration_until_reset,
                                    .never = st.code == Code::kOverLimit && st.retry_after == kNever};
    if (n < kOnStack) {
      few[n++] = l;
      continue;
    }
    if (many.empty()) many.assign(few.begin(), few.end());
    many.push_back(l);
  }
  use(many.empty() ? std::span<const http_fields::LimitState>(few.data(), n)
                   : std::span<const http_fields::LimitState>(many));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> rate_limit_headers(const CheckResponse& r) {
  std::vector<std::pair<std::string, std::string>> fields;
  with_limits(r, [&](std::span<const http_fields::LimitState> limits) { fields = http_fields::format(limits); });
  return fields;
}

void rate_limit_headers(const CheckResponse& r, http_fields::FieldSink& out) {
  with_limits(r, [&](std::span<const http_fields::LimitState> limits) { http_fields::format_to(limits, out); });
}

}  // namespace rk::service
