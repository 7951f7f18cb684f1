#include "cli/flags.h"

#include <charconv>
#include <cmath>

#include "core/registry.h"

namespace rk::cli {

namespace {

bool parse_number(const std::string& s, double& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

}  // namespace

const char* limit_flags_help() {
  static const std::string help = "  --algorithm NAME     " + core::algorithm_names() + " (default earrrl)\n" +
         "  --limit N            requests per window (earrrl: the average rate not to exceed)\n"
         "  --window DURATION    default 1s; units ns us ms s m h d w\n"
         "  --half-life DURATION earrrl: how fast the estimate forgets (required for earrrl)\n"
         "  --burst N            gcra: requests beyond one at once; leaky_queue: how many may wait\n"
         "  --capacity N         token_bucket, leaky_bucket: bucket size (default: the limit)\n"
         "  --count-refused B    earrrl (default true), fixed_window (default false)\n"
         "  --max-keys N         keys tracked before CLOCK eviction (default 1000000)\n";
  return help.c_str();
}

namespace {

// Which flags were given, for parse_limit_overrides.
struct Given {
  bool algorithm = false, limit = false, half_life = false, burst = false, capacity = false, count_refused = false;
};

using core::Param;
using core::takes;

// Reads every flag into `out`; problems go to `errors`. Validation is the caller's.
void read_flags(const std::vector<std::string>& args, LimitFlags& out, std::vector<std::string>& errors, Given& given) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool have_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      have_value = true;
    }
    if (name.rfind("--", 0) != 0) {
      errors.push_back("unexpected argument '" + args[i] + "'");
      continue;
    }
    if (!have_value) {
      if (i + 1 >= args.size()) {
        errors.push_back(name + " needs a value");
        continue;
      }
      value = args[++i];
    }
    double number = 0;
    if (name == "--algorithm") {
      if (auto a = parse_algorithm(value)) {
        out.spec.algorithm = *a;
        given.algorithm = true;
      } else {
        errors.push_back("--algorithm: unknown algorithm '" + value + "' (" + core::algorithm_names() + ")");
      }
    } else if (name == "--limit" || name == "--burst" || name == "--capacity" || name == "--max-keys") {
      if (!parse_number(value, number)) {
        errors.push_back(name + ": '" + value + "' is not a number");
      } else if (name == "--limit") {
        out.spec.limit = number;
        given.limit = true;
      } else if (name == "--burst") {
        out.spec.burst = number;
        given.burst = true;
      } else if (name == "--capacity") {
        out.spec.capacity = number;
        given.capacity = true;
      } else if (!(number >= 1 && number <= 1e12 && std::floor(number) == number)) {
        errors.push_back("--max-keys: '" + value + "' is not a whole number from 1 to 1000000000000");
      } else {
        out.store.max_keys = static_cast<std::size_t>(number);
      }
    } else if (name == "--window" || name == "--half-life") {
      const auto d = parse_duration(value);
      if (!d) {
        errors.push_back(name + ": '" + value + "' is not a duration (like 10s, 250ms, 1.5m, 2h)");
      } else if (name == "--window") {
        out.spec.window = *d;
      } else {
        out.spec.half_life = *d;
        given.half_life = true;
      }
    } else if (name == "--count-refused") {
      if (value == "true" || value == "1") {
        out.spec.count_refused = true;
        given.count_refused = true;
      } else if (value == "false" || value == "0") {
        out.spec.count_refused = false;
        given.count_refused = true;
      } else {
        errors.push_back("--count-refused: '" + value + "' is not true or false");
      }
    } else {
      errors.push_back("unknown flag " + name);
    }
  }
}

}  // namespace

bool parse_limit_flags(const std::vector<std::string>& args, LimitFlags& out, std::vector<std::string>& errors) {
  Given given;
  read_flags(args, out, errors, given);
  if (!errors.empty()) return false;
  if (!given.limit) {
    errors.push_back("--limit is required");
    return false;
  }
  for (const auto& e : validate(out.spec)) errors.push_back(e.param + ": " + e.message);
  return errors.empty();
}

bool parse_limit_overrides(const std::vector<std::string>& args, const LimitSpec& base, LimitFlags& out,
                           std::vector<std::string>& errors) {
  out.spec = base;
  Given given;
  read_flags(args, out, errors, given);
  if (!errors.empty()) return false;
  if (given.algorithm && out.spec.algorithm != base.algorithm) {
    // The file's parameters were chosen for its own algorithm: keep only those the new one uses.
    const Algorithm a = out.spec.algorithm;
    if (!given.half_life && !takes(a, Param::kHalfLife)) out.spec.half_life.reset();
    if (!given.burst && !takes(a, Param::kBurst)) out.spec.burst.reset();
    if (!given.capacity && !takes(a, Param::kCapacity)) out.spec.capacity.reset();
    if (!given.count_refused && !takes(a, Param::kCountRefused)) out.spec.count_refused.reset();
    if (!takes(a, Param::kAlign)) out.spec.align = Align::kEpoch;
  }
  for (const auto& e : validate(out.spec)) errors.push_back(e.param + ": " + e.message);
  return errors.empty();
}

}  // namespace rk::cli
