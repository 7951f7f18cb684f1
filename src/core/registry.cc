#include "core/registry.h"

#include <array>

namespace rk::core {

namespace {

constexpr std::uint8_t bit(Param p) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(p)); }
constexpr std::uint8_t bit(StoreKind s) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(s)); }
// count_refused: every algorithm takes it (a refused charge recorded as debt, docs/algorithms.md "Debts").
constexpr std::uint8_t with_debt(Param p) { return static_cast<std::uint8_t>(bit(p) | bit(Param::kCountRefused)); }
constexpr std::uint8_t kEveryStore = bit(StoreKind::kMemory) | bit(StoreKind::kShared) | bit(StoreKind::kRedis);

// In the order of rk::Algorithm. The defaults of the parameters themselves are in with_defaults() below.
constexpr AlgorithmInfo kTable[] = {
    {Algorithm::kEarrrl, "earrrl", with_debt(Param::kHalfLife), bit(Param::kHalfLife), false, true, true, kEveryStore,
     ""},
    {Algorithm::kGcra, "gcra", with_debt(Param::kBurst), 0, false, false, false, kEveryStore, ""},
    {Algorithm::kTokenBucket, "token_bucket", with_debt(Param::kCapacity), 0, false, false, false, kEveryStore, ""},
    {Algorithm::kLeakyBucket, "leaky_bucket", with_debt(Param::kCapacity), 0, false, false, false, kEveryStore, ""},
    {Algorithm::kLeakyQueue, "leaky_queue", with_debt(Param::kBurst), 0, false, false, false, kEveryStore, ""},
    {Algorithm::kFixedWindow, "fixed_window", with_debt(Param::kAlign), 0, true, false, true, kEveryStore, ""},
    {Algorithm::kSlidingLog, "sliding_log", bit(Param::kCountRefused), 0, true, false, false,
     static_cast<std::uint8_t>(bit(StoreKind::kMemory) | bit(StoreKind::kRedis)),
     "sliding_log keeps a log per key that grows with its limit, and shared memory has fixed-size slots"},
    {Algorithm::kSlidingWindow, "sliding_window", bit(Param::kCountRefused), 0, true, false, false, kEveryStore, ""},
};
static_assert(std::size(kTable) == std::size(kAllAlgorithms));

constexpr bool in_order() {
  for (std::size_t i = 0; i < std::size(kTable); ++i) {
    if (kTable[i].algorithm != kAllAlgorithms[i] || static_cast<std::size_t>(kTable[i].algorithm) != i) return false;
  }
  return true;
}
static_assert(in_order(), "kTable follows rk::Algorithm");

constexpr std::string_view kParamNames[] = {"half_life", "burst", "capacity", "count_refused", "align"};
static_assert(std::size(kParamNames) == std::size(kAllParams));
constexpr std::string_view kStoreNames[] = {"memory", "shared memory", "redis"};

}  // namespace

const AlgorithmInfo& info(Algorithm a) { return kTable[static_cast<std::size_t>(a)]; }
bool takes(Algorithm a, Param p) { return (info(a).params & bit(p)) != 0; }
bool runs_on(Algorithm a, StoreKind s) { return (info(a).stores & bit(s)) != 0; }

std::string_view param_name(Param p) { return kParamNames[static_cast<std::size_t>(p)]; }

std::optional<Param> parse_param(std::string_view name) {
  for (Param p : kAllParams) {
    if (param_name(p) == name) return p;
  }
  return std::nullopt;
}

std::string_view store_name(StoreKind s) { return kStoreNames[static_cast<std::size_t>(s)]; }

std::string takers(Param p) {
  std::string names[std::size(kTable)];
  std::size_t n = 0;
  for (const AlgorithmInfo& a : kTable) {
    if (a.params & bit(p)) names[n++] = std::string(a.name);
  }
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + names[i];
  return out;
}

std::string algorithm_names() {
  std::string out;
  for (const AlgorithmInfo& a : kTable) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

LimitSpec with_defaults(const LimitSpec& spec) {
  LimitSpec s = spec;
  const Algorithm a = spec.algorithm;
  if (takes(a, Param::kBurst) && !s.burst) s.burst = 0;                 // one request at a time
  if (takes(a, Param::kCapacity) && !s.capacity) s.capacity = s.limit;  // a window's worth
  if (takes(a, Param::kCountRefused) && !s.count_refused) s.count_refused = info(a).count_refused;
  return s;
}

bool counts_refused(const LimitSpec& spec) {
  return takes(spec.algorithm, Param::kCountRefused) && spec.count_refused.value_or(info(spec.algorithm).count_refused);
}

std::uint64_t hits_recorded(const LimitSpec& spec, const Decision& d, std::uint64_t cost) {
  return d.allowed || counts_refused(spec) ? cost : 0;
}

std::optional<std::string> store_refuses(const LimitSpec& spec, StoreKind s) {
  if (runs_on(spec.algorithm, s)) return std::nullopt;
  return std::string(info(spec.algorithm).name) + " cannot run in the " + std::string(store_name(s)) +
         " store: " + std::string(info(spec.algorithm).why_not);
}

}  // namespace rk::core
