// core/registry.h: every algorithm's facts in one table — its name, the parameters it takes, their defaults, and
// the stores that can run it. Validation, the rules parser, the CLI, the stores and the docs' lists read from here;
// nothing else names an algorithm's parameters.
//
//   if (!core::takes(Algorithm::kGcra, core::Param::kCapacity))
//     std::cerr << "capacity is a parameter of " << core::takers(core::Param::kCapacity) << "\n";
//
//   core::with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) { ... });  // core/algorithms.h
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk::core {

// The optional parameters of a LimitSpec (limit and window are every algorithm's).
enum class Param : std::uint8_t { kHalfLife, kBurst, kCapacity, kCountRefused, kAlign };
inline constexpr Param kAllParams[] = {Param::kHalfLife, Param::kBurst, Param::kCapacity, Param::kCountRefused,
                                       Param::kAlign};

// Where a limiter's state can live.
enum class StoreKind : std::uint8_t { kMemory, kShared, kRedis };

struct AlgorithmInfo {
  Algorithm algorithm;
  std::string_view name;
  std::uint8_t params;       // bit (1 << Param) for each parameter taken
  std::uint8_t required;     // bit (1 << Param) for each parameter that has no default
  bool whole_limit;          // the limit counts whole requests per window (the window counters)
  bool count_refused;        // count_refused's default in the library (when the algorithm takes it)
  bool rules_count_refused;  // ... and in a rules file: envoyproxy/ratelimit's fixed window counts every hit
  std::uint8_t stores;       // bit (1 << StoreKind) for each store that runs it
  std::string_view why_not;  // for a store that cannot: the reason, shown in the error
};

const AlgorithmInfo& info(Algorithm a);
bool takes(Algorithm a, Param p);
bool runs_on(Algorithm a, StoreKind s);

std::string_view param_name(Param p);  // as in rules files and messages: "half_life", "burst", ...
std::optional<Param> parse_param(std::string_view name);
std::string_view store_name(StoreKind s);

// "gcra and leaky_queue": the algorithms taking `p`, for messages.
std::string takers(Param p);
// "earrrl, gcra, ..., sliding_window": every name, for messages.
std::string algorithm_names();

// The spec with every unset optional parameter the algorithm takes set to its default (burst 0, capacity the limit,
// count_refused as the library's default). Parameters without a default (half_life) stay unset.
LimitSpec with_defaults(const LimitSpec& spec);

// Whether a refused attempt is still added to the key's state (earrrl, and fixed_window with count_refused): then a
// key can go past its limit, and an attempt of cost 0 tells whether it has (docs/compatibility.md).
bool counts_refused(const LimitSpec& spec);

// The hits a decision of `cost` recorded in the key's state: the cost when admitted, and when refused where refused
// hits count; else none. What `sharing: batched` reports to the other servers.
std::uint64_t hits_recorded(const LimitSpec& spec, const Decision& d, std::uint64_t cost);

// Why `spec` cannot run on store `s`, or nullopt when it can.
std::optional<std::string> store_refuses(const LimitSpec& spec, StoreKind s);

}  // namespace rk::core
