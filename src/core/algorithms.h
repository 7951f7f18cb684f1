// core/algorithms.h: each algorithm as one type naming its parameters, its state and its functions, so that a
// store can be written once for all of them.
//
// absorb(p, s, now, hits) counts `hits` recorded elsewhere (another server's, under `sharing: batched`) into the
// state as if they had been admitted at `now`, whatever the limit says: what a decision that admitted them would
// have left, without its test. Absorbing what a fleet recorded makes the state the fleet's (docs/redis.md).
#pragma once

#include <cstdint>

#include "core/charge.h"
#include "core/earrrl.h"
#include "core/fluid.h"
#include "core/gcra.h"
#include "core/sliding_log.h"
#include "core/windows.h"

namespace rk::core {

// DecideBrief: decide for a caller that reads no reset_after (rk::Fields::kAllButResetAfter); the same function
// where reset_after costs nothing to compute.
template <class P, class S, auto Decide, auto Forgettable, auto Absorb, auto Refund, auto DecideBrief = Decide>
struct AlgorithmOf {
  using Params = P;
  using State = S;
  // Inlined into the store's update, where the decision's inline parts (gcra, fluid, earrrl) meet the entry.
  [[gnu::always_inline]] static Decision decide(const P& p, S& s, std::int64_t now, std::uint64_t cost) {
    return Decide(p, s, now, cost);
  }
  [[gnu::always_inline]] static Decision decide_brief(const P& p, S& s, std::int64_t now, std::uint64_t cost) {
    return DecideBrief(p, s, now, cost);
  }
  static bool forgettable(const P& p, const S& s, std::int64_t now) { return Forgettable(p, s, now); }
  static void absorb(const P& p, S& s, std::int64_t now, std::uint64_t hits) { Absorb(p, s, now, hits); }
  // Gives back `amount` of a charge (a reservation settled for less; docs/algorithms.md, "Reserve and settle"):
  // never more than that charge still holds in the state.
  static void refund(const P& p, S& s, std::int64_t now, std::uint64_t amount, const Charge& charge) {
    Refund(p, s, now, amount, charge);
  }
};

using Earrrl = AlgorithmOf<EarrrlParams, EarrrlState, earrrl_decide, earrrl_forgettable, earrrl_absorb, earrrl_refund,
                           earrrl_decide_brief>;
using Gcra = AlgorithmOf<GcraParams, GcraState, gcra_decide, gcra_forgettable, gcra_absorb, gcra_refund>;
using LeakyQueue = AlgorithmOf<GcraParams, GcraState, leaky_queue_decide, gcra_forgettable, gcra_absorb, gcra_refund>;
using Fluid = AlgorithmOf<FluidParams, FluidState, fluid_decide, fluid_forgettable, fluid_absorb, fluid_refund,
                          fluid_decide_brief>;
using FixedWindow = AlgorithmOf<WindowParams, FixedWindowState, fixed_window_decide, fixed_window_forgettable,
                                fixed_window_absorb, fixed_window_refund>;
using SlidingLog = AlgorithmOf<WindowParams, SlidingLogState, sliding_log_decide, sliding_log_forgettable,
                               sliding_log_absorb, sliding_log_refund>;
using SlidingWindow = AlgorithmOf<WindowParams, SlidingWindowState, sliding_window_decide, sliding_window_forgettable,
                                  sliding_window_absorb, sliding_window_refund, sliding_window_decide_brief>;

// The one switch from an rk::Algorithm to its type: calls f.template operator()<Algo>(params) with the spec's
// precomputed parameters and returns what it returns. The spec must be valid (rk::validate).
//
//   auto store = with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) { return make<Algo>(p); });
template <class F>
decltype(auto) with_algorithm(const LimitSpec& spec, F&& f) {
  switch (spec.algorithm) {
    case Algorithm::kEarrrl: return f.template operator()<Earrrl>(earrrl_params(spec));
    case Algorithm::kGcra: return f.template operator()<Gcra>(gcra_params(spec));
    case Algorithm::kLeakyQueue: return f.template operator()<LeakyQueue>(gcra_params(spec));
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: return f.template operator()<Fluid>(fluid_params(spec));
    case Algorithm::kFixedWindow: return f.template operator()<FixedWindow>(window_params(spec));
    case Algorithm::kSlidingLog: return f.template operator()<SlidingLog>(window_params(spec));
    case Algorithm::kSlidingWindow: break;
  }
  return f.template operator()<SlidingWindow>(window_params(spec));
}

}  // namespace rk::core
