#include "core/earrrl.h"

#include <algorithm>

namespace rk::core {

using earrrl_detail::decayed;
using earrrl_detail::kMaxN;

void earrrl_absorb(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t hits) {
  const double n_before = decayed(p, s, now);
  s.n = std::min(kMaxN, n_before + static_cast<double>(hits));
  s.t_ns = (n_before == 0) ? now : std::max(s.t_ns, now);
}

void earrrl_refund(const EarrrlParams& p, EarrrlState& s, std::int64_t now, std::uint64_t amount,
                   const Charge& charge) {
  const double n_before = decayed(p, s, now);
  if (amount == 0 || n_before == 0) return;
  const double dt = static_cast<double>(std::max<std::int64_t>(0, sat_sub(now, charge.at_ns)));
  const double n = n_before - static_cast<double>(amount) * std::exp(-p.lambda * dt);
  s.n = n > 0 ? n : 0;
  s.t_ns = std::max(s.t_ns, now);
}

bool earrrl_forgettable(const EarrrlParams& p, const EarrrlState& s, std::int64_t now) {
  return decayed(p, s, now) < p.n_forget;
}

}  // namespace rk::core
