// cli/flags.h: a LimitSpec and store options from command-line flags, the same names everywhere:
//   --algorithm NAME --limit N --window DURATION --half-life DURATION --burst N --capacity N
//   --count-refused true|false --max-keys N      (also --flag=value)
#pragma once

#include <string>
#include <vector>

#include "ratekeeper/params.h"
#include "ratekeeper/store.h"

namespace rk::cli {

struct LimitFlags {
  LimitSpec spec;
  StoreOptions store;
};

// Parses args (without the subcommand). On failure returns false and fills `errors`, one message per problem,
// including every parameter error of the resulting spec.
bool parse_limit_flags(const std::vector<std::string>& args, LimitFlags& out, std::vector<std::string>& errors);

// For commands that read a limit from a file (simulate): starts from `base`, each flag given overrides one field,
// --limit is optional. Naming another --algorithm drops the base's parameters the new algorithm has no use for
// (a scenario's half_life when run with --algorithm gcra), unless given as flags too.
bool parse_limit_overrides(const std::vector<std::string>& args, const LimitSpec& base, LimitFlags& out,
                           std::vector<std::string>& errors);

// The flags' help text.
const char* limit_flags_help();

}  // namespace rk::cli
