// cli/flag_set.h: how every ratekeeper command reads its flags: one CLI11 app per command, so that `--help`, the
// "--flag value" / "--flag=value" spellings and the wording of every problem are the same in serve, check-config,
// replay and simulate.
//
//   std::size_t max_keys = 1'000'000;
//   cli::FlagSet flags("usage: ratekeeper replay [flags] < trace");
//   flags.value("--max-keys", "N", "keys tracked (default 1000000)", cli::whole_number(max_keys, 1, 1'000'000'000));
//   const cli::Parsed p = flags.parse(args);
//   if (p.help) out << flags.help();
//   for (const cli::FlagProblem& e : p.problems) err << e.to_string() << "\n";   // "--max-keys: '0' is not ..."
//   if (!p.problems.empty()) err << cli::help_hint("ratekeeper replay");          // one line, not the whole help
//
// A flag's value is checked and stored by its Reader, which answers what the value is not (or "" once stored), so
// that a settings file (cli/serve/settings.h) can say the same of a setting, with its line, and name it as written.
// Every occurrence is read in order, so the last one given wins. Problems are collected, not thrown: one parse
// reports every bad value and every unknown flag.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rk::cli {

// Stores `value`, or returns what it is not ("'ten' is not a number"), storing nothing.
using Reader = std::function<std::string(const std::string& value)>;

struct FlagProblem {
  enum class Kind { kBadValue, kUnknownFlag, kNoValue, kUnexpected };
  Kind kind;
  std::string flag;     // as given, with its dashes ("--limit"); the argument itself for kUnexpected
  std::string message;  // kBadValue: what the value is not
  // "--limit: 'ten' is not a number", "unknown flag --frobnicate", "--limit needs a value", "unexpected argument 'x'"
  std::string to_string() const;
};

struct Parsed {
  bool help = false;  // --help or -h was given: print help() and exit 0, whatever else was
  std::vector<FlagProblem> problems;
};

class FlagSet {
 public:
  // `usage`: the first line(s) of help, "usage: ratekeeper replay [flags] < trace". `notes`: after the flags.
  explicit FlagSet(std::string usage, std::string notes = "");
  FlagSet(const FlagSet&) = delete;  // the Readers' problems are recorded in this object
  FlagSet& operator=(const FlagSet&) = delete;

  // A flag that takes a value, shown as "--name TEXT  help"; `help` may span lines ("\n").
  void value(const std::string& name, const std::string& text, const std::string& help, Reader read);
  // A flag that takes none: given, it sets `on` (also as --name=true, --name=false).
  void toggle(const std::string& name, const std::string& help, bool& on);
  // The one argument without dashes (simulate's scenario, check-config's PATH); a second one is unexpected.
  void positional(const std::string& name, const std::string& help, std::string& out);

  // True for a flag of this set that takes no value (a settings file gives it as true or false).
  bool is_toggle(const std::string& name) const;

  Parsed parse(const std::vector<std::string>& args);
  std::string help() const;
  // The flags alone, as help() lists them (the top-level usage lists replay's).
  std::string flags_help() const;

 private:
  CLI::Validator recorder(const std::string& name, Reader read);  // `read`'s problems go to problems_

  std::unique_ptr<CLI::App> app_;
  std::vector<FlagProblem> problems_;  // filled by the Readers during parse()
};

// The one line that follows a command's errors: where its flags are listed ("see 'ratekeeper serve --help' for
// the flags\n"). The errors are not buried above the whole help, which is --help's answer alone.
std::string help_hint(std::string_view command);

// "'v' is not what": the one wording of a bad value.
std::string is_not(const std::string& value, std::string_view what);

// A string as given.
Reader text(std::string& out);
// Each one given, appended.
Reader text_list(std::vector<std::string>& out);

// A whole number from lo to hi: "'x' is not a whole number from 1 to 64" (or `noun` instead of "a whole number").
std::optional<unsigned long long> read_whole(const std::string& value, unsigned long long lo, unsigned long long hi);
template <class T>
Reader whole_number(T& out, unsigned long long lo, unsigned long long hi, std::string noun = "a whole number") {
  return [&out, lo, hi, noun](const std::string& v) {
    const auto n = read_whole(v, lo, hi);
    if (!n) return is_not(v, noun + " from " + std::to_string(lo) + " to " + std::to_string(hi));
    out = static_cast<T>(*n);
    return std::string();
  };
}

}  // namespace rk::cli
