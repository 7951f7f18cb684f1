// cli/flags.cc: the limit flags' names, help and checks, and a LimitSpec from them (with or without a base).
#include "cli/flags.h"

#include <charconv>
#include <cmath>

#include "core/registry.h"

namespace rk::cli {

namespace {

std::optional<double> read_number(const std::string& s) {
  double out = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc{} || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return out;
}

Reader number(std::optional<double>& out) {
  return [&out](const std::string& v) {
    out = read_number(v);
    return out ? std::string() : is_not(v, "a number");
  };
}

Reader duration(std::optional<Nanos>& out) {
  return [&out](const std::string& v) {
    out = parse_duration(v);
    return out ? std::string() : is_not(v, "a duration (like 10s, 250ms, 1.5m, 2h)");
  };
}

Reader algorithm(std::optional<Algorithm>& out) {
  return [&out](const std::string& v) {
    out = parse_algorithm(v);
    return out ? std::string() : "unknown algorithm '" + v + "' (" + core::algorithm_names() + ")";
  };
}

Reader count_refused(std::optional<bool>& out) {
  return [&out](const std::string& v) {
    if (v == "true" || v == "1") out = true;
    else if (v == "false" || v == "0") out = false;
    else return is_not(v, "true or false");
    return std::string();
  };
}

// A number, as the other limit flags are (so 1e6 is a million), and whole.
Reader max_keys(std::optional<std::size_t>& out) {
  return [&out](const std::string& v) {
    const auto n = read_number(v);
    if (!n || !(*n >= 1 && *n <= 1e12 && std::floor(*n) == *n))
      return is_not(v, "a whole number from 1 to 1000000000000");
    out = static_cast<std::size_t>(*n);
    return std::string();
  };
}

// The flags given, over `spec` and `store`.
void apply(const LimitOverrides& given, LimitSpec& spec, StoreOptions& store) {
  if (given.algorithm) spec.algorithm = *given.algorithm;
  if (given.limit) spec.limit = *given.limit;
  if (given.window) spec.window = *given.window;
  if (given.half_life) spec.half_life = given.half_life;
  if (given.burst) spec.burst = given.burst;
  if (given.capacity) spec.capacity = given.capacity;
  if (given.count_refused) spec.count_refused = given.count_refused;
  if (given.max_keys) store.max_keys = *given.max_keys;
}

bool validated(const LimitSpec& spec, std::vector<std::string>& errors) {
  for (const auto& e : validate(spec)) errors.push_back(e.param + ": " + e.message);
  return errors.empty();
}

}  // namespace

void add_limit_flags(FlagSet& flags, LimitOverrides& given) {
  flags.value("--algorithm", "NAME", core::algorithm_names() + " (default earrrl)", algorithm(given.algorithm));
  flags.value("--limit", "N", "requests per window (earrrl: the average rate not to exceed)", number(given.limit));
  flags.value("--window", "DURATION", "default 1s; units ns us ms s m h d w", duration(given.window));
  flags.value("--half-life", "DURATION", "earrrl: how fast the estimate forgets (required for earrrl)",
              duration(given.half_life));
  flags.value("--burst", "N", "gcra: requests beyond one at once; leaky_queue: how many may wait", number(given.burst));
  flags.value("--capacity", "N", "token_bucket, leaky_bucket: bucket size (default: the limit)",
              number(given.capacity));
  flags.value("--count-refused", "B", "earrrl (default true), fixed_window (default false)",
              count_refused(given.count_refused));
  flags.value("--max-keys", "N", "keys tracked before CLOCK eviction (default 1000000)", max_keys(given.max_keys));
}

bool limit_from_flags(const LimitOverrides& given, LimitFlags& out, std::vector<std::string>& errors) {
  if (!given.limit) {
    errors.push_back("--limit is required");
    return false;
  }
  apply(given, out.spec, out.store);
  return validated(out.spec, errors);
}

bool limit_over(const LimitOverrides& given, const LimitSpec& base, LimitFlags& out, std::vector<std::string>& errors) {
  out.spec = base;
  apply(given, out.spec, out.store);
  if (given.algorithm && out.spec.algorithm != base.algorithm) {
    // The file's parameters were chosen for its own algorithm: keep only those the new one uses.
    using core::Param;
    using core::takes;
    const Algorithm a = out.spec.algorithm;
    if (!given.half_life && !takes(a, Param::kHalfLife)) out.spec.half_life.reset();
    if (!given.burst && !takes(a, Param::kBurst)) out.spec.burst.reset();
    if (!given.capacity && !takes(a, Param::kCapacity)) out.spec.capacity.reset();
    if (!given.count_refused && !takes(a, Param::kCountRefused)) out.spec.count_refused.reset();
    if (!takes(a, Param::kAlign)) out.spec.align = Align::kEpoch;
  }
  return validated(out.spec, errors);
}

std::string limit_flags_help() {
  LimitOverrides ignored;
  FlagSet flags("");
  add_limit_flags(flags, ignored);
  return flags.flags_help();
}

}  // namespace rk::cli
