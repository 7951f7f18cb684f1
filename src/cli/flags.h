// cli/flags.h: the limit flags, the same names for replay and simulate:
//   --algorithm NAME --limit N --window DURATION --half-life DURATION --burst N --capacity N
//   --count-refused true|false --max-keys N      (also --flag=value)
//
//   cli::LimitOverrides given;
//   cli::FlagSet flags("usage: ratekeeper replay [flags] < trace");
//   cli::add_limit_flags(flags, given);
//   ... flags.parse(args) ...
//   cli::LimitFlags limit;
//   if (!cli::limit_from_flags(given, limit, errors)) ...     // errors: "--limit is required", "limit: ..."
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/flag_set.h"
#include "ratekeeper/params.h"
#include "ratekeeper/store.h"

namespace rk::cli {

struct LimitFlags {
  LimitSpec spec;
  StoreOptions store;
};

// The limit flags given, each empty unless given.
struct LimitOverrides {
  std::optional<Algorithm> algorithm;
  std::optional<double> limit, burst, capacity;
  std::optional<Nanos> window, half_life;
  std::optional<bool> count_refused;
  std::optional<std::size_t> max_keys;
};

// Adds the limit flags to `flags`; parsing fills `given`.
void add_limit_flags(FlagSet& flags, LimitOverrides& given);

// For replay: the limit from the flags alone, --limit required. On failure returns false and fills `errors`, one
// message per problem, including every parameter error of the resulting spec.
bool limit_from_flags(const LimitOverrides& given, LimitFlags& out, std::vector<std::string>& errors);

// For commands that read a limit from a file (simulate): starts from `base`, each flag given overrides one field.
// Naming another --algorithm drops the base's parameters the new algorithm has no use for (a scenario's half_life
// when run with --algorithm gcra), unless given as flags too.
bool limit_over(const LimitOverrides& given, const LimitSpec& base, LimitFlags& out, std::vector<std::string>& errors);

// The limit flags' help, one line each, as every command's help lists them.
std::string limit_flags_help();

}  // namespace rk::cli
